#!/usr/bin/env bash
# `make run`: what a newcomer types first. Says up front what will happen and
# how long it takes, then one progress line per stage; the build's own output
# goes to BUILD/make-run.log (shown only when a stage fails). It builds only
# the aorta binary (`make test` builds the tests), and the CUDA backend only
# where a GPU answers nvidia-smi: the CPU run does not need it.
# Usage: scripts/make-run.sh BUILD_DIR JOBS [aorta args...]
set -euo pipefail
build=${1:?usage: make-run.sh BUILD_DIR JOBS [args...]}
jobs=${2:?usage: make-run.sh BUILD_DIR JOBS [args...]}
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=${AORTA_INSTALL_DEPS:-$here/scripts/install-deps.sh}

ngpu=0
if command -v nvidia-smi >/dev/null 2>&1; then
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
# Measured on a 2-core machine from a fresh clone: the CPU build 54 s, its
# run 1 s; the CUDA build (its kernels) several minutes.
if [[ $ngpu -gt 0 ]]; then
    cuda=ON
    what="train config/default.yaml on $ngpu GPU(s) (200 steps, about a minute)"
    took="5 to 10 minutes to build with CUDA on 2 cores"
else
    cuda=OFF
    what="train config/tiny.yaml on 2 CPU ranks (30 steps, a few seconds)"
    took="about a minute to build on 2 cores"
fi
echo "make run: install missing packages, build the aorta binary in $build/ ($took;" \
    "CUDA backend $cuda), then $what. The tests are built by 'make test'."

log="$build/make-run.log"
mkdir -p "$build"
: >"$log"
# stage N TITLE CMD...: one line, the command's output to the log.
stage() {
    local n=$1 title=$2 t0=$SECONDS
    shift 2
    printf '[%s/4] %s ... ' "$n" "$title"
    if "$@" >>"$log" 2>&1; then
        echo "done ($((SECONDS - t0)) s)"
    else
        echo "FAILED"
        echo "make run: the last lines of $log:" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
}

stage 1 "packages (scripts/install-deps.sh)" "$deps"
if [[ -f $build/CMakeCache.txt ]]; then
    echo "[2/4] configure: $build/ already configured (kept as it is)"
else
    stage 2 "configure $build/ (Release, CUDA $cuda)" \
        cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DAORTA_CUDA="$cuda"
fi
stage 3 "build the aorta binary (-j $jobs)" cmake --build "$build" --target aorta -j "$jobs"
echo "[4/4] run"
"$here/scripts/run-main.sh" "$build/aorta" "$@"
# The run's directory is artifacts/latest (training.output_dir unless overridden).
echo
echo "next: the run as an HTML page (findings, overlap per step, charts):"
echo "  $build/aorta report --log-dir artifacts/latest --label main --output artifacts/report"
echo "  then open artifacts/report/index.html"
