#!/usr/bin/env bash
# The report at scale: 8 ranks x 10,000 iterations (synthetic records written
# with the real JSONL writer, 1 in 100 with per-op intervals), then time
# `aorta report` on it alone and as a comparison of two such runs.
# Target (issue): one label in under 2 s.
#   bench/report.sh BUILD_DIR   (a Release build with targets aorta and synth_run)
set -euo pipefail
BUILD="${1:?usage: bench/report.sh BUILD_DIR}"
AORTA="$BUILD/aorta"
SYNTH="$BUILD/tests/synth_run"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

"$SYNTH" "$TMP/a" ranks=8 steps=10000 profile_every=100 baseline=20
"$SYNTH" "$TMP/b" ranks=8 steps=10000 profile_every=100 comm_ms=5 seed=2
echo "input: $(du -sh "$TMP/a" | cut -f1) per run, $(wc -l <"$TMP/a/rank_0_metrics.jsonl") lines per rank"

timed() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
for i in 1 2 3; do
    echo "one label (8 x 10000), run $i: $(timed "$AORTA" report --log-dir "$TMP/a" --label a --output "$TMP/out1") s"
done
for i in 1 2 3; do
    echo "two labels + comparison, run $i: $(timed "$AORTA" report --log-dir "$TMP/a" --label a --log-dir "$TMP/b" --label b --output "$TMP/out2") s"
done
