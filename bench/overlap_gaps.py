#!/usr/bin/env python3
"""Where event-based overlap and kernel-level overlap part, op by op.

    bench/overlap_gaps.py RUN_DIR_OR_METRICS_JSONL [TOP]

For each record of rank 0 that holds both its ops (event pairs) and its
kernels (profiling windows with profiling.kernel_trace), with C/M the compute
and communication time by events and Ck/Mk by kernels:

    overlap(events) - overlap(kernels) = A + B + rest
    A = |C ∩ (M \\ Mk)|   a collective's event pair beyond its kernels, under compute
    B = |(C \\ Ck) ∩ Mk|  a compute op's time between its kernels, under a collective kernel

B's pieces are grouped by the kernels around them (the compute kernel before
and after, and any copy/memset activity inside), A's by head (pair start to
first kernel) and tail (last kernel to pair end). TOP groups are printed.
"""
import collections
import re
import json
import os
import statistics
import sys


def union(iv):
    out = []
    for a, b in sorted(iv):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def intersect(x, y):
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b:
            out.append([a, b])
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(x, y):
    out, j = [], 0
    for a, b in x:
        cur = a
        while j < len(y) and y[j][1] <= cur:
            j += 1
        k = j
        while k < len(y) and y[k][0] < b:
            if y[k][0] > cur:
                out.append([cur, y[k][0]])
            cur = max(cur, y[k][1])
            k += 1
        if cur < b:
            out.append([cur, b])
    return out


def length(x):
    return sum(b - a for a, b in x)


def short(name, n=48):
    name = name or "?"
    for p in ("void ", "_Z"):
        if name.startswith(p):
            name = name[len(p):]
    # aorta's own kernels live in an anonymous namespace whose mangled
    # prefix says nothing: N48_GLOBAL__N__<48 chars>, then the kernel's
    # length-prefixed name
    m = re.match(r"^N(\d+)_GLOBAL__N__", name)
    if m:
        rest = name[len(m.group(0)) - len("_GLOBAL__N__") + int(m.group(1)):]
        k = re.match(r"^(\d+)", rest)
        if k:
            name = rest[len(k.group(1)):len(k.group(1)) + int(k.group(1))]
    return name[:n]


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    if os.path.isdir(path):
        path = os.path.join(path, "rank_00_metrics.jsonl")
    b_groups = collections.defaultdict(lambda: [0, 0.0])
    heads, tails, rows = [], [], []
    for line in open(path):
        r = json.loads(line)
        kern = (r.get("extra") or {}).get("kernels")
        ops = r.get("ops")
        if not kern or not ops or r.get("phase") != "train":
            continue
        C = union([(o["start_us"], o["end_us"]) for o in ops if o["class"] == "compute"])
        M = union([(o["start_us"], o["end_us"]) for o in ops if o["class"] == "comm"])
        Ck = union([(k["start_us"], k["end_us"]) for k in kern if k["class"] == "compute"])
        Mk = union([(k["start_us"], k["end_us"]) for k in kern if k["class"] == "comm"])
        ov_e, ov_k = length(intersect(C, M)), length(intersect(Ck, Mk))
        A = length(intersect(C, subtract(M, Mk)))
        Bset = intersect(subtract(C, Ck), Mk)
        B = length(Bset)
        rows.append((r["step"], ov_e, ov_k, A, B, ov_e - ov_k - A - B))
        comp_k = sorted((k for k in kern if k["class"] == "compute"), key=lambda k: k["start_us"])
        others = [k for k in kern if k["class"] == "copy"]
        for a, b in Bset:
            prev = max((k for k in comp_k if k["end_us"] <= a + 1e-3), key=lambda k: k["end_us"],
                       default=None)
            nxt = min((k for k in comp_k if k["start_us"] >= b - 1e-3),
                      key=lambda k: k["start_us"], default=None)
            inside = sorted({short(k["name"], 20) for k in others
                             if k["start_us"] < b and k["end_us"] > a})
            key = (short(prev["name"]) if prev else "-", short(nxt["name"]) if nxt else "-",
                   ",".join(inside) or "-")
            b_groups[key][0] += 1
            b_groups[key][1] += b - a
        comm_k = [k for k in kern if k["class"] == "comm"]
        for o in ops:
            if o["class"] != "comm":
                continue
            ks = [k for k in comm_k if k["start_us"] < o["end_us"] + 5 and k["end_us"] > o["start_us"] - 5]
            if not ks:
                continue
            heads.append(min(k["start_us"] for k in ks) - o["start_us"])
            tails.append(o["end_us"] - max(k["end_us"] for k in ks))
    if not rows:
        print("no record holds both ops and kernels (profiling windows with profiling.kernel_trace)")
        return
    print(f"{'step':>5} {'ovl ev':>9} {'ovl k':>9} {'A pair':>8} {'B gaps':>8} {'rest':>8}  (ms)")
    for s, e, k, a, b, rest in rows:
        print(f"{s:5d} {e / 1e3:9.3f} {k / 1e3:9.3f} {a / 1e3:8.3f} {b / 1e3:8.3f} {rest / 1e3:8.3f}")
    if heads:
        print(f"\ncollectives: {len(heads)}; pair start to first kernel median {statistics.median(heads):.1f} us, "
              f"last kernel to pair end median {statistics.median(tails):.1f} us "
              f"(p90 {sorted(tails)[int(0.9 * (len(tails) - 1))]:.1f})")
    n = len(rows)
    print(f"\nB by the compute kernels around each gap (per step, {n} steps):")
    print(f"{'us/step':>9} {'count':>6}  before -> after [copy/memset inside]")
    for (p, q, ins), (c, us) in sorted(b_groups.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{us / n:9.1f} {c / n:6.1f}  {p} -> {q} [{ins}]")


if __name__ == "__main__":
    main()
