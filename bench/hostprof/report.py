#!/usr/bin/env python3
"""Where a host thread's wall time went, from hostprof's samples.

    bench/hostprof/report.py FILE [EXE] [--top N] [--under FUNCTION] [--skip FRACTION]

FILE is one HOSTPROF_OUT.<pid> file (hostprof.c). EXE is a local copy of the
profiled executable (the carried build-device/aorta), used to name its
functions with addr2line; without it, frames are named by their file only.
Prints three tables, as % of samples (each sample = HOSTPROF_US of wall time):
  leaf        where the thread was: a function of EXE, or a library
  inclusive   functions of EXE on the stack (a function and all it calls)
  call site   for samples inside a library, the EXE function that called it
--under keeps only the samples with FUNCTION on the stack (run_loop: the
training loop, without start-up and exit); --skip drops that fraction of
those samples from the start (samples are in time order: --skip 0.2 leaves
out the first steps' one-time costs, such as cuBLASLt's first heuristic).
"""
import bisect
import collections
import os
import subprocess
import sys


def main():
    argv, opts = sys.argv[1:], {"--top": "30", "--under": None, "--skip": "0"}
    args = []
    while argv:
        a = argv.pop(0)
        if a in opts:
            opts[a] = argv.pop(0)
        else:
            args.append(a)
    top, under, skip = int(opts["--top"]), opts["--under"], float(opts["--skip"])
    path, exe = args[0], (args[1] if len(args) > 1 else None)
    maps, samples, header = [], [], ""
    with open(path) as f:
        for line in f:
            if line.startswith("H "):
                header = line[2:].strip()
            elif line.startswith("M "):
                p = line[2:].split()
                if len(p) >= 6 and "x" in p[1]:
                    lo, hi = (int(x, 16) for x in p[0].split("-"))
                    maps.append((lo, hi, int(p[2], 16), p[5]))
            elif line.startswith("S "):
                samples.append([int(x, 16) for x in line[2:].split()])
    maps.sort()
    starts = [m[0] for m in maps]

    def locate(a):
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and maps[i][0] <= a < maps[i][1]:
            lo, _, off, name = maps[i]
            return name, a - lo + off
        return "?", a

    exe_name = None
    if exe:
        base = os.path.basename(exe)
        exe_name = next((m[3] for m in maps if os.path.basename(m[3]) == base), None)
    stacks = []
    for s in samples:
        pc, frames = s[0], s[1:]
        # Drop the handler's own frames: the stack starts at the interrupted pc.
        k = frames.index(pc) if pc in frames else min(2, len(frames))
        frames = frames[k:] or [pc]
        # Return addresses point after the call: look up the call itself.
        stacks.append([locate(a if j == 0 else a - 1) for j, a in enumerate(frames)])

    names = {}
    if exe and exe_name:
        offs = sorted({o for st in stacks for (n, o) in st if n == exe_name})
        out = subprocess.run(["addr2line", "-f", "-e", exe] + [hex(o) for o in offs],
                             capture_output=True, text=True).stdout.split("\n")
        for i, o in enumerate(offs):
            names[o] = out[2 * i] if 2 * i < len(out) else "?"

    def label(fr):
        n, o = fr
        if n == exe_name:
            return names.get(o, hex(o))
        return "[" + os.path.basename(n) + "]"

    leaf, incl, site = collections.Counter(), collections.Counter(), collections.Counter()
    chosen = [[label(fr) for fr in st] for st in stacks]
    chosen = [ls for ls in chosen if not under or under in ls]
    chosen = chosen[int(skip * len(chosen)):]
    kept = len(chosen)
    for labels in chosen:
        leaf[labels[0]] += 1
        for l in set(x for x in labels if not x.startswith("[")):
            incl[l] += 1
        if labels[0].startswith("["):
            caller = next((x for x in labels if not x.startswith("[")), "?")
            site[f"{caller} -> {labels[0]}"] += 1
    n = kept or 1
    print(f"# {path}: {header}" + (f", {kept} under {under}" if under else ""))
    for title, c in (("leaf", leaf), ("inclusive", incl), ("call site", site)):
        print(f"\n{title} (% of {kept} samples)")
        for k, v in c.most_common(top):
            print(f"{100.0 * v / n:7.2f}  {k}")


if __name__ == "__main__":
    main()
