#!/usr/bin/env bash
# A run's end is recorded whatever ends it (issue 48), each fault planted so
# that nothing depends on this machine's speed:
#   - out of device memory in set-up (AORTA_TEST_DEV_MEM_LIMIT): run.json says
#     so, and no empty rank file is left behind;
#   - a full disk (AORTA_TEST_ENOSPC_AFTER: writes fail with ENOSPC past a
#     byte budget, as on a full disk): one message per rank, every metrics
#     line whole, run.json says "out of space"; `aorta report` on a full disk
#     leaves no truncated chart or file;
#   - kill -9 of one of two ranks: run.json names the rank and the signal,
#     and summary.json is written from the records there are.
# (The collective timeout's end is checked by e2e/train_timeout.)
set -u
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
# shellcheck source=tests/e2e/lib/mpi.sh
. "$(dirname "$0")/lib/mpi.sh"
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"

# end DIR: run.json's "completed" and "end", one line.
end() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]+"/run.json")); print(r.get("completed"), r.get("end"))' "$1"; }
# whole_lines FILE...: every line of each JSONL file parses, the last ends in \n.
whole_lines() {
    python3 - "$@" <<'PY'
import json, sys
for f in sys.argv[1:]:
    data = open(f).read()
    assert data == "" or data.endswith("\n"), f + ": a partial last line"
    for line in data.splitlines():
        json.loads(line)
PY
}
train() { # NAME NPROC EXTRA-OVERRIDES...: a run of the tiny config under $tmp/art
    local name=$1 np=$2
    shift 2
    "$aorta" train --backend cpu --nproc "$np" --config "$src/config/tiny.yaml" --run-name "$name" \
        --override training.output_dir="$tmp/art" "$@"
}

# --- out of device memory in set-up ----------------------------------------------
# A fatal exit frees nothing: no leak report for it.
AORTA_TEST_DEV_MEM_LIMIT=200000 ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" train oom 1 \
    >"$tmp/oom.out" 2>&1
rc=$?
[ "$rc" = 1 ] || { fail "out of memory: exit $rc, want 1"; cat "$tmp/oom.out"; }
left=$(cd "$tmp/art/oom" && find . -mindepth 1 | tr '\n' ' ')
[ "$left" = "./run.json " ] || fail "out of memory left: $left"
e=$(end "$tmp/art/oom")
[[ $e == "False failed on rank 0: device memory: "*"out of memory"* ]] || fail "out of memory: run.json ends: $e"

# --- a full disk ----------------------------------------------------------------
# 40000 bytes: run.json twice, then the metrics fill it within a few flushes.
# One rank: every rank keeps its own budget, and another rank would wait for
# this one in a collective until its watchdog fires.
AORTA_TEST_ENOSPC_AFTER=40000 ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" train full 1 \
    training.max_steps=60 scheduler.total_steps=60 >"$tmp/full.out" 2>&1
rc=$?
[ "$rc" = 1 ] || { fail "full disk: exit $rc, want 1"; cat "$tmp/full.out"; }
n=$(grep -c "aorta: error: .*rank_00_metrics.jsonl: cannot write metrics: No space left on device" "$tmp/full.out")
[ "$n" = 1 ] || { fail "full disk: said $n times, want once"; cat "$tmp/full.out"; }
whole_lines "$tmp"/art/full/rank_00_metrics.jsonl || fail "full disk: the metrics file ends in a partial line"
e=$(end "$tmp/art/full")
[[ $e == "False out of space on rank 0: "*"No space left on device" ]] || fail "full disk: run.json ends: $e"

# report on a full disk: an error, and every file it leaves is whole.
"$aorta" report --log-dir "$src/tests/data/bad/report_run.d" --label a --output "$tmp/rep" \
    >"$tmp/rep.out" 2>&1 || fail "report (plenty of room) exited $?"
AORTA_TEST_ENOSPC_AFTER=60000 "$aorta" report --log-dir "$src/tests/data/bad/report_run.d" \
    --label a --output "$tmp/repfull" >"$tmp/repfull.out" 2>&1
rc=$?
[ "$rc" = 1 ] || { fail "report on a full disk: exit $rc, want 1"; cat "$tmp/repfull.out"; }
[ "$(grep -c 'aorta: error: .*No space left on device' "$tmp/repfull.out")" = 1 ] ||
    { fail "report on a full disk: not one error line"; cat "$tmp/repfull.out"; }
for f in "$tmp"/repfull/*; do
    cmp -s "$f" "$tmp/rep/$(basename "$f")" || fail "report on a full disk left $(basename "$f") unlike the whole file"
done

# --- kill -9 of rank 1 of 2 --------------------------------------------------------
train killed 2 training.max_steps=100000 training.log_interval=1 >"$tmp/killed.out" 2>&1 &
top=$!
# Ordered by the run's own output; the bound only ends a broken test.
for _ in $(seq 1 600); do
    grep -q 'step 6/' "$tmp/killed.out" && break
    sleep 0.2
done
# rank 1: the aorta process among this run's descendants that mpirun made rank 1
descendants() { for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
victim=
for p in $(descendants "$top"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 &&
        grep -q aorta "/proc/$p/cmdline" 2>/dev/null && victim=$p
done
if [ -z "$victim" ]; then
    fail "kill -9: rank 1 not found"
    kill "$top"
else
    kill -KILL "$victim"
fi
wait "$top"
rc=$?
[ "$rc" = 1 ] || { fail "kill -9: exit $rc, want 1"; cat "$tmp/killed.out"; }
e=$(end "$tmp/art/killed")
[ "$e" = "False rank 1 killed by signal 9 (Killed)" ] || { fail "kill -9: run.json ends: $e"; cat "$tmp/killed.out"; }
python3 - "$tmp/art/killed" <<'PY' || fail "kill -9: summary.json does not hold the steps that ran"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
lab = s["labels"][0] if "labels" in s else s["summary"]
assert lab["completed"] is False and lab["steps_run"] >= 6, lab
PY
finish train_faults
