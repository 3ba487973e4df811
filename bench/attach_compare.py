#!/usr/bin/env python3
"""Compare aorta attach's per-step records with references, rank by rank, for
bench/attach.sh. Every mode prints a table and writes its JSON with --json FILE.

    attach_compare.py train ATTACH_RUN TRAIN_RUN [--ktrace KTRACE_RUN] [--skip N]
        each rank's attach steps (NVTX "train step N") against that rank's own
        event records of the same run, step by step: step, compute, comm and
        overlap within 5 %, exposed comm within 0.2 ms; medians against a
        separate profiling.kernel_trace=true run's kernel view when given.
    attach_compare.py overhead PLAIN_RUN ATTACHED_RUN [PLAIN2_RUN] [--skip N]
        `aorta train`'s step time (its own records), each rank's median, with
        and without attach: the overhead against the plain runs' mean, and the
        two plain runs' own spread (limit 1 %).
    attach_compare.py torch PLAIN_OUT ATTACH_OUT ATTACH_RUN [PLAIN2_OUT] [--skip N]
        the PyTorch script's step time (rank 0's CUDA events) with and without
        attach (limit 1 %), its losses, and every rank's attach steps.
    attach_compare.py kineto ATTACH_RUN ANALYZE_RUN --steps A:B [--profiled RUN] [--skip N]
        each rank's attach medians over steps A..B-1 (a run without the
        profiler) against `aorta analyze` of the Kineto trace torch.profiler
        wrote of the same steps of another run (the two CUPTI clients cannot
        record one step together): within 5 % (exposed comm: or 0.2 ms). With
        --profiled, the profiled run's attach records too (the steps it saw).
    attach_compare.py processes ATTACH_RUN
        the processes attach saw (run.json's attach.processes): pid, rank,
        device, steps, files; rank 0 must be there with steps.
    attach_compare.py summary JSON...
        one table of every criterion in the JSON files above.
Exit 0: the numbers and their verdicts are the result.
"""
import glob
import json
import os
import statistics
import sys

FIELDS = ("step_ms", "compute_ms", "comm_ms", "overlap_ms", "exposed_comm_ms")
REL = 0.05  # step, compute, comm, overlap
EXPOSED_MS = 0.2
OVERHEAD_PCT = 1.0


def load(path):
    out = []
    for line in open(path):
        if line.endswith("\n"):
            out.append(json.loads(line))
    return out


def ranks(run):
    """{rank: records} of a run directory's rank_NN_metrics.jsonl files."""
    got = {}
    for f in sorted(glob.glob(os.path.join(run, "rank_*_metrics.jsonl"))):
        got[int(os.path.basename(f)[5:].split("_")[0])] = load(f)
    return got


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def rel(a, e):
    return abs(a - e) / max(abs(e), 1e-9)


def within(field, a, e):
    """The criterion: 5 %; exposed comm within 0.2 ms (or 5 %)."""
    if field == "exposed_comm_ms":
        return abs(a - e) <= EXPOSED_MS or rel(a, e) <= REL
    return rel(a, e) <= REL or (a == 0 and e == 0)


def table(title, head, rows):
    print(title)
    w = [max(len(str(x)) for x in col) for col in zip(head, *rows)] if rows else [len(h) for h in head]
    for r in [head] + rows:
        print("  " + "  ".join(str(x).rjust(n) for x, n in zip(r, w)))
    print()


def pct(x):
    return None if x is None else 100 * x


def fmt(x, nd=3):
    return "-" if x is None else f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def train_steps(recs):
    out = {}
    for r in recs:
        name = (r.get("extra") or {}).get("step_name") or ""
        if name.startswith("train step "):
            out[int(name.split()[-1])] = r
    return out


