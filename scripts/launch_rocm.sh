#!/usr/bin/env bash
# Run `aorta train` on every AMD GPU of this node.
#
#   scripts/launch_rocm.sh [CONFIG] [aorta train arguments...]
#
# Ranks: NPROC, else the entries of HIP_VISIBLE_DEVICES (or
# ROCR_VISIBLE_DEVICES), else the GPUs `rocm-smi --showid` lists, else the
# /dev/dri/renderD* nodes (1 when none is found, with a message).
# Binary: AORTA, else build/aorta.
set -euo pipefail
# shellcheck source=scripts/launch_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/launch_common.sh"

gpus=$(aorta_count_list "${HIP_VISIBLE_DEVICES:-${ROCR_VISIBLE_DEVICES:-}}")
if [[ -z $gpus ]]; then
    gpus=0
    if command -v rocm-smi >/dev/null 2>&1; then
        # one "GPU[n]" per line of information; count the distinct n
        gpus=$(rocm-smi --showid 2>/dev/null | grep -o '^GPU\[[0-9]*\]' | sort -u | wc -l || true)
    fi
    if [[ $gpus -eq 0 ]]; then
        shopt -s nullglob
        nodes=(/dev/dri/renderD*)
        gpus=${#nodes[@]}
    fi
fi
aorta_launch hip "$gpus" "$@"
