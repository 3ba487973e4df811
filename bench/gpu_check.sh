#!/usr/bin/env bash
# The one call the lead makes on the lent GPU machine:
#   bash bench/gpu_check.sh            (from the repository root)
# It expects build-device/ built on the build machine (`make device-build`)
# and carried along. It prints the machine and versions, runs the GPU tests
# and the unit tests through ctest, then whatever steps are appended in the
# "benchmarks" section, logs everything under $OUT (default ./out) and ends
# with a table: step, result, seconds. Exit status: 0 when nothing failed.
# Env: SKIP_BENCH=1 skips bench/coll.sh and bench/sdma.sh; SKIP_TESTS=1 skips
# ctest; TRAIN="smoke trace ..." runs those matrices of bench/train.sh;
# BENCH="loader_step diagnose ..." runs those bench/NAME.sh scripts.
set -u -o pipefail

BUILD=${BUILD:-build-device}
OUT=${OUT:-./out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SUMMARY="$OUT/summary.tsv"
: >"$SUMMARY"

# NVLink SHARP / multicast must stay off on the lent machines.
export NCCL_NVLS_ENABLE=0
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

failed=0

# record NAME RESULT SECONDS
record() {
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$SUMMARY"
    case "$2" in
    passed | skipped) ;;
    *) failed=1 ;;
    esac
}

# step NAME COMMAND...: runs it, logs to $OUT/NAME.log, records the result.
step() {
    local name=$1
    shift
    local log="$OUT/${name//\//_}.log" start end rc
    echo "==== $name: $*"
    start=$(date +%s.%N)
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    end=$(date +%s.%N)
    local secs
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    case $rc in
    0) record "$name" passed "$secs" ;;
    77) record "$name" skipped "$secs" ;;
    *) record "$name" "failed($rc)" "$secs" ;;
    esac
    return "$rc"
}

# ctest_step NAME LABEL: one row per test from ctest's own result lines.
ctest_step() {
    local name=$1 label=$2 log="$OUT/$1.log"
    echo "==== $name: ctest -L $label"
    ctest --test-dir "$BUILD" -L "$label" --output-on-failure --timeout 600 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    # "1/3 Test #1: gpu/test_x ......   Passed    0.31 sec" (or ***Failed, ***Skipped)
    awk '/ Test +#[0-9]+: / {
            r = ""; for (i = 5; i < NF - 1; i++) r = r " " $i
            gsub(/[.*]/, "", r); gsub(/^ +| +$/, "", r); r = tolower(r)
            printf "%s\t%s\t%s\n", $4, r, $(NF - 1) }' "$log" >"$OUT/$name.tsv"
    if [ -s "$OUT/$name.tsv" ]; then
        while IFS=$'\t' read -r test result secs; do
            record "$test" "$result" "$secs"
        done <"$OUT/$name.tsv"
    elif [ "$rc" -eq 0 ]; then
        record "$name" "skipped" 0 # no test has this label in this build
    else
        record "$name" "failed(ctest rc $rc)" 0
    fi
}

# CTest files hold the build machine's absolute paths; when this copy lives
# elsewhere, make those paths lead here.
relink_build_paths() {
    local cache="$BUILD/CMakeCache.txt" orig_build orig_src
    orig_build=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$cache")
    orig_src=$(sed -n 's/^aorta_SOURCE_DIR:STATIC=//p' "$cache")
    if [ -n "$orig_src" ] && [ ! -e "$orig_src" ]; then
        mkdir -p "$(dirname "$orig_src")" && ln -s "$PWD" "$orig_src" &&
            echo "linked $orig_src -> $PWD"
    fi
    if [ -n "$orig_build" ] && [ ! -e "$orig_build" ]; then
        mkdir -p "$(dirname "$orig_build")" && ln -s "$PWD/$BUILD" "$orig_build" &&
            echo "linked $orig_build -> $PWD/$BUILD"
    fi
}

# ---- machine and versions -----------------------------------------------------
echo "==== machine"
hostname
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi -L || echo "nvidia-smi not found"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
nvidia-smi topo -m || true

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    echo "error: $BUILD/ is missing: run 'make device-build' on the build machine and carry it"
    exit 1
fi
relink_build_paths

echo "==== libraries the binaries need"
missing=$(ldd "$BUILD"/tests/gpu_test_* 2>/dev/null | grep 'not found' | sort -u)
if [ -n "$missing" ]; then
    echo "missing shared libraries (set LD_LIBRARY_PATH):"
    echo "$missing"
fi

if [ -x "$BUILD/aorta" ]; then
    step version "$BUILD/aorta" --version || true
else
    echo "$BUILD/aorta not built: version skipped"
fi

# ---- tests ------------------------------------------------------------------------
if [ "${SKIP_TESTS:-0}" != 1 ]; then
    ctest_step ctest_gpu gpu
    # The unit tests link cmocka, which the lent GPU machine does not have; CI runs them.
    if ldconfig -p 2>/dev/null | grep -q libcmocka; then
        ctest_step ctest_unit unit
    else
        echo "cmocka not installed here: unit tests skipped (CI runs them)"
    fi
fi

# ---- benchmarks ---------------------------------------------------------------------
# One `step NAME COMMAND...` each: $OUT/NAME.log and a row in the table below.
if [ "${SKIP_BENCH:-0}" != 1 ]; then
    # Bounded, so one hang cannot eat the whole visit.
    step bench_coll timeout 300 env AORTA="$BUILD/aorta" OUT="$OUT" bash bench/coll.sh || true
    step bench_sdma timeout 150 env AORTA="$BUILD/aorta" OUT="$OUT" bash bench/sdma.sh || true
fi
# BENCH="loader_step diagnose ...": those bench/NAME.sh scripts, in order.
for b in ${BENCH:-}; do
    step "bench_$b" timeout 400 env AORTA="$BUILD/aorta" OUT="$OUT" bash "bench/$b.sh" || true
done
# TRAIN="smoke trace ...": those matrices of bench/train.sh, in order.
for m in ${TRAIN:-}; do
    step "bench_train_$m" timeout 540 env AORTA="$BUILD/aorta" OUT="$OUT" bash bench/train.sh "$m" || true
done

# ---- summary ------------------------------------------------------------------------
echo
echo "==== summary (logs in $OUT)"
printf '%-44s %-26s %8s\n' STEP RESULT SECONDS
while IFS=$'\t' read -r name result secs; do
    printf '%-44s %-26s %8s\n' "$name" "$result" "$secs"
done <"$SUMMARY"
# The device tool brings back at most 8 files: keep the table and the JSON
# results as they are, pack every log into one archive.
mkdir -p "$OUT/train"
(cd "$OUT" && tar czf logs.tar.gz ./*.log ./*.tsv train 2>/dev/null &&
    rm -rf ./*.log ctest_*.tsv train) || true
exit "$failed"
