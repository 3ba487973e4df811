#!/usr/bin/env python3
"""Nsight Compute's details page (CSV) as one line per kernel.

    bench/ncu_table.py NCU_DETAILS.csv

NCU_DETAILS.csv is `ncu --import REPORT --csv --page details` of a report
with the SpeedOfLight, Occupancy, LaunchStats and WarpStateStats sections
(bench/train.sh kernels). Per kernel (instances averaged): calls, mean
duration, DRAM and SM throughput as % of peak, achieved / theoretical
occupancy, registers per thread, block size, and cycles per issued
instruction; the kernels with the most total time first. A memory-bound
kernel near 90 % DRAM is done; one far below, with neither unit busy, waits
on latency (occupancy, too few loads in flight).
"""
import collections
import csv
import re
import sys

COLUMNS = [  # (header, metric name, format)
    ("dram%", "DRAM Throughput", "{:6.1f}"),
    ("sm%", "Compute (SM) Throughput", "{:5.1f}"),
    ("occ%", "Achieved Occupancy", "{:5.1f}"),
    ("th.occ", "Theoretical Occupancy", "{:6.1f}"),
    ("regs", "Registers Per Thread", "{:5.0f}"),
    ("block", "Block Size", "{:5.0f}"),
    ("cpi", "Warp Cycles Per Issued Instruction", "{:5.1f}"),
]
TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}


def short(name):
    name = re.sub(r"\(anonymous namespace\)::|<unnamed>::", "", name)
    if name.endswith(")"):  # the parameter list: back to its matching "("
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    name = re.sub(r"^void ", "", name)
    return name[:100]


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def main():
    path = sys.argv[1]
    kernels = collections.OrderedDict()  # name -> {id -> {metric: value}}
    try:
        f = open(path, newline="")
    except OSError as e:
        print(f"ncu_table: {e}")
        return 0
    with f:
        rows = (line for line in f if line.startswith('"'))  # skip ==PROF== lines
        for r in csv.DictReader(rows):
            name = short(r.get("Kernel Name", "?"))
            m, unit, v = r.get("Metric Name"), r.get("Metric Unit", ""), number(r.get("Metric Value", ""))
            if v is None:
                continue
            if m == "Duration":
                v *= TO_US.get(unit, float("nan"))
            kernels.setdefault(name, {}).setdefault(r["ID"], {})[m] = v
    if not kernels:
        print("ncu_table: no kernels in", path)
        return 0
    table = []
    for name, inst in kernels.items():
        def mean(m):
            vals = [i[m] for i in inst.values() if m in i]
            return sum(vals) / len(vals) if vals else float("nan")
        table.append((mean("Duration") * len(inst), len(inst), mean("Duration"), name,
                      [mean(m) for _, m, _ in COLUMNS]))
    table.sort(reverse=True)
    print(f"{'total us':>9} {'calls':>5} {'mean us':>8} " +
          " ".join(f"{h:>{len(fmt.format(0))}}" for h, _, fmt in COLUMNS) + "  kernel")
    for total, calls, dur, name, vals in table:
        print(f"{total:9.1f} {calls:5d} {dur:8.1f} " +
              " ".join(fmt.format(v) for v, (_, _, fmt) in zip(vals, COLUMNS)) + f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
