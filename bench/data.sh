#!/usr/bin/env bash
# The host data generator (dataset.placement: host): ms per batch on one
# thread, the work of one loader worker, at config/default.yaml's shape
# (T 64, F 16, D 128, S 32, batch 8) with random and teacher targets.
#   bench/data.sh BUILD_DIR   (a Release build with the data_bench target)
set -euo pipefail
build=${1:?usage: bench/data.sh BUILD_DIR}
bin="$build/tests/data_bench"
[ -x "$bin" ] || { echo "bench/data.sh: no $bin (cmake --build $build --target data_bench)" >&2; exit 2; }
for target in random teacher; do
    "$bin" 64 16 128 32 50000 8 "$target" 20
done
