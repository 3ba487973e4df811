#!/usr/bin/env bash
# GPU benchmark of `aorta sdma`: a bf16 GEMM on a low-priority stream against a
# 64 MiB (COPY_MB) copy on a high-priority stream, every direction, by copy
# engine and by SM kernel; p2p when two GPUs are visible.
#   sdma.json   one JSON array, one object per run (the --json of each)
#   sdma.log    every table as printed
# Usage: bench/sdma.sh   (env: AORTA=path/to/aorta, default build-device/aorta;
#        OUT=dir, default ./out; MATRIX=N, default 8192; COPY_MB=M, default 64;
#        ITERS=I, default 20)
set -euo pipefail
aorta=${AORTA:-build-device/aorta}
out=${OUT:-out}
[ -x "$aorta" ] || { echo "bench/sdma.sh: no aorta binary at $aorta (make device-build)" >&2; exit 2; }
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off: it can take a shared host's GPUs down
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log="$out/sdma.log"
: >"$log"
common=(--backend cuda --matrix-size "${MATRIX:-8192}" --copy-mb "${COPY_MB:-64}"
    --iterations "${ITERS:-20}" --warmup 3)
runs=("h2d dma" "d2h dma" "d2d dma" "h2d kernel" "d2h kernel" "d2d kernel")
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${ngpu:-0}" -ge 2 ] && runs+=("p2p dma")
i=0
for r in "${runs[@]}"; do
    read -r direction engine <<<"$r"
    i=$((i + 1))
    echo "+ aorta sdma --direction $direction --engine $engine" | tee -a "$log"
    "$aorta" sdma "${common[@]}" --direction "$direction" --engine "$engine" --json "$tmp/$i.json" 2>&1 |
        tee -a "$log"
done
# Join the objects into one array (no JSON tool needed on the GPU machine).
{
    echo "["
    for j in $(seq 1 "$i"); do
        cat "$tmp/$j.json"
        [ "$j" -lt "$i" ] && echo ","
    done
    echo "]"
} >"$out/sdma.json"
echo "bench/sdma.sh: wrote $out/sdma.json and $log"
