#!/usr/bin/env bash
# The CPU test suite under load (issue 28 item 13): RUNS whole-suite ctest runs
# while LOAD busy processes (default: one per core) take the cores, so that a
# test that leans on wall-clock time fails here rather than in CI. The busy
# processes are always killed, also on Ctrl-C or a failed run.
#
# usage: tests/stress.sh [BUILD_DIR] [RUNS]
#   BUILD_DIR  a configured, built tree (default build-dev; see README "Tests")
#   RUNS       whole-suite runs (default 5)
# env: LOAD (busy processes), JOBS (ctest -j, default 2), CTEST_ARGS (extra
#      ctest arguments, e.g. "-LE gpu").
# Prints one Markdown table row per run (commit, start, duration, passed,
# failed, load average) for bench/RESULTS.md; exits 1 if any run failed. The
# runs' ctest logs are kept (and named) only when one failed.
set -u

build=${1:-build-dev}
runs=${2:-5}
load=${LOAD:-$(nproc 2>/dev/null || echo 2)}
jobs=${JOBS:-2}
if [ ! -f "$build/CTestTestfile.cmake" ]; then
    echo "tests/stress.sh: error: $build is not a built test tree (cmake -S . -B $build; cmake --build $build)" >&2
    exit 2
fi
case $runs in '' | *[!0-9]*)
    echo "tests/stress.sh: error: RUNS \"$runs\" is not a number" >&2
    exit 2
    ;;
esac

busy=()
# shellcheck disable=SC2317 # called from the traps
stop_load() {
    for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${busy[@]}"; do wait "$pid" 2>/dev/null; done
    busy=()
}
trap stop_load EXIT
trap 'stop_load; exit 130' INT TERM

for ((i = 0; i < load; i++)); do
    (while :; do :; done) &
    busy+=("$!")
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit+dirty"
logdir=$(mktemp -d "${TMPDIR:-/tmp}/aorta-stress.XXXXXX")
echo "tests/stress.sh: $runs runs of $build under $load busy processes" >&2
echo "| run | commit | start (UTC) | duration | passed | failed | load avg (1 min) at end |"
echo "|---|---|---|---|---|---|---|"
bad=0
for ((r = 1; r <= runs; r++)); do
    start=$(date -u +%H:%M:%S)
    t0=$(date +%s)
    log="$logdir/run$r.log"
    # shellcheck disable=SC2086 # CTEST_ARGS is a word list on purpose
    ctest --test-dir "$build" --output-on-failure -j "$jobs" ${CTEST_ARGS:-} >"$log" 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
    # "NN% tests passed, F tests failed out of T"
    summary=$(grep -E 'tests passed, [0-9]+ tests? failed out of' "$log" | tail -1)
    failed=$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$summary")
    total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$summary")
    [ -n "$summary" ] || { failed="?"; total="?"; }
    passed="?"
    [ "$total" = "?" ] || passed=$((total - failed))
    loadavg=$(cut -d' ' -f1 /proc/loadavg)
    printf '| %d | %s | %s | %dm%02ds | %s | %s | %s |\n' "$r" "$commit" "$start" \
        $((secs / 60)) $((secs % 60)) "$passed" "$failed" "$loadavg"
    if [ "$rc" -ne 0 ] || [ -z "$summary" ]; then # no summary: no test ran
        bad=1
        grep -E '^\s*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Exception|Subprocess)' "$log" >&2
    fi
done
if [ "$bad" -eq 0 ]; then
    rm -rf "$logdir"
else
    echo "tests/stress.sh: a run failed; its ctest log is in $logdir" >&2
fi
exit "$bad"
