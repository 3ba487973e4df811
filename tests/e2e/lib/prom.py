"""Checks of aorta's Prometheus export for the e2e scripts (export.sh,
prometheus.sh): a strict reader of the text format 0.0.4, the series a run
directory's files imply, and waits that poll with a bounded number of tries
(ordered by what the processes print and serve, never by a sleep that
assumes a speed).

    prom.py port                          a free loopback port
    prom.py url LOG PID                   the URL an "aorta: export: serving" line in LOG names
    prom.py live URL RUN NRANKS           /metrics has every rank's steps, and they grow
    prom.py final URL RUNDIR              /metrics equals what RUNDIR's files hold
    prom.py http URL                      refusals: 404, 405, 400
    prom.py prom-ready PROM PID           Prometheus answers /-/ready
    prom.py prom-live PROM JOB RUN NRANKS Prometheus has every rank's series, and steps grow
    prom.py prom-final PROM JOB RUNDIR    Prometheus's latest values equal the files'
A failed check prints one line and exits 1.
"""
import glob
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

TRIES = 1500  # x 0.2 s: a bound that ends a broken test, not a speed check
KINDS = ("allgather", "reducescatter", "allreduce", "broadcast")
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def die(msg):
    print("prom.py: " + msg, file=sys.stderr)
    sys.exit(1)


def alive(pid):
    """Running: not gone, not a zombie its shell has yet to wait for."""
    try:
        with open("/proc/%d/stat" % int(pid)) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def poll(what, fn, pid=None):
    """fn() until it returns something true; its value. Exit 3 when process
    pid ended first (the caller says why)."""
    last = None
    for _ in range(TRIES):
        dead = pid is not None and not alive(pid)  # before the look: it may print, then end
        try:
            got = fn()
            if got:
                return got
        except (OSError, urllib.error.URLError, ValueError) as e:
            last = e
        if dead:
            sys.exit(3)
        time.sleep(0.2)
    die("%s: not after %d tries (last error: %s)" % (what, TRIES, last))


def parse_labels(s):
    labels, i = {}, 0
    while i < len(s):
        m = LABEL.match(s, i)
        if not m or s[m.end():m.end() + 2] != '="':
            raise ValueError("bad label at %r" % s[i:])
        name, i, val = m.group(0), m.end() + 2, []
        while s[i] != '"':
            if s[i] == "\\":
                esc = {"\\": "\\", '"': '"', "n": "\n"}.get(s[i + 1])
                if esc is None:
                    raise ValueError("bad escape in %r" % s)
                val.append(esc)
                i += 2
            else:
                val.append(s[i])
                i += 1
        if name in labels:
            raise ValueError("label %s twice" % name)
        labels[name] = "".join(val)
        i += 1
        if i < len(s):
            if s[i] != ",":
                raise ValueError("no comma in %r" % s)
            i += 1
    return labels


def parse(text):
    """{(name, ((label, value), ...)): value}, after checking the grammar."""
    if not text.endswith("\n"):
        raise ValueError("the exposition does not end in a newline")
    samples, families, cur, typed = {}, set(), None, False
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            cur = line[7:].split(" ", 1)[0]
            if not NAME.match(cur) or cur in families:
                raise ValueError("bad or repeated HELP: %r" % line)
            families.add(cur)
            typed = False
        elif line.startswith("# TYPE "):
            name, typ = line[7:].split(" ")
            if name != cur or typ not in ("counter", "gauge"):
                raise ValueError("bad TYPE: %r" % line)
            if (typ == "counter") != name.endswith("_total"):
                raise ValueError("a counter not in _total, or the reverse: %r" % line)
            typed = True
        else:
            m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$", line)
            if not m or m.group(1) != cur or not typed:
                raise ValueError("bad sample line: %r" % line)
            v = m.group(3)
            value = float(v) if v not in ("+Inf", "-Inf", "NaN") else float(v.replace("Inf", "inf"))
            key = (cur, tuple(sorted(parse_labels(m.group(2)).items())))
            if key in samples:
                raise ValueError("sample twice: %r" % line)
            samples[key] = value
    return samples