def train(args, opts):
    skip = opts["skip"]
    att, own = ranks(args[0]), ranks(args[1])
    res = {"mode": "train", "ranks": {}, "world": len(own)}
    rows = []
    for rank in sorted(own):
        a = train_steps(att.get(rank, []))
        e = {r["step"]: r for r in own[rank] if r.get("phase", "train") == "train"}
        steps = sorted(s for s in a if s in e and s >= skip)
        rr = {"attach_steps": len(att.get(rank, [])), "steps_compared": len(steps)}
        ok = len(steps) > 0
        for f in FIELDS:
            pairs = [(a[s][f], e[s][f]) for s in steps if a[s][f] is not None and e[s][f] is not None]
            good = sum(within(f, x, y) for x, y in pairs)
            ok = ok and good == len(pairs)
            am, em = med(x for x, _ in pairs), med(y for _, y in pairs)
            rr[f] = {"attach_median": am, "events_median": em,
                     "median_rel_diff": rel(am, em) if am is not None else None,
                     "max_rel_diff": max((rel(x, y) for x, y in pairs), default=None),
                     "max_abs_diff_ms": max((abs(x - y) for x, y in pairs), default=None),
                     "steps_within": good, "steps": len(pairs)}
            rows.append([rank, f, len(pairs), fmt(am), fmt(em),
                         fmt(pct(rr[f]["median_rel_diff"]), 2), fmt(pct(rr[f]["max_rel_diff"]), 2),
                         fmt(rr[f]["max_abs_diff_ms"]), f"{good}/{len(pairs)}"])
        rr["pass"] = ok
        res["ranks"][str(rank)] = rr
    if opts.get("ktrace"):
        kt = ranks(opts["ktrace"])
        for rank, recs in kt.items():
            kv = [(r.get("extra") or {}).get("overlap_kernels") for r in recs
                  if r.get("phase", "train") == "train" and r["step"] >= skip]
            kv = [k for k in kv if k]
            rr = res["ranks"].setdefault(str(rank), {})
            for f in FIELDS:
                m = med(k.get(f) for k in kv)
                if m is not None and f in rr and rr[f]["attach_median"] is not None:
                    rr[f]["kernel_trace_median"] = m
                    rr[f]["median_rel_diff_vs_kernel_trace"] = rel(rr[f]["attach_median"], m)
    res["every_rank_has_steps"] = all(str(r) in res["ranks"] and res["ranks"][str(r)]["attach_steps"] > 0
                                      for r in own)
    res["pass"] = res["every_rank_has_steps"] and all(v.get("pass") for v in res["ranks"].values())
    table(f"attach vs aorta train's own events, per rank and step (steps >= {skip}; "
          f"5 %, exposed 0.2 ms)",
          ["rank", "field", "steps", "attach med", "events med", "med diff %", "max diff %", "max diff ms",
           "within"], rows)
    print("every rank has attach steps:", res["every_rank_has_steps"], " pass:", res["pass"], "\n")
    return res


def overhead(args, opts):
    skip = opts["skip"]
    runs = [ranks(a) for a in args]
    res = {"mode": "overhead", "ranks": {}}
    rows = []
    for rank in sorted(runs[0]):
        m = [med(r["step_ms"] for r in run.get(rank, []) if r.get("phase", "train") == "train"
                 and r["step"] >= skip) for run in runs]
        plain = [m[0]] + ([m[2]] if len(m) > 2 and m[2] is not None else [])
        base = statistics.mean(plain)
        pct = (m[1] - base) / base * 100 if m[1] is not None else None
        spread = abs(plain[0] - plain[1]) / base * 100 if len(plain) > 1 else None
        res["ranks"][str(rank)] = {"plain_step_ms": m[0], "attached_step_ms": m[1],
                                   "plain2_step_ms": m[2] if len(m) > 2 else None,
                                   "overhead_pct": pct, "plain_spread_pct": spread}
        rows.append([rank, fmt(m[0]), fmt(m[2] if len(m) > 2 else None), fmt(m[1]), fmt(pct, 2),
                     fmt(spread, 2)])
    pcts = [v["overhead_pct"] for v in res["ranks"].values() if v["overhead_pct"] is not None]
    res["overhead_pct_max"] = max(pcts) if pcts else None
    res["pass"] = bool(pcts) and max(pcts) <= OVERHEAD_PCT
    table(f"aorta train step time with and without attach (median of steps >= {skip}, ms; limit 1 %)",
          ["rank", "plain", "plain2", "attached", "overhead %", "plain spread %"], rows)
    return res


