#!/usr/bin/env bash
# The launcher end to end, through tests/helpers/launch_helper (a parent and
# its ranks in one binary, like aorta): the cpu path (mpirun, MPI broadcast of
# the comm id) and the local spawner, output rules, failure, Ctrl-C.
set -u
helper=${AORTA_LAUNCH_HELPER:?set by ctest}
# MPI's libraries have no frame pointers: without the slow unwinder their
# leaks cannot be matched with tests/lsan.supp.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
expect() { grep -qF -- "$2" "$1" || { fail "$1 lacks '$2'"; cat "$1"; }; }
expect_not() { ! grep -qF -- "$2" "$1" || { fail "$1 has '$2'"; cat "$1"; }; }

# Start `helper spawn BACKEND 2 1 stop`, wait for both ranks, Ctrl-C it.
ctrl_c_test() {
    "$helper" spawn "$1" 2 1 stop >"$tmp/out" 2>"$tmp/err" &
    local pid=$!
    # Ordered by the ranks' "ready"; the bound (60 s) only ends a broken test.
    for _ in $(seq 600); do
        [ "$(grep -c ready "$tmp/out")" = 2 ] && break
        sleep 0.1
    done
    kill -INT $pid
    wait $pid
    local rc=$?
    [ $rc = 0 ] || { fail "$1 Ctrl-C: exit $rc, want 0"; cat "$tmp/err"; }
    expect "$tmp/out" "[rank 0] stopped=1"
    expect "$tmp/out" "[rank 1] stopped=1"
}

# ctest sets AORTA_MPIRUN empty when aorta was built without MPI.
mpirun_ok=1
if ! command -v "${AORTA_MPIRUN-mpirun}" >/dev/null 2>&1; then
    echo "no MPI: the cpu path is not tested"
    mpirun_ok=0
fi

if [ $mpirun_ok = 1 ]; then
    # Both ranks under mpirun, both got the id by MPI broadcast.
    "$helper" spawn cpu 2 1 report >"$tmp/out" 2>"$tmp/err" || { fail "cpu report: exit $?"; cat "$tmp/err"; }
    expect "$tmp/out" "[rank 0] rank 0 of 2 via openmpi, local 0/2, id 0000"
    expect "$tmp/out" "[rank 1] rank 1 of 2 via openmpi, local 1/2, id 0000"

    # By default only rank 0's stdout.
    "$helper" spawn cpu 2 0 report >"$tmp/out" 2>"$tmp/err" || fail "cpu report rank 0: exit $?"
    expect "$tmp/out" "[rank 0] rank 0 of 2"
    expect_not "$tmp/out" "[rank 1]"

    # A failing rank stops the job; the exit code is 1 and mpirun names it. The
    # other rank was stopped, not left to run out its wait (it says so if it was).
    "$helper" spawn cpu 2 0 fail >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc = 1 ] || fail "cpu fail: exit $rc, want 1"
    expect "$tmp/err" "aorta: error: mpirun failed: exited with code 3"
    expect_not "$tmp/out" "never stopped"

    # Ctrl-C: passed to the ranks as SIGUSR1 through mpirun; they stop cleanly.
    ctrl_c_test cpu

    # Ctrl-C three times: the ranks are killed; no rank "failed", so no hint
    # that mpirun's message names one.
    "$helper" spawn cpu 2 1 stop >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    for _ in $(seq 600); do
        [ "$(grep -c ready "$tmp/out")" = 2 ] && break
        sleep 0.1
    done
    kill -INT $pid
    kill -INT $pid
    kill -INT $pid
    wait $pid
    ! grep -q "names the rank that failed" "$tmp/err" || fail "a killed job blames a rank"

    # No mpirun: a clear error and exit 1.
    AORTA_MPIRUN=/nonexistent/mpirun "$helper" spawn cpu 2 0 report >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc = 1 ] || fail "missing mpirun: exit $rc, want 1"
    expect "$tmp/err" "aorta: error: mpirun: cannot find /nonexistent/mpirun"
    expect "$tmp/err" "hint: install OpenMPI (scripts/install-deps.sh)"
fi

# The local spawner: the id through AORTA_COMM_ID, Ctrl-C as SIGINT.
"$helper" spawn local 3 1 report >"$tmp/out" 2>"$tmp/err" || { fail "local report: exit $?"; cat "$tmp/err"; }
for r in 0 1 2; do expect "$tmp/out" "[rank $r] rank $r of 3 via aorta, local $r/3"; done

"$helper" spawn local 2 0 fail >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] || fail "local fail: exit $rc, want 1"
expect "$tmp/err" "aorta: error: rank 1 failed: exited with code 3"

ctrl_c_test local

finish launch
