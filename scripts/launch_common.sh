#!/usr/bin/env bash
# Shared by launch_cuda.sh, launch_rocm.sh, nsys_capture.sh and
# rocprof_capture.sh (sourced, not run): how a launcher finds its config,
# the aorta binary and the rank count, and how it starts `aorta train`.
#
#   aorta_launch BACKEND DETECTED_GPUS [CONFIG] [aorta train arguments...]
#
# CONFIG: the first argument unless it starts with '-'; default
# config/default.yaml of this repository. NPROC overrides the rank count;
# AORTA names the binary (default build/aorta).

aorta_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The number of entries of a device list such as CUDA_VISIBLE_DEVICES ("0,1"),
# or nothing when it is unset or empty.
aorta_count_list() {
    local list=$1
    [[ -n $list ]] || return 0
    local -a items
    IFS=, read -r -a items <<<"$list"
    echo "${#items[@]}"
}

aorta_launch() {
    local backend=$1 detected=$2
    shift 2
    local config=$aorta_repo/config/default.yaml
    if [[ $# -gt 0 && $1 != -* ]]; then
        config=$1
        shift
    fi
    local nproc=${NPROC:-$detected}
    if ! [[ $nproc =~ ^[0-9]+$ ]] || [[ $nproc -lt 1 ]]; then
        if [[ -n ${NPROC:-} ]]; then
            echo "launch: NPROC=$NPROC is not a positive integer" >&2
            exit 2
        fi
        echo "launch: no $backend GPU detected; starting 1 rank (set NPROC to choose)" >&2
        nproc=1
    fi
    local aorta=${AORTA:-$aorta_repo/build/aorta}
    if [[ ! -x $aorta ]]; then
        echo "launch: aorta binary $aorta not found or not executable (build it, or set AORTA)" >&2
        exit 2
    fi
    echo "launch: $nproc rank(s), backend $backend, config $config" >&2
    exec "$aorta" train --config "$config" --backend "$backend" --nproc "$nproc" "$@"
}
