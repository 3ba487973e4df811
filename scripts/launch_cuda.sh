#!/usr/bin/env bash
# Run `aorta train` on every NVIDIA GPU of this node.
#
#   scripts/launch_cuda.sh [CONFIG] [aorta train arguments...]
#   e.g. scripts/launch_cuda.sh config/default.yaml --override training.max_steps=100
#
# Ranks: NPROC, else the entries of CUDA_VISIBLE_DEVICES, else the GPUs
# `nvidia-smi -L` lists (1 when none is found, with a message).
# Binary: AORTA, else build/aorta.
set -euo pipefail
# shellcheck source=scripts/launch_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/launch_common.sh"

# One hardware work queue per stream. The seed's launcher sets 1, which puts
# every stream in one queue, run in the host's order: on 2xH200 the large
# config then overlapped nothing and took 56.5 ms a step against 52.4 with
# CUDA's default 8 and ~52 with 32 (bench/RESULTS.md, session 10). aorta sets
# 32 itself when unset; here it is explicit, and a caller's value is kept.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
# NVLink SHARP (NVLS) needs multicast objects that many hosts (and containers
# without the fabric manager's multicast support) cannot create, and NCCL then
# fails at communicator init; off unless the caller asks for it, so a run
# starts everywhere. Set NCCL_NVLS_ENABLE=1 to measure with NVLS.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

gpus=$(aorta_count_list "${CUDA_VISIBLE_DEVICES:-}")
if [[ -z $gpus ]]; then
    gpus=0
    if command -v nvidia-smi >/dev/null 2>&1; then
        gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    fi
fi
aorta_launch cuda "$gpus" "$@"
