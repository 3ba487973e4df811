#!/usr/bin/env bash
# aorta report end to end on synthetic run directories (tests/helpers/synth_run,
# written with the real JSONL writer): two labels with a comparison, an output
# directory with `latest` and --all-runs, summary.json fields, every chart and
# index.html, and the bad inputs that must exit 2 with one line.
set -euo pipefail
# shellcheck source=/dev/null
. "$(dirname "$0")/lib/synth.sh"

"$AORTA_SYNTH_RUN" "$TMP/fast" ranks=2 steps=60 profile_every=10 baseline=4 nccl_algo=Ring
"$AORTA_SYNTH_RUN" "$TMP/slow" ranks=2 steps=60 comm_ms=8 hidden=0.4 seed=7 strategy=shard_grad_op
mkdir "$TMP/outdir"
"$AORTA_SYNTH_RUN" "$TMP/outdir/r1" ranks=2 steps=30
"$AORTA_SYNTH_RUN" "$TMP/outdir/r2" ranks=2 steps=30 seed=3
ln -s r2 "$TMP/outdir/latest"

run_expect 0 "$TMP/help" report --help
contains "$TMP/help" "usage: aorta report"

run_expect 0 "$TMP/out" report --log-dir "$TMP/fast" --label fast --log-dir "$TMP/slow" \
    --label slow --output "$TMP/rep" --reference fast --candidate slow
contains "$TMP/out" "summary of fast"
contains "$TMP/out" "step_ms"
contains "$TMP/out" "worse"
contains "$TMP/out" "setting fsdp.sharding_strategy: full_shard -> shard_grad_op"
for f in summary.json index.html fast_timeline.png fast_timeline.svg fast_streams.png \
    fast_streams.svg slow_timeline.png slow_streams.svg overlap_breakdown.png \
    overlap_breakdown.svg comparison_slow.png comparison_slow.svg; do
    [[ -s "$TMP/rep/$f" ]] || fail "report lacks $f"
done
python3 - "$TMP/rep/summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
labels = {l["label"]: l for l in d["labels"]}
assert set(labels) == {"fast", "slow"}, labels.keys()
for l in labels.values():
    for k in ("runs", "ranks", "steps", "knobs", "metrics", "rank_skew", "decomposition",
              "telemetry", "skip_steps"):
        assert k in l, k
    for m in ("step_ms", "tokens_per_s", "overlap_ratio", "exposed_comm_ms",
              "busbw_allgather_gbps"):
        for s in ("median", "mean", "p90", "p99", "min", "max", "rank_medians"):
            assert s in l["metrics"][m], (m, s)
assert labels["fast"]["steps"] == 55
assert labels["fast"]["decomposition"] is not None
assert labels["slow"]["decomposition"] is None
assert labels["fast"]["knobs"]["env.NCCL_ALGO"] == "Ring"
c = d["comparison"]
assert c["reference"] == "fast" and c["candidate"] == "slow"
assert c["metrics"]["step_ms"]["verdict"] == "worse"
assert c["metrics"]["overlap_ratio"]["verdict"] == "worse"
assert c["metrics"]["compute_ms"]["verdict"] == "no significant difference"
assert any(x["key"] == "fsdp.sharding_strategy" for x in c["setting_differences"])
PY
grep -c "<svg" "$TMP/rep/index.html" | grep -qx 6 || fail "index.html should inline 6 charts"

# an output directory: its latest run, or all of them; --skip-steps
run_expect 0 "$TMP/out" report --log-dir "$TMP/outdir" --label od --output "$TMP/rep2" \
    --skip-steps 10
python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["labels"][0]; assert l["runs"]==["r2"] and l["steps"]==20, l["runs"]' "$TMP/rep2/summary.json"
run_expect 0 "$TMP/out" report --log-dir "$TMP/outdir" --label od --output "$TMP/rep3" --all-runs
python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["labels"][0]; assert l["runs"]==["r1","r2"], l["runs"]' "$TMP/rep3/summary.json"

# a sweep's output directory: every run a label; one reference against all
# the others gives a matrix (configs x metrics) and one comparison each
"$AORTA_SYNTH_RUN" "$TMP/outdir/r3" ranks=2 steps=30 seed=4 comm_ms=8
run_expect 0 "$TMP/out" report --sweep "$TMP/outdir" --reference r1 --output "$TMP/rep5" --no-trace
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [l["label"] for l in d["labels"]]==["r1","r2","r3"]; assert [c["candidate"] for c in d["comparisons"]]==["r2","r3"], d["comparisons"]' "$TMP/rep5/summary.json" ||
    fail "sweep labels or comparisons"
contains "$TMP/rep5/index.html" 'id="matrix"'
contains "$TMP/rep5/index.html" 'id="chart-comparison_r3"'
run_expect 2 "$TMP/out" report --sweep "$TMP/outdir" --reference nope --output "$TMP/x"
contains "$TMP/out" "--reference: 'nope' is not one of the labels"

# a truncated last line is skipped with a warning and counted
printf '{"schema":1,"rank":0' >>"$TMP/fast/rank_00_metrics.jsonl"
run_expect 0 "$TMP/out" report --log-dir "$TMP/fast" --label f --output "$TMP/rep4"
contains "$TMP/out" "the last line is incomplete"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["labels"][0]["truncated_lines"]==1' "$TMP/rep4/summary.json"

# bad input: exit 2, one line naming the problem
mkdir "$TMP/empty"
run_expect 2 "$TMP/out" report --log-dir "$TMP/fast" --output "$TMP/x"
contains "$TMP/out" "0 --label for 1 --log-dir"
run_expect 2 "$TMP/out" report --log-dir "$TMP/fast" --label a --log-dir "$TMP/slow" --label b \
    --output "$TMP/x" --reference a --candidate c
contains "$TMP/out" "--candidate: 'c' is not one of the labels"
run_expect 2 "$TMP/out" report --log-dir "$TMP/empty" --label e --output "$TMP/x"
contains "$TMP/out" "no \`latest\` run"
run_expect 2 "$TMP/out" report --log-dir "$TMP/nowhere" --label e --output "$TMP/x"
contains "$TMP/out" "no such directory"
run_expect 2 "$TMP/out" report --log-dir "$TMP/fast" --label a --output "$TMP/x" --bogus
contains "$TMP/out" "unknown option '--bogus'"
run_expect 2 "$TMP/out" report --log-dir "$TMP/fast" --label a
contains "$TMP/out" "--output is required"
printf '{"schema":7}\n' >"$TMP/slow/rank_01_metrics.jsonl"
run_expect 2 "$TMP/out" report --log-dir "$TMP/slow" --label s --output "$TMP/x"
contains "$TMP/out" "schema 7"
[[ ! -e "$TMP/x" ]] || fail "a failed report must not leave an output directory"
echo "report e2e: ok"
