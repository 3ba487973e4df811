# shellcheck shell=bash
# Checks shared by the end-to-end scripts that stop at the first failure.
# Needs AORTA (the binary). Source it: . "$(dirname "$0")/lib/assert.sh"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# run_expect CODE OUTFILE ARGS...: run aorta, stdout+stderr to OUTFILE, check the exit code.
run_expect() {
    local want=$1 out=$2 rc=0
    shift 2
    "$AORTA" "$@" >"$out" 2>&1 || rc=$?
    [[ $rc -eq $want ]] || { cat "$out" >&2; fail "aorta $* exited $rc, want $want"; }
}

# contains FILE TEXT: FILE has TEXT (a fixed string).
contains() {
    grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "$1 lacks: $2"; }
}

# analyze_fails NAME TEXT ARGS...: `aorta analyze ARGS` exits 2 with one error
# line holding TEXT and leaves nothing in its output directory ($TMP/out-NAME).
analyze_fails() {
    local name=$1 text=$2
    shift 2
    run_expect 2 "$TMP/$name.log" analyze "$@" --output "$TMP/out-$name" --run-name r
    [[ $(grep -c '^aorta: error: ' "$TMP/$name.log") -eq 1 ]] || { cat "$TMP/$name.log" >&2; fail "$name: not one error line"; }
    contains "$TMP/$name.log" "$text"
    if [[ -d "$TMP/out-$name" ]] && [[ -n "$(ls -A "$TMP/out-$name")" ]]; then
        ls -la "$TMP/out-$name" >&2
        fail "$name: left files in the output directory"
    fi
}
