#!/usr/bin/env python3
"""Compare aorta attach's per-step records with a reference, for bench/attach.sh.

    attach_compare.py train ATTACH_RUN TRAIN_RUN [KTRACE_RUN] [--skip N]
        attach's steps (NVTX "train step N") against `aorta train`'s own
        event-based records of the same run, per step; medians against a
        separate profiling.kernel_trace=true run's kernel view
        (extra.overlap_kernels) when given.
    attach_compare.py torch PLAIN_OUT ATTACH_OUT ATTACH_RUN [PLAIN2_OUT] [--skip N]
        step time of the PyTorch script with and without attach (overhead),
        its losses (the job's results must not change: against a second
        plain run's, the script's own run-to-run spread), and attach's steps.
    attach_compare.py kineto ATTACH_RUN ANALYZE_RUN [--skip N]
        attach's step medians (the steps it saw) against `aorta analyze` of
        the Kineto trace torch.profiler wrote of the steps attach could not
        see (the two CUPTI clients cannot record one step together).
Prints one JSON object; exit 0 (the numbers are the result, not a verdict).
"""
import json
import statistics
import sys

FIELDS = ("step_ms", "compute_ms", "comm_ms", "overlap_ms", "exposed_comm_ms")


def records(run):
    out = []
    for line in open(run + "/rank_00_metrics.jsonl"):
        if line.endswith("\n"):
            out.append(json.loads(line))
    return out


def train(args, skip):
    attach = {}
    for r in records(args[0]):
        name = (r.get("extra") or {}).get("step_name") or ""
        if name.startswith("train step "):
            attach[int(name.split()[-1])] = r
    own = {r["step"]: r for r in records(args[1]) if r.get("phase", "train") == "train"}
    steps = sorted(s for s in attach if s in own and s >= skip)
    res = {"steps_compared": len(steps), "attach_steps": len(attach)}
    for f in FIELDS:
        diffs = []
        for s in steps:
            a, e = attach[s][f], own[s][f]
            if a is None or e is None:
                continue
            diffs.append(abs(a - e) / max(abs(e), 1e-9))
        res[f] = {
            "attach_median": statistics.median(attach[s][f] for s in steps) if steps else None,
            "events_median": statistics.median(own[s][f] for s in steps) if steps else None,
            "max_rel_diff": max(diffs) if diffs else None,
            "steps_within_5pct": sum(d <= 0.05 for d in diffs),
        }
    if len(args) > 2:
        kt = [r for r in records(args[2]) if r.get("phase", "train") == "train" and r["step"] >= skip]
        kv = [(r.get("extra") or {}).get("overlap_kernels") for r in kt]
        kv = [k for k in kv if k]
        for f in FIELDS:
            vals = [k[f] for k in kv if k.get(f) is not None]
            if vals and res[f]["attach_median"] is not None:
                m = statistics.median(vals)
                res[f]["kernel_trace_median"] = m
                res[f]["median_rel_diff_vs_kernel_trace"] = abs(res[f]["attach_median"] - m) / max(abs(m), 1e-9)
        ownsteps = [own[s]["step_ms"] for s in sorted(own) if s >= skip]
        ktsteps = [r["step_ms"] for r in kt]
        res["train_step_ms_median"] = statistics.median(ownsteps) if ownsteps else None
        res["kernel_trace_step_ms_median"] = statistics.median(ktsteps) if ktsteps else None
    return res


def lines(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]


def torch_cmp(args, skip):
    plain = [d for d in lines(args[0]) if "step" in d]
    att = [d for d in lines(args[1]) if "step" in d]
    p = statistics.median(d["step_ms"] for d in plain if d["step"] >= skip)
    a = statistics.median(d["step_ms"] for d in att if d["step"] >= skip)
    def loss_diff(x, y):
        return max(abs(u["loss"] - v["loss"]) / abs(v["loss"]) for u, v in zip(x, y))
    recs = records(args[2])
    res2 = {}
    if len(args) > 3:
        plain2 = [d for d in lines(args[3]) if "step" in d]
        res2 = {"loss_max_rel_diff_plain_vs_plain": loss_diff(plain2, plain),
                "plain2_step_ms_median": statistics.median(d["step_ms"] for d in plain2 if d["step"] >= skip)}
    return {**res2, "plain_step_ms_median": p, "attach_step_ms_median": a, "overhead_pct": (a - p) / p * 100,
            "loss_max_rel_diff_attach_vs_plain": loss_diff(att, plain), "attach_steps": len(recs),
            "attach_step_ms_median_own": statistics.median(r["step_ms"] for r in recs[skip:]) if len(recs) > skip else None,
            "attach_overlap_ratio_median": statistics.median(r["overlap_ratio"] for r in recs[skip:] if r["overlap_ratio"] is not None) if len(recs) > skip and any(r["overlap_ratio"] is not None for r in recs[skip:]) else None}


def kineto(args, skip):
    att = [r for r in records(args[0]) if r["step"] >= skip]
    ana = records(args[1])
    res = {"attach_steps": len(att), "analyze_steps": len(ana)}
    for f in FIELDS + ("copy_ms", "idle_ms"):
        a = [r[f] for r in att if r[f] is not None]
        k = [r[f] for r in ana if r[f] is not None]
        if a and k:
            ma, mk = statistics.median(a), statistics.median(k)
            res[f] = {"attach_median": ma, "analyze_kineto_median": mk,
                      "rel_diff": abs(ma - mk) / max(abs(mk), 1e-9)}
    return res


def main():
    argv = sys.argv[1:]
    skip = 5
    if "--skip" in argv:
        i = argv.index("--skip")
        skip = int(argv[i + 1])
        del argv[i:i + 2]
    mode, rest = argv[0], argv[1:]
    res = train(rest, skip) if mode == "train" else kineto(rest, skip) if mode == "kineto" else torch_cmp(rest, skip)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
