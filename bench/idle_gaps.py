#!/usr/bin/env python3
"""Where a step's idle time goes, op boundary by op boundary.

    bench/idle_gaps.py RUN_DIR_OR_METRICS_JSONL [TOP]

For each record of rank 0 that holds its ops (profiling's active windows),
idle_ms (DESIGN §7: the window W less every op of every stream) is split into
its gaps, and each gap is named by the op that ended last before it and the
op that starts first after it (stream:name). The table sums the gaps of each
pair of names per step, largest first (TOP, default 15), with how many there
are and their median length: an op boundary on the compute stream with no
collective running beside it shows up as compute:X -> compute:Y.
"""
import collections
import json
import os
import statistics
import sys


def load(path):
    if os.path.isdir(path):
        path = os.path.join(path, "rank_00_metrics.jsonl")
    with open(path) as f:
        return [r for r in map(json.loads, f) if r.get("ops")]


def gaps(ops, w0, w1):
    """(start, end, before, after) of each stretch of W no op covers."""
    iv = sorted((o["start_us"], o["end_us"], o) for o in ops)
    out, t, last = [], w0, None
    for a, b, o in iv:
        if a > t:
            out.append((t, a, last, o))
        if b > t:
            t, last = b, o
    if w1 > t:
        out.append((t, w1, last, None))
    return out


def label(o):
    return "%s:%s" % (o["stream"], o["name"]) if o else "-"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    recs = load(sys.argv[1])
    if not recs:
        sys.exit("%s: no record with ops (profiling.enabled with an active window)" % sys.argv[1])
    by = collections.defaultdict(list)
    idle, steps = [], []
    for r in recs:
        g = gaps(r["ops"], r["window_start_us"], r["window_end_us"])
        idle.append(sum(b - a for a, b, _, _ in g))
        steps.append(r["step_ms"] * 1e3)
        for a, b, x, y in g:
            by[(label(x), label(y))].append(b - a)
    n = len(recs)
    print("records %d  step median %.1f us  idle median %.1f us (%.2f %%)  idle_ms field median %.1f us"
          % (n, statistics.median(steps), statistics.median(idle),
             100 * statistics.median(idle) / statistics.median(steps),
             1e3 * statistics.median(r["idle_ms"] for r in recs)))
    print("%9s %7s %9s  %s" % ("us/step", "n/step", "median_us", "before -> after"))
    rows = sorted(by.items(), key=lambda kv: -sum(kv[1]))
    for (x, y), v in rows[:top]:
        print("%9.1f %7.1f %9.2f  %s -> %s" % (sum(v) / n, len(v) / n, statistics.median(v), x, y))


if __name__ == "__main__":
    main()
