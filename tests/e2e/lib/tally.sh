# shellcheck shell=bash
# For the end-to-end scripts that run every check and report all failures:
# a scratch directory $tmp (removed on exit), `fail MSG` (counts), and
# `finish NAME` (the summary line; exit 1 when anything failed).
# Source it: . "$(dirname "$0")/lib/tally.sh"
# shellcheck disable=SC2034 # tmp is the sourcing script's
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
finish() {
    if [ "$fails" -eq 0 ]; then
        echo "$1: ok"
    else
        echo "$1: $fails failure(s)"
        exit 1
    fi
}
