#!/usr/bin/env bash
# A Ctrl-C'd train, on 1 and 2 ranks: exit 130 (not 0, not 1), run.json and
# summary.json say "completed": false and why, and `aorta report` shows how
# many of the planned steps ran. A run killed outright (SIGKILL) leaves
# run.json's "not recorded" end, which the report shows as well.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"

# start NAME NPROC: a long run in the background ($pid), once step 3 is logged.
start() {
    "$aorta" train --backend cpu --nproc "$2" --config "$src/config/tiny.yaml" --run-name "$1" \
        --override training.output_dir="$tmp/art" training.max_steps=100000 \
        training.log_interval=1 >"$tmp/$1.out" 2>&1 &
    pid=$!
    # Ordered by the run's own output; the bound only ends a broken test.
    for _ in $(seq 1 600); do
        grep -q 'step 3/' "$tmp/$1.out" && return 0
        sleep 0.2
    done
    fail "$1: no step 3 in 120 s"
    cat "$tmp/$1.out"
}

for np in 1 2; do
    start "int$np" "$np"
    kill -INT "$pid"
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" = 130 ] || { fail "Ctrl-C'd train on $np rank(s) exited $rc, want 130"; cat "$tmp/int$np.out"; }
    python3 - "$tmp/art/int$np" <<'PY' || fail "int$np: run.json/summary.json do not say how it ended"
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
assert run["completed"] is False, run.get("completed")
assert run["end"].startswith("stopped by a signal"), run["end"]
assert run["planned_steps"] > 1000, run["planned_steps"]
s = json.load(open(sys.argv[1] + "/summary.json"))
lab = s["labels"][0] if "labels" in s else s["summary"]
assert lab["completed"] is False and lab["steps_run"] >= 3, lab
PY
    grep -q "cut short: .* of .* planned steps; the run ended: stopped by a signal" "$tmp/int$np.out" ||
        fail "int$np: the summary table does not say the run was cut short"
done

# Killed outright: nothing records the end; the report says it is unknown.
start kill1 1
kill -KILL "$pid"
wait "$pid" 2>/dev/null
"$aorta" report --log-dir "$tmp/art/kill1" --label k --output "$tmp/rep" --skip-steps 0 \
    >"$tmp/rep.out" 2>&1 || { fail "report on a killed run exited $?"; cat "$tmp/rep.out"; }
grep -q "cut short: .* of .* planned steps; the run ended: not recorded: the run was killed" \
    "$tmp/rep.out" || { fail "the report does not say the run was cut short"; cat "$tmp/rep.out"; }
grep -q "Cut short: " "$tmp/rep/index.html" || fail "index.html does not say the run was cut short"
finish train_stop
