#!/usr/bin/env python3
"""Make N ranks of Kineto traces from one real rank, for bench/xrank_scale.sh.

    bench/make_rank_traces.py SRC.json[.gz] OUTDIR --ranks N [--pad K] [--steps S]

The source's events are written once, as one job's rank: its NCCL kernels'
"Group size" and "Process Group Ranks" say N ranks, distributedInfo keeps
world_size N and loses its rank. The N rank files are hard links to that one
file, named rank0000.json.gz ... (aorta analyze takes the rank from the file
name when the trace has none), so N ranks cost one file's disk whatever N.
Every rank then has the same times: the cross-rank matching does all its
work (N members a collective), with zero skew.

--pad K adds K copies of every compute kernel (with their launches, later in
the same step, on the same stream) to grow the trace without adding a
collective: peak memory should follow ranks x collectives, not trace size.
--steps S keeps the first S ProfilerStep ranges (and what they launched).
"""
import argparse
import gzip
import json
import os
import re
import sys

STEP = re.compile(r"^ProfilerStep#(\d+)$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("outdir")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--pad", type=int, default=0)
    ap.add_argument("--steps", type=int, default=0)
    a = ap.parse_args()
    opener = gzip.open if a.src.endswith(".gz") else open
    with opener(a.src, "rt") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    n = a.ranks
    info = doc.get("distributedInfo", {})
    info.pop("rank", None)
    info["world_size"] = n
    doc["distributedInfo"] = info
    if a.steps:
        steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                       if STEP.match(str(e.get("name", ""))) and e.get("cat") == "user_annotation")
        steps = steps[:a.steps]
        lo, hi = steps[0][0], steps[-1][1]
        launched = {e["args"]["correlation"] for e in events
                    if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
                    and lo <= e["ts"] < hi}
        keep = []
        for e in events:
            corr = e.get("args", {}).get("correlation")
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "ac2g"):
                if corr in launched or e.get("id") in launched:
                    keep.append(e)
            elif "ts" not in e or lo <= e["ts"] < hi:
                keep.append(e)
        events = keep
    ranks = "[" + ", ".join(str(r) for r in range(n)) + "]"
    corr_max = max(e.get("args", {}).get("correlation", 0) for e in events) + 1
    extra = []
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    for e in events:
        args = e.get("args")
        if e.get("cat") == "kernel" and args and "Group size" in args:
            args["Group size"] = n
            args["Process Group Ranks"] = ranks
        elif e.get("cat") == "kernel" and a.pad:
            launch = launches.get(args.get("correlation"))
            for k in range(a.pad):
                c = corr_max
                corr_max += 1
                pad = dict(e, args=dict(args, correlation=c))
                pad["ts"] = e["ts"] + (k + 1) * 0.001  # later, same step
                extra.append(pad)
                if launch:
                    extra.append(dict(launch, args=dict(launch["args"], correlation=c),
                                      ts=launch["ts"] + (k + 1) * 0.001))
    events.extend(extra)
    os.makedirs(a.outdir, exist_ok=True)
    base = os.path.join(a.outdir, "base.json.gz")
    with gzip.open(base, "wt", compresslevel=1) as out:
        out.write(json.dumps(dict(doc, traceEvents=events)))
    width = max(4, len(str(n - 1)))
    for r in range(n):
        os.link(base, os.path.join(a.outdir, "rank%0*d.json.gz" % (width, r)))
    os.remove(base)
    plain = sum(len(json.dumps(e)) + 2 for e in events)
    print("%s: %d ranks of %d events (%.1f MB of JSON each)" % (a.outdir, n, len(events), plain / 1e6),
          file=sys.stderr)


if __name__ == "__main__":
    main()
