#!/usr/bin/env bash
# The kernels' lanes on a 64-lane AMD wavefront (DESIGN §4, common.cuh): a
# "warp" is AO_LANES = 32 lanes, and every cross-lane exchange goes through
# common.cuh's AO_SHFL / AO_SHFL_XOR, which on HIP pass the width 32. So no
# kernel file compiled for HIP may use a raw shuffle, vote, lane mask,
# __syncwarp or warpSize. Files whose HIP build compiles none of their
# kernels (the mma.sync flash attention, the sm_90a one) are exempt, and
# must say so with `#if !defined(AO_GPU_HIP)`. Before the real tree it
# checks a planted one, so a checker that stopped seeing breaches fails too.
set -euo pipefail
src=${AORTA_SOURCE_DIR:?}/src
raw='__shfl|__ballot|__any|__all_sync|__activemask|__syncwarp|__match|warpSize'
exempt='model/kernels/flash.cu model/kernels/flash.cuh model/kernels/flash_sm90a.cu'

# check ROOT: one line per breach under ROOT (a src/ tree); status 1 if any.
check() {
    local root=$1 bad=0 f rel
    while IFS= read -r f; do
        rel=${f#"$root"/}
        if [[ " $exempt " == *" $rel "* ]]; then
            if [[ $rel != *_sm90a.cu ]] && ! grep -q '^#if !defined(AO_GPU_HIP)' "$f"; then
                echo "gpu_lanes: $rel is exempt but not kept out of HIP builds"
                bad=1
            fi
            continue
        fi
        # common.cuh defines the macros; nothing else may shuffle by hand
        if [[ $rel == model/kernels/common.cuh ]]; then
            if ! grep -q '__shfl_xor((v), (o), AO_LANES)' "$f" ||
                ! grep -q '__shfl((v), (src), AO_LANES)' "$f"; then
                echo "gpu_lanes: $rel: the HIP shuffles do not pass the width AO_LANES"
                bad=1
            fi
            continue
        fi
        grep -nE "$raw" "$f" | sed "s|^|gpu_lanes: $rel:|" | grep . && bad=1
    done < <(find "$root" \( -name '*.cu' -o -name '*.cuh' \) | sort)
    return $bad
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/model/kernels"
printf '#define AO_SHFL_XOR(v, o) __shfl_xor((v), (o))\n' >"$tmp/src/model/kernels/common.cuh"
printf 'x = __shfl_down_sync(0xffffffffu, v, 1);\n' >"$tmp/src/model/kernels/a.cu"
printf 'if (lane < warpSize) {}\n' >"$tmp/src/model/kernels/b.cuh"
printf 'x = __shfl_xor_sync(0xffffffffu, v, 1);\n' >"$tmp/src/model/kernels/flash.cu"
printf '#if !defined(AO_GPU_HIP)\nx = __shfl_sync(0xffffffffu, v, 1);\n#endif\n' >"$tmp/src/model/kernels/flash.cuh"
printf 'y = AO_SHFL(v, 0);\n' >"$tmp/src/model/kernels/ok.cu"
planted=$(check "$tmp/src" || true)
for want in "common.cuh: the HIP shuffles" "a.cu:1:" "b.cuh:1:" "flash.cu is exempt but not kept out"; do
    grep -qF "$want" <<<"$planted" || {
        echo "gpu_lanes: the checker missed a planted breach ($want); it said:"
        echo "$planted"
        exit 1
    }
done
[[ $(wc -l <<<"$planted") -eq 4 ]] || {
    echo "gpu_lanes: the checker flagged more than the planted breaches:"
    echo "$planted"
    exit 1
}

check "$src"
echo "gpu_lanes: every kernel file HIP compiles exchanges lanes through AO_SHFL*"