def lines(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]


def torch_cmp(args, opts):
    skip = opts["skip"]
    plain = [d for d in lines(args[0]) if "step" in d]
    att = [d for d in lines(args[1]) if "step" in d]
    p = med(d["step_ms"] for d in plain if d["step"] >= skip)
    a = med(d["step_ms"] for d in att if d["step"] >= skip)

    def loss_diff(x, y):
        return max(abs(u["loss"] - v["loss"]) / abs(v["loss"]) for u, v in zip(x, y))
    res = {"mode": "torch", "plain_step_ms_median": p, "attach_step_ms_median": a,
           "loss_max_rel_diff_attach_vs_plain": loss_diff(att, plain)}
    base = p
    if len(args) > 3:
        plain2 = [d for d in lines(args[3]) if "step" in d]
        p2 = med(d["step_ms"] for d in plain2 if d["step"] >= skip)
        base = (p + p2) / 2
        res.update({"plain2_step_ms_median": p2, "plain_spread_pct": abs(p - p2) / base * 100,
                    "loss_max_rel_diff_plain_vs_plain": loss_diff(plain2, plain)})
    res["overhead_pct"] = (a - base) / base * 100
    per = {}
    rows = []
    for rank, recs in sorted(ranks(args[2]).items()):
        seen = recs[skip:]
        per[str(rank)] = {"attach_steps": len(recs),
                          "attach_step_ms_median": med(r["step_ms"] for r in seen),
                          "attach_exposed_comm_ms_median": med(r["exposed_comm_ms"] for r in seen),
                          "attach_overlap_ratio_median": med(r["overlap_ratio"] for r in seen)}
        rows.append([rank, len(recs)] + [fmt(per[str(rank)][k]) for k in
                                         ("attach_step_ms_median", "attach_exposed_comm_ms_median",
                                          "attach_overlap_ratio_median")])
    res["ranks"] = per
    world = opts.get("world") or len(per)
    res["every_rank_has_steps"] = all(per.get(str(r), {}).get("attach_steps", 0) > 0 for r in range(world))
    res["pass"] = res["overhead_pct"] <= OVERHEAD_PCT and res["every_rank_has_steps"]
    table("PyTorch script: step time (rank 0's events, median of steps >= %d, ms; limit 1 %%)" % skip,
          ["plain", "plain2", "attached", "overhead %", "plain spread %"],
          [[fmt(p), fmt(res.get("plain2_step_ms_median")), fmt(a), fmt(res["overhead_pct"], 2),
            fmt(res.get("plain_spread_pct"), 2)]])
    table("attach's steps per rank (medians of steps >= %d)" % skip,
          ["rank", "steps", "step ms", "exposed comm ms", "overlap ratio"], rows)
    print("every rank has attach steps:", res["every_rank_has_steps"], " pass:", res["pass"], "\n")
    return res


