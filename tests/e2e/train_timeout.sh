#!/usr/bin/env bash
# A collective that times out on the cpu backend (distributed.timeout_s) names
# the rank that has not reached it and what that rank did last, read from the
# ranks' shared progress counters; the hint is MPI's, not NCCL's. Rank 1 is
# stopped for good before train step 3 (AORTA_TEST_HANG_RANK), so rank 0's
# first collective of step 3 waits until its watchdog fires. The watchdog is
# what is tested, so its timeout is short from the first step on
# (AORTA_TEST_TIMEOUT_S; the start-up, which load can make slow, keeps
# distributed.timeout_s); only the message (and run.json's record of it) is
# checked, never how long it took.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
# shellcheck source=tests/e2e/lib/mpi.sh
. "$(dirname "$0")/lib/mpi.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
expect() { grep -qE -- "$2" "$1" || { fail "$1 lacks /$2/"; cat "$1"; }; }

AORTA_TEST_HANG_RANK=1:3 AORTA_TEST_TIMEOUT_S=3 "$aorta" train --backend cpu --nproc 2 \
    --config "$src/config/tiny.yaml" --run-name hang --override training.output_dir="$tmp/art" \
    training.max_steps=1000 distributed.timeout_s=600 >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 1 ] || { fail "a timed-out run exited $rc, want 1"; cat "$tmp/out"; }
# The op of step 3 that timed out, numbered on its communicator; if rank 0
# has not started it itself, the op of another communicator that it waits
# for; rank 1 has not reached that one and last completed an op of step 2.
op='[a-z]+ #[0-9]+ \(step 3\) of [0-9]+ bytes on stream "[a-z_0-9]+"'
expect "$tmp/out" "aorta: error: rank 0: $op did not complete in 3 s; (this rank has not started it: it waits for $op, where )?rank 1 has not reached it; it last completed [a-z]+ #[0-9]+ \\(step 2\\)"
expect "$tmp/out" 'hint: an MPI collective waits for every rank'
! grep -q NCCL_DEBUG "$tmp/out" || fail "NCCL advice on the mpi backend"
# run.json records the end: timed out, the op and the rank that has not reached it.
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"])' "$tmp/art/hang/run.json" >"$tmp/end"
expect "$tmp/end" "^timed out on rank 0: $op did not complete in 3 s; .*rank 1 has not reached it"
# A rank failed (rank 0's watchdog), so mpirun's pointer to it still stands.
! grep -q 'rank 0 has not reached' "$tmp/out" || fail "rank 0 blamed itself"

finish train_timeout
