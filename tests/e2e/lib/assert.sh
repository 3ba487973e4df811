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
