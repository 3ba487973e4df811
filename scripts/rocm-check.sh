#!/usr/bin/env bash
# `make rocm-check`: the aorta binary with its HIP backend (HIP, RCCL,
# hipBLAS, kernels for gfx942 and gfx90a), built and checked inside the
# Debian 13 root of scripts/rocm-root.sh; no AMD GPU is needed or used.
#
#   scripts/rocm-check.sh          make the root if needed, build, check, test
#   scripts/rocm-check.sh --ci     the same, but "skipped: WHY" (exit 0) where
#                                  CI cannot: no root access, no disk, no
#                                  mirror, or not enough of CI's time left
# Exit: 0 passed, 1 failed, 2 bad use, 3 the root could not be made.
#
# Checks: the build has no warning (-Werror, host and device code); the GPU
# plugin beside aorta, libaorta_hip.so, links librccl and libhipblas; its
# device code holds gfx942 and gfx90a
# code objects; `aorta --version` lists the hip and rccl backends; the unit
# tests pass. The rocprofiler-sdk attach tool is compiled too where its
# headers are given (AORTA_ROCPROF_SDK_INCLUDE: scripts/rocm-sdk-headers.sh's
# tree or a ROCm install's include/); Debian does not package them.
#
# Build directory: AORTA_ROCM_BUILD (default build-rocm, inside the clone);
# archs: AORTA_HIP_ARCHS (default "gfx942;gfx90a"); jobs: JOBS.
# CI's budget: AORTA_CI_BUDGET_S (5400) from AORTA_CI_STARTED (epoch seconds,
# set by .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

ci=0
if [[ ${1:-} == --ci ]]; then
    ci=1
elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--ci]" >&2
    exit 2