def scrape(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        ctype = r.headers.get("Content-Type")
        if ctype != "text/plain; version=0.0.4; charset=utf-8":
            raise ValueError("Content-Type %r" % ctype)
        return parse(r.read().decode("utf-8"))


def get(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def truth(rundir):
    """Per rank label: (train records, the last one), from the files."""
    out = {}
    for path in sorted(glob.glob(os.path.join(rundir, "rank_*_metrics.jsonl"))):
        mid = os.path.basename(path)[5:-len("_metrics.jsonl")]
        label = str(int(mid)) if mid.isdigit() else mid
        recs = []
        with open(path) as f:
            for line in f:
                if line.endswith("\n") and line.strip():
                    rec = json.loads(line)
                    if rec["phase"] == "train":
                        recs.append(rec)
        out[label] = (len(recs), recs[-1] if recs else None)
    return out


def expected(run, rundir):
    """The samples the files imply (the ones these checks compare)."""
    want = {}
    for rank, (n, last) in truth(rundir).items():
        want[("aorta_steps_total", run, rank, None)] = n
        if last is None:
            continue
        want[("aorta_last_step", run, rank, None)] = last["step"]
        want[("aorta_step_seconds", run, rank, None)] = last["step_ms"] * 1e-3
        want[("aorta_comm_seconds", run, rank, None)] = last["comm_ms"] * 1e-3
        for k in KINDS:
            if last["collectives"][k]["ops"] > 0:
                want[("aorta_exposed_comm_seconds", run, rank, k)] = last["exposed_%s_ms" % k] * 1e-3
    return want


def live_ok(samples, run, nranks, old):
    """Every rank has steps and the kinds an FSDP step runs; returns rank 0's
    steps once they exceed old (None: any)."""
    for r in map(str, range(nranks)):
        if not (get(samples, "aorta_steps_total", run=run, rank=r) or 0) > 0:
            return None
        for k in ("allgather", "reducescatter"):
            v = get(samples, "aorta_exposed_comm_seconds", run=run, rank=r, kind=k)
            if v is None or v < 0:
                return None
    n = get(samples, "aorta_steps_total", run=run, rank="0")
    return n if old is None or n > old else None


def cmd_live(url, run, nranks):
    nranks = int(nranks)
    first = poll("every rank's steps on " + url, lambda: live_ok(scrape(url), run, nranks, None))
    # the run goes on: later lines land in later scrapes
    poll("rank 0's steps past %d on %s" % (first, url), lambda: live_ok(scrape(url), run, nranks, first))


def cmd_final(url, rundir):
    run = os.path.basename(os.path.realpath(rundir))
    samples = scrape(url)
    want = expected(run, rundir)
    for (name, run_, rank, kind), v in sorted(want.items()):
        labels = {"run": run_, "rank": rank}
        if kind:
            labels["kind"] = kind
        got = get(samples, name, **labels)
        if got != v:
            die("%s%s is %r; the files say %r" % (name, labels, got, v))
    for rank in truth(rundir):
        bad = get(samples, "aorta_export_bad_lines_total", run=run, rank=rank)
        if bad != 0:
            die("rank %s: aorta_export_bad_lines_total is %r, not 0" % (rank, bad))
    nfiles = get(samples, "aorta_export_rank_files", run=run)
    if nfiles != len(truth(rundir)):
        die("aorta_export_rank_files is %r, not %d" % (nfiles, len(truth(rundir))))


def raw(url, request):
    u = urllib.parse.urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=60) as s:
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data.decode("latin-1")
            data += chunk


def cmd_http(url):
    path = urllib.parse.urlparse(url).path
    for req, status in ((b"GET /nope HTTP/1.1\r\n\r\n", "404"),
                        (("POST %s HTTP/1.1\r\nContent-Length: 0\r\n\r\n" % path).encode(), "405"),
                        (b"hello\r\n", "400")):
        got = raw(url, req)
        if not got.startswith("HTTP/1.1 %s " % status):
            die("%r answered %r, not %s" % (req, got[:40], status))


def query(prom, q):
    u = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(u, timeout=60) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise ValueError("query %s: %s" % (q, doc))
    return {tuple(sorted((k, v) for k, v in e["metric"].items() if k not in ("__name__", "instance"))):
            float(e["value"][1]) for e in doc["data"]["result"]}


def qget(result, **labels):
    return result.get(tuple(sorted(labels.items())))


def prom_live_ok(prom, job, run, nranks, old):
    steps = query(prom, 'aorta_steps_total{job="%s"}' % job)
    exposed = query(prom, 'aorta_exposed_comm_seconds{job="%s"}' % job)
    for r in map(str, range(nranks)):
        if not (qget(steps, job=job, run=run, rank=r) or 0) > 0:
            return None
        for k in ("allgather", "reducescatter"):
            if qget(exposed, job=job, run=run, rank=r, kind=k) is None:
                return None
    n = qget(steps, job=job, run=run, rank="0")
    return n if old is None or n > old else None


def cmd_prom_live(prom, job, run, nranks):
    nranks = int(nranks)
    first = poll("Prometheus: every rank of job %s" % job,
                 lambda: prom_live_ok(prom, job, run, nranks, None))
    poll("Prometheus: job %s's rank 0 steps past %d" % (job, first),
         lambda: prom_live_ok(prom, job, run, nranks, first))


def cmd_prom_final(prom, job, rundir):
    run = os.path.basename(os.path.realpath(rundir))
    want = expected(run, rundir)

    def same():
        for (name, run_, rank, kind), v in want.items():
            labels = {"job": job, "run": run_, "rank": rank}
            if kind:
                labels["kind"] = kind
            if qget(query(prom, '%s{job="%s"}' % (name, job)), **labels) != v:
                return False
        return True
    poll("Prometheus: job %s's latest values equal the files'" % job, same)


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "port":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            print(s.getsockname()[1])
    elif cmd == "url":
        def url():
            with open(args[0]) as f:
                m = re.search(r"^aorta: export: serving run .* on (http://\S+)$", f.read(), re.M)
            return m and m.group(1)
        print(poll("a serving line in " + args[0], url, args[1]))
    elif cmd == "live":
        cmd_live(*args)
    elif cmd == "final":
        cmd_final(*args)
    elif cmd == "http":
        cmd_http(*args)
    elif cmd == "prom-ready":
        poll("Prometheus ready at " + args[0],
             lambda: urllib.request.urlopen(args[0] + "/-/ready", timeout=60).status == 200, args[1])
    elif cmd == "prom-live":
        cmd_prom_live(*args)
    elif cmd == "prom-final":
        cmd_prom_final(*args)
    else:
        die("unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
