# shellcheck shell=bash
# Setup of the e2e scripts that build synthetic run directories
# (tests/helpers/synth_run): AORTA and AORTA_SYNTH_RUN must be set, $TMP is a
# fresh directory removed on exit, and lib/assert.sh's checks are loaded.
# Source it after `set -euo pipefail`: . "$(dirname "$0")/lib/synth.sh"
: "${AORTA:?AORTA must name the aorta binary}"
: "${AORTA_SYNTH_RUN:?AORTA_SYNTH_RUN must name the synth_run helper}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=/dev/null
. "$(dirname "${BASH_SOURCE[0]}")/assert.sh"