fi
build=${AORTA_ROCM_BUILD:-build-rocm}
# the root sees the clone alone, at /src
[[ $build != /* && $build != *..* ]] || { echo "rocm-check: AORTA_ROCM_BUILD=$build: must be a directory inside the clone" >&2; exit 2; }
archs=${AORTA_HIP_ARCHS:-gfx942;gfx90a}
jobs=${JOBS:-$(nproc)}
root_sh=scripts/rocm-root.sh

say() { echo "rocm-check: $*"; }
skip() {
    echo "rocm-check: skipped: $*"
    exit 0
}
fail() {
    echo "rocm-check: FAILED: $*" >&2
    exit 1
}
stamp() { date +%s; }
tmp_err=$(mktemp)
trap 'rm -f "$tmp_err"' EXIT

# ---- what CI can afford ------------------------------------------------------
# Measured on this project's 2-core machines (docs/rocm.md): making the root
# 4 minutes, the build from scratch 12, the tests 1 (under load). The
# estimates leave room.
if [[ $ci -eq 1 ]]; then
    [[ $(id -u) -eq 0 ]] || skip "not root (debootstrap and chroot need it)"
    root=$("$root_sh" path)
    need_s=2400
    if ! "$root_sh" ready; then
        need_s=$((need_s + 900))
        mkdir -p "$(dirname "$root")"
        free_gb=$(($(df --output=avail -k "$(dirname "$root")" | tail -n1) / 1048576))
        [[ $free_gb -ge 8 ]] || skip "the ROCm root needs 8 GB free under $(dirname "$root"), ${free_gb} GB are"
    fi
    budget=${AORTA_CI_BUDGET_S:-5400}
    left=$((budget - ($(stamp) - ${AORTA_CI_STARTED:-$(stamp)}) - 300)) # 5 min for CI's own end
    [[ $left -ge $need_s ]] || skip "CI has ${left}s of its ${budget}s left, this needs about ${need_s}s"
    # the check itself, bounded by what is left; the mirror's absence and
    # the clock are the machine's doing, not the code's
    set +e
    timeout --kill-after=30 "$left" "$0" 2>"$tmp_err"
    rc=$?
    set -e
    [[ $rc -eq 3 ]] || cat "$tmp_err" >&2
    case $rc in
    3) skip "$(grep -m1 '^rocm-root: ' "$tmp_err" | sed 's/^rocm-root: //')" ;;
    124 | 137) skip "ran past the ${left}s CI had left" ;;
    *) exit "$rc" ;;
    esac
fi

# ---- the root ---------------------------------------------------------------
t0=$(stamp)
"$root_sh" make || exit 3 # rocm-root.sh said why
t_root=$(($(stamp) - t0))

# ---- the build --------------------------------------------------------------
attach_args=()
if [[ -n ${AORTA_ROCPROF_SDK_INCLUDE:-} ]]; then
    [[ -f $AORTA_ROCPROF_SDK_INCLUDE/rocprofiler-sdk/registration.h ]] ||
        fail "AORTA_ROCPROF_SDK_INCLUDE=$AORTA_ROCPROF_SDK_INCLUDE has no rocprofiler-sdk/registration.h"
    # the root sees only the clone: the headers go into the build directory
    mkdir -p "$build"
    rm -rf "$build/rocprof-include"
    cp -r "$AORTA_ROCPROF_SDK_INCLUDE" "$build/rocprof-include"
    attach_args=(-DAORTA_ROCPROF_SDK_INCLUDE="/src/$build/rocprof-include")
fi

t0=$(stamp)
mkdir -p "$build"
# Debian's layout: clang 17 is the HIP compiler, hip-lang's package is under
# the multiarch library directory
"$root_sh" run . cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DAORTA_WERROR=ON \
    -DAORTA_SANITIZE=ON -DAORTA_HIP=ON -DAORTA_CUDA=OFF -DAORTA_MPI=OFF -DAORTA_CAIRO=OFF \
    -DCMAKE_HIP_COMPILER=clang++-17 -DCMAKE_HIP_COMPILER_ROCM_LIB=/usr/lib/x86_64-linux-gnu \
    "-DCMAKE_HIP_ARCHITECTURES=$archs" "${attach_args[@]}" >"$build/rocm-check.configure.log" 2>&1 ||
    {
        tail -n 20 "$build/rocm-check.configure.log" >&2
        fail "cmake configure (log: $build/rocm-check.configure.log)"
    }
grep 'aorta:' "$build/rocm-check.configure.log" | sed 's/^-- /rocm-check: /'
"$root_sh" run . cmake --build "$build" -j "$jobs" >"$build/rocm-check.build.log" 2>&1 || {
    grep -E 'error|Error' "$build/rocm-check.build.log" | head -n 30 >&2
    fail "build (log: $build/rocm-check.build.log)"
}
t_build=$(($(stamp) - t0))

# ---- checks -----------------------------------------------------------------
# shellcheck disable=SC2016 # expanded inside the root
"$root_sh" run . env BUILD="$build" ARCHS="$archs" sh -euc '
    # the GPU backend is the plugin beside the binary (DESIGN §3)
    plugin="$BUILD/libaorta_hip.so"
    libs=$(ldd "$plugin")
    for lib in librccl libhipblas libamdhip64; do
        echo "$libs" | grep -q "$lib" || { echo "libaorta_hip.so does not link $lib" >&2; exit 1; }
    done
    objcopy --dump-section .hip_fatbin=/tmp/fatbin "$plugin" || { echo "libaorta_hip.so has no device code" >&2; exit 1; }
    bundles=$(clang-offload-bundler-17 --list --type=o --input=/tmp/fatbin)
    for a in $(echo "$ARCHS" | tr ";" " "); do
        echo "$bundles" | grep -q "amdgcn-amd-amdhsa--$a" || { echo "libaorta_hip.so has no $a code object" >&2; exit 1; }
    done
    v=$("$BUILD/aorta" --version)
    echo "$v" | grep -q "^device backends: hip cpu" || { echo "aorta --version: no hip backend" >&2; exit 1; }
    echo "$v" | grep -q "^rccl: rccl " || { echo "aorta --version: no rccl backend" >&2; exit 1; }
    echo "$v" | sed "s/^/rocm-check: /"
' || fail "the binary's checks"
if [[ ${#attach_args[@]} -gt 0 ]]; then
    [[ -f $build/libaorta_attach_rocm.so ]] || fail "libaorta_attach_rocm.so was not built"
    say "attach tool: libaorta_attach_rocm.so compiled against $AORTA_ROCPROF_SDK_INCLUDE"
else
    say "attach tool: not compiled: rocprofiler-sdk's headers are not in Debian 13 (give a tree in AORTA_ROCPROF_SDK_INCLUDE)"
fi

t0=$(stamp)
"$root_sh" run . ctest --test-dir "$build" -L unit -j "$jobs" --output-on-failure >"$build/rocm-check.test.log" 2>&1 || {
    tail -n 40 "$build/rocm-check.test.log" >&2
    fail "unit tests (log: $build/rocm-check.test.log)"
}
t_test=$(($(stamp) - t0))
say "$(grep -E 'tests passed' "$build/rocm-check.test.log")"
say "passed: root ${t_root}s, build ${t_build}s, unit tests ${t_test}s ($(nproc) cores, archs $archs)"
