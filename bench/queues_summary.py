#!/usr/bin/env python3
"""The summary of bench/queues.sh: python3 bench/queues_summary.py DIR reads the
`aorta queues --json` records there (WORKLOAD-cN.json: the matrix; WORKLOAD-ktN.json:
--kernel-trace), prints the table, the knees, hetero's short-kernel p99 and the
events-against-kernels check, and writes DIR/queues_summary.json."""
import glob, json, os, sys
out = sys.argv[1]
rows, summary = [], {"points": [], "knees": [], "hetero_tiny_p99_us": [], "kernel_check": []}
for f in sorted(glob.glob(os.path.join(out, "*-c[0-9]*.json"))):
    d = json.load(open(f))
    c = d["env"].get("CUDA_DEVICE_MAX_CONNECTIONS")
    thr = [r["throughput_ops_per_s"] or 0 for r in d["results"]]
    for r in d["results"]:
        tiny = next((o for o in r["ops"] if o["name"] == "tiny"), None)
        p = {"workload": d["workload"], "conns": c, "streams": r["streams"],
             "lat_p50_us": r["latency_us"]["p50"], "lat_p99_us": r["latency_us"]["p99"],
             "efficiency": r["scaling_efficiency"], "throughput": r["throughput_ops_per_s"],
             "concurrency": r["union"]["concurrency"],
             "tiny_lat_p99_us": tiny["latency_us"]["p99"] if tiny else None}
        summary["points"].append(p)
    # Two knees: the fewest streams that reach 90 % of the best throughput, and
    # the most streams before the scaling efficiency first falls below 90 % of
    # its best so far (where adding streams stops paying for the work added).
    best = max(thr)
    knee = next(r["streams"] for r, t in zip(d["results"], thr) if t >= 0.9 * best)
    ek, top = d["results"][0]["streams"], 0
    for r in d["results"]:
        e = r["scaling_efficiency"] or 0
        if e < 0.9 * top:
            break
        top, ek = max(top, e), r["streams"]
    summary["knees"].append({"workload": d["workload"], "conns": c, "knee_streams": knee,
                             "best_ops_per_s": best, "efficiency_knee_streams": ek})
print("%-9s %5s %7s %11s %11s %7s %6s %12s" % ("workload", "conns", "streams", "lat_p50_us",
      "lat_p99_us", "effic", "conc", "tiny_p99_us"))
for p in summary["points"]:
    f = lambda v, fmt: (fmt % v) if v is not None else "N/A"
    print("%-9s %5s %7d %11s %11s %7s %6s %12s" % (p["workload"], p["conns"], p["streams"],
          f(p["lat_p50_us"], "%.1f"), f(p["lat_p99_us"], "%.1f"), f(p["efficiency"], "%.3f"),
          f(p["concurrency"], "%.2f"), f(p["tiny_lat_p99_us"], "%.1f")))
print("\nknees: throughput (fewest streams reaching 90 % of the best ops/s), efficiency (most")
print("streams before the efficiency falls below 90 % of its best so far):")
for k in summary["knees"]:
    print("  %-9s conns=%-3s throughput knee=%-3d efficiency knee=%-3d best=%.0f ops/s" % (
          k["workload"], k["conns"], k["knee_streams"], k["efficiency_knee_streams"],
          k["best_ops_per_s"]))
print("\nhetero tiny-kernel latency p99 (us) by streams:")
for p in summary["points"]:
    if p["workload"] == "hetero":
        summary["hetero_tiny_p99_us"].append(p)
        print("  conns=%-3s streams=%-3d tiny p99=%.1f" % (p["conns"], p["streams"],
              p["tiny_lat_p99_us"]))
print("\nevents vs CUPTI kernels (concurrency):")
for f in sorted(glob.glob(os.path.join(out, "*-kt*.json"))):
    d = json.load(open(f))
    c = d["env"].get("CUDA_DEVICE_MAX_CONNECTIONS")
    for r in d["results"]:
        k = r["kernels"]
        if not k:
            continue
        diff = k["concurrency_diff_pct"]
        within = diff is not None and abs(diff) <= 5
        summary["kernel_check"].append({"workload": d["workload"], "conns": c,
            "streams": r["streams"],
            "events": r["union"]["concurrency"], "kernels": k["union"]["concurrency"],
            "diff_pct": diff, "within_5pct": within})
        print("  %-9s conns=%-3s streams=%-3d events=%.3f kernels=%.3f diff=%+.2f %% %s" % (
              d["workload"], c, r["streams"], r["union"]["concurrency"], k["union"]["concurrency"], diff,
              "ok" if within else "OUTSIDE 5 %"))
json.dump(summary, open(os.path.join(out, "queues_summary.json"), "w"), indent=1)
print("\nwrote %s" % os.path.join(out, "queues_summary.json"))
