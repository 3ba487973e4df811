#!/usr/bin/env bash
# Run launch_cuda.sh under Nsight Systems, capturing only the profiling
# windows: aorta runs with profiling.enabled=true and calls
# cudaProfilerStart/Stop around the active steps of the wait/warmup/active
# schedule, and nsys records between them (--capture-range=cudaProfilerApi).
#
#   scripts/nsys_capture.sh [CONFIG] [aorta train arguments...]
#
# NSYS_OUTPUT_DIR  where reports go (default nsys_traces/run_<UTC time>)
# NSYS             the nsys binary (default: nsys on PATH)
# NSYS_ARGS        extra nsys arguments, split on spaces (e.g. "--gpu-metrics-devices=all")
# NSYS_CAPTURE_END what a cudaProfilerStop does (default stop; "repeat" captures
#                  every active window of a schedule with profiling.repeat > 1)
# Line the report up with rank_NN_metrics.jsonl through run.json's anchor
# (CLOCK_REALTIME) and each record's wall_time.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nsys=${NSYS:-nsys}
if ! command -v "$nsys" >/dev/null 2>&1; then
    echo "nsys_capture: $nsys not found (install Nsight Systems or set NSYS)" >&2
    exit 2
fi
out=${NSYS_OUTPUT_DIR:-$(dirname "$here")/nsys_traces/run_$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
read -r -a extra <<<"${NSYS_ARGS:-}"

config=()
if [[ $# -gt 0 && $1 != -* ]]; then
    config=("$1")
    shift
fi
echo "nsys_capture: reports in $out" >&2
exec "$nsys" profile --trace=cuda,nvtx,osrt --capture-range=cudaProfilerApi \
    --capture-range-end="${NSYS_CAPTURE_END:-stop}" --output="$out/aorta_%h_%p" \
    "${extra[@]}" bash "$here/launch_cuda.sh" "${config[@]}" \
    --override profiling.enabled=true "$@"
