#!/usr/bin/env bash
# The hardware-queue matrix of `aorta queues` on one GPU (issue 29):
#   bash bench/queues.sh            (AORTA=path/to/aorta, OUT=dir)
# Every workload on 1..64 streams under CUDA_DEVICE_MAX_CONNECTIONS = 1, 8
# and 32 (one process per setting: the driver reads it once), then every
# workload again with --kernel-trace under 32 and hetero under 1 and 8 (event
# concurrency against CUPTI's kernels), and hetero and tiny with --no-hold.
# Prints one
# table (latency p50/p99, efficiency, concurrency per point), the knee of each
# curve, hetero's tiny-kernel p99 at each setting, the kernel check, and
# writes every record plus $OUT/queues_summary.json.
# Env: WORKLOADS, STREAMS, CONNS, ITERS, WARMUP override the matrix.
set -u -o pipefail

AORTA=${AORTA:-build-device/aorta}
OUT=${OUT:-./out}/queues
WORKLOADS=${WORKLOADS:-"hetero tiny gemm experts fsdp pipeline dataload"}
STREAMS=${STREAMS:-1,2,4,8,16,32,64}
CONNS=${CONNS:-"1 8 32"}
ITERS=${ITERS:-30}
WARMUP=${WARMUP:-2}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
failed=0

for c in $CONNS; do
    for w in $WORKLOADS; do
        echo "==== $w, CUDA_DEVICE_MAX_CONNECTIONS=$c"
        if ! CUDA_DEVICE_MAX_CONNECTIONS=$c "$AORTA" queues "$w" --streams "$STREAMS" \
            --iterations "$ITERS" --warmup "$WARMUP" --json "$OUT/$w-c$c.json" \
            >"$OUT/$w-c$c.log" 2>&1; then
            echo "FAILED: $w c=$c"
            tail -5 "$OUT/$w-c$c.log"
            failed=1
        fi
    done
done
# CUPTI tells at most 64 streams apart, the marker's included: 1..32 streams.
kt() {
    echo "==== $1 --kernel-trace, CUDA_DEVICE_MAX_CONNECTIONS=$2"
    CUDA_DEVICE_MAX_CONNECTIONS=$2 "$AORTA" queues "$1" --streams 1,2,4,8,16,32 \
        --iterations "$ITERS" --warmup "$WARMUP" --kernel-trace --json "$OUT/$1-kt$2.json" \
        >"$OUT/$1-kt$2.log" 2>&1 || { echo "FAILED: $1 --kernel-trace c=$2"; failed=1; }
}
for w in $WORKLOADS; do kt "$w" 32; done
kt hetero 1
kt hetero 8
# The host's launch path inside every event pair (the device starts each op as
# it arrives): hetero and tiny under 32 queues.
for w in hetero tiny; do
    echo "==== $w --no-hold, CUDA_DEVICE_MAX_CONNECTIONS=32"
    CUDA_DEVICE_MAX_CONNECTIONS=32 "$AORTA" queues "$w" --streams "$STREAMS" --no-hold \
        --iterations "$ITERS" --warmup "$WARMUP" --json "$OUT/$w-nohold32.json" \
        >"$OUT/$w-nohold32.log" 2>&1 || { echo "FAILED: $w --no-hold"; failed=1; }
done

python3 - "$OUT" <<'PY'
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
    # The knee: the fewest streams that reach 90 % of the best throughput.
    best = max(thr)
    knee = next(r["streams"] for r, t in zip(d["results"], thr) if t >= 0.9 * best)
    summary["knees"].append({"workload": d["workload"], "conns": c, "knee_streams": knee,
                             "best_ops_per_s": best})
print("%-9s %5s %7s %11s %11s %7s %6s %12s" % ("workload", "conns", "streams", "lat_p50_us",
      "lat_p99_us", "effic", "conc", "tiny_p99_us"))
for p in summary["points"]:
    f = lambda v, fmt: (fmt % v) if v is not None else "N/A"
    print("%-9s %5s %7d %11s %11s %7s %6s %12s" % (p["workload"], p["conns"], p["streams"],
          f(p["lat_p50_us"], "%.1f"), f(p["lat_p99_us"], "%.1f"), f(p["efficiency"], "%.3f"),
          f(p["concurrency"], "%.2f"), f(p["tiny_lat_p99_us"], "%.1f")))
print("\nknee (fewest streams reaching 90 % of the best throughput):")
for k in summary["knees"]:
    print("  %-9s conns=%-3s knee=%-3d best=%.0f ops/s" % (k["workload"], k["conns"],
          k["knee_streams"], k["best_ops_per_s"]))
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
PY
exit $failed
