#!/usr/bin/env bash
# The watchdog covers every wait of a rank, not only its collectives (those
# are train_timeout.sh's): a hang planted in each (AORTA_TEST_HANG=WHERE:
# RANK[:STEP], DESIGN §4) ends the run with exit 1 and one message naming the
# rank, the wait, the step and the stream. Each rank blocks for good where it
# is planted, so only the watchdog can end the run. The watchdog is what is
# tested, so the planted rank's timeout is short (AORTA_TEST_TIMEOUT_S, from
# the plant on), while a start-up that load makes slow keeps a generous one
# (distributed.timeout_s); only the message is checked, never how long it
# took (ctest's bound only ends a broken test).
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
# shellcheck source=tests/e2e/lib/mpi.sh
. "$(dirname "$0")/lib/mpi.sh"
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"

# plant NAME NPROC WHERE EXPECTED-REGEX: run 3 steps with the hang planted.
plant() {
    local name=$1 nproc=$2 where=$3 want=$4
    AORTA_TEST_HANG=$where AORTA_TEST_TIMEOUT_S=2 "$aorta" train --backend cpu --nproc "$nproc" \
        --config "$src/config/tiny.yaml" --run-name "$name" \
        --override training.output_dir="$tmp/art" training.max_steps=3 \
        training.summary_skip_steps=1 distributed.timeout_s=600 >"$tmp/$name.out" 2>&1
    local rc=$?
    [ "$rc" = 1 ] || { fail "$name: exit $rc, want 1"; cat "$tmp/$name.out"; }
    grep -qE -- "$want" "$tmp/$name.out" || { fail "$name lacks /$want/"; cat "$tmp/$name.out"; }
    local at=${where%%:*} rest=${where#*:}
    grep -q "AORTA_TEST_HANG: rank ${rest%%:*} blocks for good at \"$at\"" "$tmp/$name.out" ||
        fail "$name: the hang was not planted"
}

# Communicator init: rank 1 never gets through it (rank 0 waits in it too).
plant init 2 init:1 \
    '\[rank 1\] aorta: error: rank 1: communicator init \(at start\) on stream "compute": no progress in 2 s'
# The host inside a collective's enqueue call (what NCCL's set-up on a first
# call did in issue 52), numbered as the collective watchdog numbers ops.
plant enqueue 1 enqueue:0:2 \
    'aorta: error: rank 0: the host has been inside the enqueue call of [a-z]+ #[0-9]+ \(step 2\) of [0-9]+ bytes on stream "[a-z]+": no progress in 2 s'
# The data loader: the fetch of the next batch, during step 1.
plant loader 1 loader:0:1 'aorta: error: rank 0: data loader \(step 1\): no progress in 2 s'
# The one-iteration-late readback of the last step's loss: its event never
# completes (the compute stream runs a host function that never returns).
plant readback 1 readback:0:2 \
    "aorta: error: rank 0: readback of a step's loss and grad norm \\(step 2\\) on stream \"compute\": no progress in 2 s"
# Device synchronisation at the end: the compute stream never finishes.
plant device 1 device:0 \
    'aorta: error: rank 0: device synchronisation \(step 2\) on stream "compute": no progress in 2 s'
grep -q 'hint: the stream.s work never finished' "$tmp/device.out" || fail "device: no hint"

# Nothing planted: the same run, with the same short timeout over its steps,
# ends well: no wait is blamed for nothing.
AORTA_TEST_TIMEOUT_S=2 "$aorta" train --backend cpu --config "$src/config/tiny.yaml" --run-name clean \
    --override training.output_dir="$tmp/art" training.max_steps=3 training.summary_skip_steps=1 \
    >"$tmp/clean.out" 2>&1 || { fail "clean run: exit $?"; cat "$tmp/clean.out"; }
! grep -q 'no progress in' "$tmp/clean.out" || fail "a clean run blamed a wait"

finish train_watchdog
