#!/usr/bin/env bash
# aorta's whole model against PyTorch (tests/gpu/torch_model.py), on one device:
#     torch_compare.sh cuda   the cuda backend in fp32 and in bf16, torch on the GPU
#     torch_compare.sh cpu    the cpu backend in fp32, torch on the CPU
# config/tiny.yaml's model (4 heads, 2 layers, d 64, batch 4) with an FFN
# width (96) unlike the head's (128), so the two cannot be mixed up, and 13
# tokens, a length no kernel tile divides. Dropout is 0: aorta's dropout masks
# come from its own counter-based RNG, which torch cannot draw, and are checked
# against the CPU reference by gpu/test_model_cuda.c instead.
# Skips (77) when the interpreter ($AORTA_PYTHON, default python3) has no
# torch, or (cuda) when aorta or torch sees no GPU.
set -euo pipefail
device=${1:?usage: torch_compare.sh cpu|cuda}
src=${AORTA_SOURCE_DIR:?}
dump=${AORTA_MODEL_DUMP:?path of the model_dump helper}
py=${AORTA_PYTHON:-python3}

if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "SKIP: $py cannot import torch (set AORTA_PYTHON to an interpreter that can)"
    exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

case "$device" in
cuda) modes=(fp32 bf16) ;;
cpu) modes=(fp32) ;;
*)
    echo "torch_compare.sh: device must be cpu or cuda, got '$device'" >&2
    exit 2
    ;;
esac

for mode in "${modes[@]}"; do
    echo "== $device $mode"
    rc=0
    "$dump" "$src/config/tiny.yaml" "$work/$mode" --backend "$device" --compute "$mode" \
        --set model.dropout=0 --set model.ff_dim=96 --set dataset.sequence_length=13 || rc=$?
    [[ $rc -eq 0 ]] || exit "$rc" # 77: no device, passed on as a skip
    "$py" "$src/tests/gpu/torch_model.py" "$work/$mode" --device "$device" || rc=$?
    [[ $rc -eq 0 ]] || exit "$rc"
done
