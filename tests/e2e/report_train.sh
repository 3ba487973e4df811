#!/usr/bin/env bash
# aorta train -> aorta report: two short CPU runs with different knobs, then a
# report comparing them; summary.json has every label field and a comparison
# with the knob among the setting differences. Skipped (77) where the binary
# has no `train` command yet.
set -euo pipefail

: "${AORTA:?AORTA must name the aorta binary}"
# MPI's leaks resolve to its own frames (tests/lsan.supp) only with slow unwinding.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
SRC="${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

if ! "$AORTA" train --help >/dev/null 2>&1; then
    echo "aorta train is not built in: skipped"
    exit 77
fi

train() {
    local name=$1
    shift
    "$AORTA" train --config "$SRC/config/tiny.yaml" --backend cpu --nproc 1 --run-name "$name" \
        --override training.output_dir="$TMP/runs" training.max_steps=12 \
        training.summary_skip_steps=2 "$@" >"$TMP/$name.log" 2>&1 ||
        { tail -30 "$TMP/$name.log" >&2; echo "FAIL: aorta train $name" >&2; exit 1; }
}
train prefetch fsdp.forward_prefetch=true
train noprefetch fsdp.forward_prefetch=false

"$AORTA" report --log-dir "$TMP/runs/prefetch" --label prefetch \
    --log-dir "$TMP/runs/noprefetch" --label noprefetch --output "$TMP/rep" \
    --reference prefetch --candidate noprefetch >"$TMP/report.log" 2>&1 ||
    { tail -30 "$TMP/report.log" >&2; echo "FAIL: aorta report" >&2; exit 1; }

python3 - "$TMP/rep/summary.json" "$TMP/runs/prefetch/summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
labels = {l["label"]: l for l in d["labels"]}
assert set(labels) == {"prefetch", "noprefetch"}, labels.keys()
for l in labels.values():
    for k in ("runs", "ranks", "steps", "knobs", "metrics", "rank_skew", "decomposition",
              "telemetry", "skip_steps"):
        assert k in l, k
    assert l["steps"] == 10 and l["skip_steps"] == 2, (l["steps"], l["skip_steps"])
    assert l["metrics"]["step_ms"]["n"] == 10
    assert l["knobs"]["fsdp.sharding_strategy"] == "full_shard"
assert labels["noprefetch"]["knobs"]["fsdp.forward_prefetch"] == "false"
c = d["comparison"]
assert "step_ms" in c["metrics"], c["metrics"].keys()
diffs = {x["key"]: x for x in c["setting_differences"]}
assert diffs["fsdp.forward_prefetch"]["reference"] == "true", diffs
# the run's own summary, written by aorta train at the end
s = json.load(open(sys.argv[2]))["summary"]
assert s["metrics"]["step_ms"]["n"] == 10
PY
[[ -s "$TMP/rep/index.html" ]] || { echo "FAIL: no index.html" >&2; exit 1; }
echo "report_train e2e: ok"
