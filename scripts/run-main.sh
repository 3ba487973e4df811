#!/usr/bin/env bash
# `make run`: the main job on the best backend present. With NVIDIA GPUs it
# runs on all of them (CUDA + NCCL); otherwise on the CPU backend with 2 MPI
# ranks. Extra arguments go to the aorta command.
set -euo pipefail
aorta=${1:?usage: run-main.sh path/to/aorta [args...]}
shift
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

ngpu=0
if command -v nvidia-smi >/dev/null 2>&1; then
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
if [[ $ngpu -gt 0 ]]; then
    backend=cuda
    nproc=$ngpu
else
    backend=cpu
    nproc=2
fi
echo "aorta: running on the $backend backend with $nproc rank(s)"

# The CPU backend runs the training workload end to end (config/tiny.yaml).
# The engine's optimizer kernels exist for the cpu backend only so far, so on
# GPUs the main job stays the collective benchmark under a concurrent GEMM:
# what the workload's overlap depends on, measured on the device timeline.
if [[ $backend == cuda ]]; then
    exec "$aorta" coll --backend cuda --nproc "$nproc" --coll all_reduce,all_gather,reduce_scatter \
        -b 1M -e 256M -f 4 -c 1 --with-compute 8192,8192,8192 "$@"
else
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    exec "$aorta" train --backend cpu --nproc "$nproc" --config "$here/config/tiny.yaml" "$@"
fi
