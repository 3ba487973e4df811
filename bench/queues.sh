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
# writes every record plus $OUT/queues_summary.json (bench/queues_summary.py,
# which also runs alone on a directory of records).
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

python3 "$(dirname "$0")/queues_summary.py" "$OUT"
exit $failed
