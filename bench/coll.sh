#!/usr/bin/env bash
# GPU benchmark of `aorta coll` (nccl-tests columns) on every visible GPU:
#   coll_sweep.json    all_reduce, all_gather, reduce_scatter, broadcast, 8 B .. 1 GiB x2
#   coll_check.json    every collective and op, each element checked (-c 1), 1 KiB .. 64 MiB
#   coll_periter.json  all_reduce per-op event times (min/p50/p99), 1 MiB .. 1 GiB x4
#   coll_compute.json  collectives beside a GEMM loop: busbw and TFLOP/s alone and together
#   coll.log           every table as printed
# Usage: bench/coll.sh   (env: AORTA=path/to/aorta, default build-device/aorta; OUT=dir,
#        default ./out; NPROC=ranks, default every visible GPU; GEMM=M,N,K[,dtype])
set -euo pipefail
aorta=${AORTA:-build-device/aorta}
out=${OUT:-out}
gemm=${GEMM:-8192,8192,8192,bf16}
[ -x "$aorta" ] || { echo "bench/coll.sh: no aorta binary at $aorta (make device-build)" >&2; exit 2; }
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off: it can take a shared host's GPUs down
nproc_args=()
[ -n "${NPROC:-}" ] && nproc_args=(--nproc "$NPROC")
log="$out/coll.log"
: >"$log"
run() {
    echo "+ aorta coll $*" | tee -a "$log"
    timeout 150 "$aorta" coll --backend cuda "${nproc_args[@]}" "$@" 2>&1 | tee -a "$log"
}

run --coll all_reduce,all_gather,reduce_scatter,broadcast -b 8 -e 1G -f 2 -n 20 -w 5 -c 0 \
    --json "$out/coll_sweep.json"
# Correctness is checked on the host, so sizes stay moderate.
run --coll all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv \
    -b 1K -e 64M -f 8 -n 5 -w 2 -c 1 --json "$out/coll_check.json"
for op in prod max min avg; do
    run --coll all_reduce,reduce_scatter --op "$op" -b 1K -e 1M -f 32 -n 2 -w 1 -c 1 --dtype bf16
done
run --coll all_reduce -b 1M -e 1G -f 4 -n 50 -w 5 -c 0 --per-iter --json "$out/coll_periter.json"
run --coll all_reduce,all_gather,reduce_scatter -b 1M -e 1G -f 4 -n 20 -w 5 -c 0 \
    --with-compute "$gemm" --json "$out/coll_compute.json"
echo "bench/coll.sh: wrote $out/coll_*.json and $log"
