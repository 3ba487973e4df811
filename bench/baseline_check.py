#!/usr/bin/env python3
"""Why a run's events and kernels disagree, per phase (DESIGN §7, baselines).

    bench/baseline_check.py RUN_DIR [--rank R] [--json FILE]

Reads the records that carry both their ops (profiling windows) and their
kernels (profiling.kernel_trace): run the baselines inside a window, e.g.
profiling.enabled=true profiling.skip_first=<summary_skip_steps> profiling.wait=0
profiling.warmup=0 profiling.active=<2 x baseline_steps + 2> profiling.repeat=1.

For each phase (compute_only, comm_only, train), medians over its records:
  compute: events |C_e| against kernels |C_k|; |C_e| - |C_k| is exactly
    "gaps" (|C_e \\ C_k|: time inside a compute op's event pair with no compute
    kernel running: launch gaps between kernels, waits for SMs) less
    "outside" (|C_k \\ C_e|: compute kernels, memcpys and memsets the
    kernel trace counts as compute that no compute op's pair holds),
    with the kernels outside by name and the gaps by op name;
  comm: the same for communication, and for each collective's pair its
    opening (first NCCL kernel's start - pair start) and closing (pair end -
    last kernel's end), the pairs with no NCCL kernel, and the other device
    work that overlaps the openings (by name).
Exit 0 always: it reports, the caller judges (issue 47: 2 % compute, 5 % comm).
"""
import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overlap_gaps import length, subtract, union as norm  # noqa: E402  (one interval set)


def intersect_len(a, b):
    return length(a) - length(subtract(a, b))


def med(v):
    return statistics.median(v) if v else float("nan")


def analyse(rec):
    ops, ks = rec["ops"], rec["extra"]["kernels"]
    r = {}
    for cls in ("compute", "comm"):
        ce = norm([(o["start_us"], o["end_us"]) for o in ops if o["class"] == cls])
        ck = norm([(k["start_us"], k["end_us"]) for k in ks if k["class"] == cls])
        gaps, outside = subtract(ce, ck), subtract(ck, ce)
        r[cls] = {"events": length(ce) / 1e3, "kernels": length(ck) / 1e3,
                  "gaps": length(gaps) / 1e3, "outside": length(outside) / 1e3}
        by_name = defaultdict(float)  # kernel time outside every pair of its class
        for k in ks:
            if k["class"] == cls:
                by_name[k["name"][:70]] += length(subtract(norm([(k["start_us"], k["end_us"])]),
                                                           ce)) / 1e3
        r[cls]["outside_by_name"] = by_name
        by_op = defaultdict(float)  # gap time inside each op's pair, by op name
        for o in ops:
            if o["class"] == cls:
                by_op[o["name"]] += intersect_len(norm([(o["start_us"], o["end_us"])]), gaps) / 1e3
        r[cls]["gaps_by_op"] = by_op
    nccl = sorted((k for k in ks if k["class"] == "comm"), key=lambda k: k["start_us"])
    opening, closing, empty, near = [], [], 0, defaultdict(float)
    for o in ops:
        if o["class"] != "comm":
            continue
        inside = [k for k in nccl if o["start_us"] <= (k["start_us"] + k["end_us"]) / 2 < o["end_us"]]
        if not inside:
            empty += 1
            continue
        first, last = inside[0]["start_us"], max(k["end_us"] for k in inside)
        opening.append(first - o["start_us"])
        closing.append(o["end_us"] - last)
        gap = norm([(o["start_us"], first)])
        for k in ks:  # what else ran while the pair waited for its kernel
            if k["class"] != "comm":
                t = intersect_len(gap, norm([(k["start_us"], k["end_us"])]))
                if t > 0:
                    near[k["name"][:70]] += t / 1e3
    r["pairs"] = {"opening_us": opening, "closing_us": closing, "empty": empty, "near": near}
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    phases = defaultdict(list)
    with open(f"{a.run}/rank_{a.rank:02d}_metrics.jsonl") as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("ops") and (rec.get("extra") or {}).get("kernels"):
                phases[rec["phase"]].append(analyse(rec))
    if not phases:
        print(f"{a.run}: no record of rank {a.rank} has both ops and kernels "
              "(profiling windows with profiling.kernel_trace)")
        return 0
    out = {}
    for phase in ("compute_only", "comm_only", "train"):
        rs = phases.get(phase)
        if not rs:
            continue
        print(f"== {phase}: {len(rs)} record(s) of rank {a.rank}, medians, ms a step")
        o = out[phase] = {"records": len(rs)}
        for cls in ("compute", "comm"):
            v = {k: med([r[cls][k] for r in rs]) for k in ("events", "kernels", "gaps", "outside")}
            if not v["events"] and not v["kernels"]:
                continue
            d = 100 * (v["events"] - v["kernels"]) / v["kernels"] if v["kernels"] else float("nan")
            print(f"  {cls:8} events {v['events']:9.3f}  kernels {v['kernels']:9.3f}  "
                  f"({d:+.1f} %) = gaps in pairs {v['gaps']:.3f} - kernels outside pairs "
                  f"{v['outside']:.3f}")
            names = defaultdict(list)
            for r in rs:
                for n, t in r[cls]["outside_by_name"].items():
                    names[n].append(t)
            top = sorted(((sum(t) / len(rs), n) for n, t in names.items()), reverse=True)[:5]
            for t, n in top:
                if t >= 0.005:
                    print(f"      outside pairs {t:8.3f}  {n}")
            gops = defaultdict(list)
            for r in rs:
                for n, t in r[cls]["gaps_by_op"].items():
                    gops[n].append(t)
            for n, t in sorted(gops.items(), key=lambda x: -sum(x[1])):
                if sum(t) / len(rs) >= 0.005:
                    print(f"      gaps in {n:14} {sum(t) / len(rs):8.3f}")
            v["outside_top"] = [[n, t] for t, n in top]
            v["gaps_by_op"] = {n: sum(t) / len(rs) for n, t in gops.items()}
            o[cls] = v
        op = [x for r in rs for x in r["pairs"]["opening_us"]]
        cl = [x for r in rs for x in r["pairs"]["closing_us"]]
        if op:
            near = defaultdict(float)
            for r in rs:
                for n, t in r["pairs"]["near"].items():
                    near[n] += t / len(rs)
            empty = sum(r["pairs"]["empty"] for r in rs)
            print(f"  collective pairs: {len(op)}, opening median {med(op):.1f} us "
                  f"(max {max(op):.1f}), closing median {med(cl):.1f} us (max {max(cl):.1f}), "
                  f"{empty} with no NCCL kernel inside")
            for n, t in sorted(near.items(), key=lambda x: -x[1])[:5]:
                print(f"      beside the openings {t:8.3f}  {n}")
            o["pairs"] = {"n": len(op), "opening_us_median": med(op), "opening_us_max": max(op),
                          "closing_us_median": med(cl), "closing_us_max": max(cl),
                          "empty": empty, "beside_openings_ms": dict(near)}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
