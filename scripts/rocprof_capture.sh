#!/usr/bin/env bash
# Run launch_rocm.sh under rocprofv3 (whole run; its ranks inherit the tracer).
#
#   scripts/rocprof_capture.sh [CONFIG] [aorta train arguments...]
#   e.g. scripts/rocprof_capture.sh config/default.yaml --override training.max_steps=50
#
# ROCPROF_OUTPUT_DIR  where traces go (default rocprof_traces/run_<UTC time>)
# ROCPROF_ARGS        rocprofv3 tracing options, split on spaces (default
#                     "--kernel-trace --memory-copy-trace"; e.g.
#                     "--att --kernel-trace --kernel-symbols")
# ROCPROF             the rocprofv3 binary (default: rocprofv3 on PATH)
# Line the traces up with rank_NN_metrics.jsonl through run.json's anchor
# (CLOCK_REALTIME) and each record's wall_time.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rocprof=${ROCPROF:-rocprofv3}
if ! command -v "$rocprof" >/dev/null 2>&1; then
    echo "rocprof_capture: $rocprof not found (install ROCm's rocprofiler-sdk or set ROCPROF)" >&2
    exit 2
fi
out=${ROCPROF_OUTPUT_DIR:-$(dirname "$here")/rocprof_traces/run_$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
read -r -a extra <<<"${ROCPROF_ARGS:---kernel-trace --memory-copy-trace}"
echo "rocprof_capture: traces in $out" >&2
exec "$rocprof" "${extra[@]}" --output-directory "$out" -- bash "$here/launch_rocm.sh" "$@"