def kineto(args, opts):
    a0, b0 = (int(x) for x in opts["steps"].split(":"))
    att, ana = ranks(args[0]), ranks(args[1])
    prof = ranks(opts["profiled"]) if opts.get("profiled") else {}
    res = {"mode": "kineto", "steps": [a0, b0], "ranks": {}}
    rows = []
    for rank in sorted(ana):
        a = [r for r in att.get(rank, []) if a0 <= r["step"] < b0]
        k = ana[rank]
        rr = {"attach_steps": len(a), "analyze_steps": len(k)}
        ok = bool(a) and bool(k)
        for f in FIELDS + ("copy_ms", "idle_ms"):
            ma, mk = med(r[f] for r in a), med(r[f] for r in k)
            if ma is None or mk is None:
                continue
            d = {"attach_median": ma, "analyze_kineto_median": mk, "rel_diff": rel(ma, mk),
                 "abs_diff_ms": abs(ma - mk)}
            pr = [r[f] for r in prof.get(rank, []) if r["step"] >= opts["skip"] and r[f] is not None]
            if pr:
                d["profiled_run_attach_median"] = med(pr)
            if f in FIELDS:
                d["pass"] = within(f, ma, mk)
                ok = ok and d["pass"]
            rr[f] = d
            rows.append([rank, f, len(a), len(k), fmt(ma), fmt(mk), fmt(100 * d["rel_diff"], 2),
                         fmt(d.get("profiled_run_attach_median")), "" if f not in FIELDS else d["pass"]])
        rr["pass"] = ok
        res["ranks"][str(rank)] = rr
    res["pass"] = bool(res["ranks"]) and all(v["pass"] for v in res["ranks"].values())
    table(f"attach (steps {a0}..{b0 - 1}) vs aorta analyze of torch.profiler's Kineto trace of "
          f"those steps, per rank (medians; 5 %, exposed 0.2 ms)",
          ["rank", "field", "attach n", "kineto n", "attach", "kineto", "diff %", "profiled run", "pass"],
          rows)
    return res


def processes(args):
    run = json.load(open(os.path.join(args[0], "run.json")))
    listed = run["config"]["attach.processes"]["value"]
    table(f"{args[0]}: the processes attach saw",
          ["pid", "rank", "device", "steps", "files", "note"],
          [[e["pid"], fmt(e["rank"]), fmt(e["device"]), e["steps"], e["files"], e["note"] or ""]
           for e in listed])
    r0 = [e for e in listed if e["rank"] == 0 and e["files"].startswith("rank_")]
    return {"mode": "processes", "processes": listed,
            "pass": bool(r0) and r0[0]["steps"] > 0}


def summary(paths):
    rows = []
    out = {"mode": "summary", "checks": []}
    for p in paths:
        if not os.path.exists(p):
            continue
        r = json.load(open(p))
        name = os.path.basename(os.path.dirname(os.path.abspath(p))) + "/" + os.path.basename(p)
        m = r.get("mode")
        if m == "train":
            v = f"{sum(x.get('pass', False) for x in r['ranks'].values())}/{len(r['ranks'])} ranks"
            lim = "per step: 5 %, exposed 0.2 ms"
        elif m == "overhead":
            v = fmt(r["overhead_pct_max"], 2) + " % (largest rank)"
            lim = "<= 1 %"
        elif m == "torch":
            v = fmt(r["overhead_pct"], 2) + " %"
            lim = "<= 1 %, every rank has steps"
        elif m == "processes":
            v = f"{len(r['processes'])} processes"
            lim = "rank 0 has rank_0*_ files with steps"
        elif m == "kineto":
            v = f"{sum(x['pass'] for x in r['ranks'].values())}/{len(r['ranks'])} ranks"
            lim = "medians: 5 %, exposed 0.2 ms"
        else:
            continue
        rows.append([name, v, lim, r["pass"]])
        out["checks"].append({"file": p, "mode": m, "value": v, "limit": lim, "pass": r["pass"]})
    out["pass"] = bool(rows) and all(r[3] for r in rows)
    table("bench/attach.sh: every criterion", ["check", "value", "limit", "pass"], rows)
    return out


def main():
    argv = sys.argv[1:]
    opts = {"skip": 5}
    for key, conv in (("--skip", int), ("--json", str), ("--ktrace", str), ("--steps", str),
                      ("--profiled", str), ("--world", int)):
        if key in argv:
            i = argv.index(key)
            opts[key[2:]] = conv(argv[i + 1])
            del argv[i:i + 2]
    mode, rest = argv[0], argv[1:]
    fn = {"train": train, "overhead": overhead, "torch": torch_cmp, "kineto": kineto}.get(mode)
    res = summary(rest) if mode == "summary" else processes(rest) if mode == "processes" else fn(rest, opts)
    if opts.get("json"):
        with open(opts["json"], "w") as f:
            json.dump(res, f, indent=1)
    else:
        print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
