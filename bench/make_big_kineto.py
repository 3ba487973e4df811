#!/usr/bin/env python3
"""Make a large Kineto trace from a real one, for bench/analyze.sh's speed check.

    bench/make_big_kineto.py SRC.json[.gz] OUT.json [--mb 1024]

The source's traceEvents are written again and again, each copy shifted in time
past the one before, with its correlation ids, flow ids and ProfilerStep numbers
offset, so the result reads as one long, valid profile of the same job. The
output is plain JSON (the benchmark measures parsing, not gunzip); it is not
committed: write it outside the repository.
"""
import argparse
import gzip
import json
import re
import sys

STEP = re.compile(r"^ProfilerStep#(\d+)$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=1024.0)
    a = ap.parse_args()
    opener = gzip.open if a.src.endswith(".gz") else open
    with opener(a.src, "rt") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    timed = [e for e in events if "ts" in e]
    t0 = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - t0 + 1000.0
    corr = max(e.get("args", {}).get("correlation", 0) for e in events) + 1
    steps = [int(m.group(1)) for e in events if (m := STEP.match(str(e.get("name", ""))))]
    nsteps = max(steps) + 1 if steps else 0
    head = json.dumps(doc)[:-1]  # the metadata, without its closing brace
    target = int(a.mb * 1024 * 1024)
    written = 0
    with open(a.out, "w") as out:
        out.write(head + ', "traceEvents": [\n')
        copy = 0
        first = True
        while written < target:
            for e in events:
                if copy and e.get("ph") == "M":
                    continue
                e = dict(e)
                if "ts" in e:
                    e["ts"] = e["ts"] + copy * span
                if "args" in e and "correlation" in e["args"]:
                    e["args"] = dict(e["args"])
                    e["args"]["correlation"] += copy * corr
                if e.get("cat") == "ac2g" and "id" in e:
                    e["id"] += copy * corr
                m = STEP.match(str(e.get("name", "")))
                if m:
                    e["name"] = "ProfilerStep#%d" % (int(m.group(1)) + copy * nsteps)
                s = ("" if first else ",\n") + json.dumps(e)
                first = False
                out.write(s)
                written += len(s)
            copy += 1
        out.write("\n]}\n")
    print("%s: %d copies, %.0f MB" % (a.out, copy, written / 1e6), file=sys.stderr)


if __name__ == "__main__":
    main()
