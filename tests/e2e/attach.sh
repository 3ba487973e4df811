#!/usr/bin/env bash
# aorta attach without a GPU: exit codes and signals of the command pass
# through, a command that makes no CUDA context gets a note (not an error),
# run.json is written, bad flags and a missing command exit 2 with one error.
set -u
aorta=${AORTA:?set by ctest}
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"

"$aorta" attach --output "$tmp/a" --run-name t -- true >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || fail "attach -- true exited $rc"
grep -q "error" "$tmp/err" && fail "attach -- true printed an error: $(cat "$tmp/err")"
if [ -f "$tmp/a/t/run.json" ]; then
    grep -q '"command": "attach"' "$tmp/a/t/run.json" || fail "run.json without the command"
    grep -q '"true"' "$tmp/a/t/run.json" || fail "run.json without the command line"
    grep -q "did no GPU work" "$tmp/err" || fail "no note for a job without GPU work"
else
    # a build without CUDA has no injection library: one warning, job runs
    grep -q "untraced" "$tmp/err" || fail "no run.json and no warning"
fi

"$aorta" attach --output "$tmp/a" -- false 2>/dev/null
rc=$?
[ $rc = 1 ] || fail "attach -- false exited $rc"
"$aorta" attach --output "$tmp/a" -- sh -c 'echo out; echo err >&2; exit 42' >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 42 ] || fail "exit 42 came back as $rc"
grep -qx out "$tmp/out" || fail "the command's stdout did not pass through"
grep -qx err "$tmp/err" || fail "the command's stderr did not pass through"
# the command without --
"$aorta" attach --output "$tmp/a" sh -c 'exit 7' 2>/dev/null
rc=$?
[ $rc = 7 ] || fail "attach sh -c 'exit 7' exited $rc"

# killed by a signal: the same signal ends attach
sh -c "\"$aorta\" attach --output \"$tmp/a\" -- sh -c 'kill -TERM \$\$'; echo \$? >\"$tmp/sig\"" \
    2>/dev/null
[ "$(cat "$tmp/sig")" = 143 ] || fail "a command killed by SIGTERM came back as $(cat "$tmp/sig")"
# a signal sent to attach reaches the command, which may handle it
"$aorta" attach --output "$tmp/a" -- sh -c 'trap "exit 9" USR1; echo ready >'"$tmp/ready"'; while :; do sleep 0.1; done' \
    2>/dev/null &
pid=$!
for _ in $(seq 300); do [ -s "$tmp/ready" ] && break; sleep 0.1; done
kill -USR1 "$pid"
wait "$pid"
rc=$?
[ $rc = 9 ] || fail "SIGUSR1 to attach: the command's handler did not run (exit $rc)"

"$aorta" attach --output "$tmp/a" -- /nonexistent/cmd 2>"$tmp/err"
rc=$?
[ $rc = 127 ] || fail "a missing command exited $rc"
grep -q "aorta: error: /nonexistent/cmd: cannot run the command" "$tmp/err" || fail "no error line"

bad() {
    "$aorta" attach "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ $rc = 2 ] || fail "attach $* exited $rc, not 2"
    [ "$(grep -c 'aorta: error:' "$tmp/err")" = 1 ] || fail "attach $*: not one error line"
}
bad --bogus -- true
bad -- # no command
bad --window-ms 0 -- true
bad --window-ms abc -- true
bad --step-nvtx '(' -- true
bad --step-kernel '[' -- true
bad --comm '(' -- true
bad --step-nvtx step --window-ms 10 -- true
bad --run-name ../x -- true
bad --run-name
"$aorta" attach --help | grep -q "usage: aorta attach" || fail "no help"
finish attach
