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

# The training workload end to end: the seed's config/default.yaml (200
# steps) on every GPU, or config/tiny.yaml on 2 CPU ranks (default.yaml's
# model takes minutes per step on a laptop CPU).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ $backend == cuda ]]; then
    exec "$aorta" train --backend cuda --nproc "$nproc" --config "$here/config/default.yaml" "$@"
else
    exec "$aorta" train --backend cpu --nproc "$nproc" --config "$here/config/tiny.yaml" "$@"
fi
