#!/usr/bin/env bash
# The bad-input corpus: every file in tests/data/bad is one case, run by this
# one script. A case file starts with comment lines:
#   # expect: CODE FRAGMENT   the exit code and a fixed string the output holds
#   # run: ARGS...            aorta's arguments (split on spaces); {file} is the
#                             case file, {dir} the corpus, {src} the source tree,
#                             {tmp} a scratch directory (also the working one)
# Without `run:`, NAME.sweep.yaml runs `sweep {file} --dry-run` and NAME.yaml
# `config validate --config {file}`. A case that exits 2 must print exactly
# one `aorta: error:` line and no sanitizer report.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
dir="$src/tests/data/bad"
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"

ncases=0
for file in "$dir"/*; do
    [ -f "$file" ] || continue
    name=$(basename "$file")
    expect=$(sed -n 's/^# expect: //p' "$file" | head -1)
    run=$(sed -n 's/^# run: //p' "$file" | head -1)
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
    run=${run//\{file\}/$file}
    run=${run//\{dir\}/$dir}
    run=${run//\{src\}/$src}
    run=${run//\{tmp\}/$work}
    read -ra args <<<"$run"
    rc=0
    (cd "$work" && exec "$aorta" "${args[@]}") >"$work/out" 2>&1 </dev/null || rc=$?
    if [ "$rc" != "$want" ]; then
        fail "$name: exit $rc, want $want"
        sed 's/^/    /' "$work/out"
        continue
    fi
    grep -qF -- "$fragment" "$work/out" || {
        fail "$name: the output lacks: $fragment"
        sed 's/^/    /' "$work/out"
        continue
    }
    if [ "$want" = 2 ]; then
        n=$(grep -c '^aorta: error:' "$work/out")
        [ "$n" = 1 ] || { fail "$name: $n error lines, want 1"; sed 's/^/    /' "$work/out"; }
    fi
    ! grep -q 'Sanitizer' "$work/out" || fail "$name: a sanitizer report"
done
[ "$ncases" -gt 0 ] || fail "no cases in $dir"
echo "$ncases cases"
finish bad_inputs
