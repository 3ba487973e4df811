#!/usr/bin/env bash
# The GPU kernels compile for AMD too: where a hipcc is installed (Debian's
# `hipcc` package is enough), compile kernels_cuda.cu as HIP for an MI200-class
# target. The host backends need hipBLASLt and RCCL, which Debian does not
# ship, so they are not compiled here. Skipped where there is no hipcc.
set -euo pipefail
command -v hipcc >/dev/null || {
    echo "SKIP: hipcc not installed"
    exit 77
}
src=${AORTA_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hipcc -x hip --offload-arch=gfx90a -DAORTA_HIP -Werror -I "$src/src" \
    -c "$src/src/runtime/kernels_cuda.cu" -o "$tmp/kernels.o"
echo "kernels_cuda.cu compiles for HIP (gfx90a)"
