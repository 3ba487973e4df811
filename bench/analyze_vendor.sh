#!/usr/bin/env bash
# aorta analyze on large rocprofv3 (CSV, rocpd) and Nsight Systems traces:
# wall time, CPU time and peak RSS of one rank's trace each, read and analysed
# on one thread. The traces are generated (bench/make_big_vendor.py) from the
# hand-written test traces, N kernels with one launch each and a step every
# 1000 kernels.
#   bench/analyze_vendor.sh BUILD_DIR [N]      (N: kernels, default 1000000)
set -euo pipefail
BUILD="${1:?usage: bench/analyze_vendor.sh BUILD_DIR [KERNELS]}"
N="${2:-1000000}"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

python3 "$SRC/bench/make_big_vendor.py" "$TMP" --kernels "$N"
echo "load average before: $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores; $N kernels"
printf '%-12s %10s %8s %8s %12s %6s\n' format input_MB wall_s cpu_s peak_rss_MB steps
for spec in "rocprof-csv:csv/rank_0:^step ([0-9]+)" "rocpd:rank_0_results.db:^step ([0-9]+)" \
    "nsys:rank_0.sqlite:^ProfilerStep#([0-9]+)"; do
    IFS=: read -r name path step <<<"$spec"
    mb=$(du -sm "$TMP/$path" | cut -f1)
    /usr/bin/time -f "%e %U %S %M" -o "$TMP/$name.time" "$BUILD/aorta" analyze "$TMP/$path" \
        --output "$TMP/runs" --run-name "$name" --step "$step" --threads 1 >"$TMP/$name.out" 2>&1 ||
        { cat "$TMP/$name.out" >&2; exit 1; }
    read -r wall user sys rss <"$TMP/$name.time"
    steps=$(wc -l <"$TMP/runs/$name/rank_00_metrics.jsonl")
    printf '%-12s %10s %8s %8.2f %12.1f %6s\n' "$name" "$mb" "$wall" \
        "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" \
        "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" "$steps"
done
