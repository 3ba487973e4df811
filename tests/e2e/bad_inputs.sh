#!/usr/bin/env bash
# The bad-input corpus: every file in tests/data/bad is one case, run by this
# one script. A case file starts with comment lines:
#   # expect: CODE FRAGMENT   the exit code and a fixed string the output holds
#   # also: TEXT              (any number) more fixed strings the output holds
#   # reject: TEXT            (optional) a fixed string the output must not hold
#   # run: ARGS...            aorta's arguments (split on spaces); {file} is the
#                             case file, {dir} the corpus (a copy), {src} the source tree,
#                             {tmp} a scratch directory (also the working one),
#                             {fifo} a FIFO no one writes (a reader that opens it blocks),
#                             {fiforun} a run directory whose run.json is such a FIFO
# Without `run:`, NAME.sweep.yaml runs `sweep {file} --dry-run` and NAME.yaml
# `config validate --config {file}`. The fragment may hold placeholders too.
# A case that exits 2 prints exactly one `aorta: error:` line and leaves its
# working directory empty (nothing half-written), one that exits 0 none, and
# no case a sanitizer report or an analyze staging directory. A case that runs
# past AORTA_CASE_TIMEOUT (300) s is a hang (a guard, not a speed check: every
# case takes seconds).
set -u
aorta=${AORTA:?set by ctest}
# Full stacks, so the MPI runtime's own leaks match tests/lsan.supp.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
src=${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
# A copy, so that a case that wrongly writes (a --resume that overwrites) cannot
# change the corpus.
cp -r "$src/tests/data/bad" "$tmp/corpus"
dir="$tmp/corpus"
fifo="$tmp/fifo"
mkfifo "$fifo"
fiforun="$tmp/fiforun"
mkdir "$fiforun"
cp "$dir/report_run.d/rank_00_metrics.jsonl" "$fiforun/"
mkfifo "$fiforun/run.json"
limit=${AORTA_CASE_TIMEOUT:-300}

# subst TEXT: TEXT with the placeholders filled in.
subst() {
    local t=$1
    t=${t//\{file\}/$file}
    t=${t//\{dir\}/$dir}
    t=${t//\{src\}/$src}
    t=${t//\{tmp\}/$work}
    t=${t//\{fiforun\}/$fiforun}
    t=${t//\{fifo\}/$fifo}
    printf '%s' "$t"
}

ncases=0
for file in "$dir"/*; do
    [ -f "$file" ] || continue
    name=$(basename "$file")
    expect=$(sed -n 's/^# expect: //p' "$file" | head -1)
    run=$(sed -n 's/^# run: //p' "$file" | head -1)
    reject=$(sed -n 's/^# reject: //p' "$file" | head -1)
    [ -n "$expect" ] || continue # a data file another case names
    ncases=$((ncases + 1))
    want=${expect%% *}
    fragment=${expect#* }
    if [ -z "$run" ]; then
        case $name in
        *.sweep.yaml) run="sweep {file} --dry-run" ;;
        *.yaml) run="config validate --config {file}" ;;
        *) fail "$name: no run: line and no default for its name"; continue ;;
        esac
    fi
    work="$tmp/$name.d"
    mkdir -p "$work"
    log="$tmp/$name.out"
    fragment=$(subst "$fragment")
    read -ra args <<<"$(subst "$run")"
    rc=0
    (cd "$work" && exec timeout -k 10 "$limit" "$aorta" "${args[@]}") >"$log" 2>&1 </dev/null || rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        fail "$name: still running after $limit s (a hang)"
        continue
    fi
    if [ "$rc" != "$want" ]; then
        fail "$name: exit $rc, want $want"
        sed 's/^/    /' "$log"
        continue
    fi
    grep -qF -- "$fragment" "$log" || {
        fail "$name: the output lacks: $fragment"
        sed 's/^/    /' "$log"
        continue
    }
    while IFS= read -r also; do
        grep -qF -- "$(subst "$also")" "$log" || fail "$name: the output lacks: $also"
    done < <(sed -n 's/^# also: //p' "$file")
    if [ -n "$reject" ] && grep -qF -- "$reject" "$log"; then
        fail "$name: the output holds: $reject"
        sed 's/^/    /' "$log"
    fi
    n=$(grep -c 'aorta: error:' "$log")
    if [ "$want" = 2 ] && [ "$n" != 1 ]; then
        fail "$name: $n error lines, want 1"
        sed 's/^/    /' "$log"
    elif [ "$want" = 2 ] && [ -n "$(ls -A "$work")" ]; then
        fail "$name: exit 2, but it left files: $(cd "$work" && find . -mindepth 1 | head -5 | tr '\n' ' ')"
    elif [ "$want" = 0 ] && [ "$n" != 0 ]; then
        fail "$name: exit 0 with an error line"
        sed 's/^/    /' "$log"
    fi
    ! grep -q 'Sanitizer' "$log" || fail "$name: a sanitizer report"
    staged=$(find "$work" -name '.*.partial-*' | head -1)
    [ -z "$staged" ] || fail "$name: left a staging directory: $staged"
done
[ "$ncases" -gt 0 ] || fail "no cases in $dir"
echo "$ncases cases"
finish bad_inputs
