#!/usr/bin/env bash
# aorta queues on the cpu backend: every workload at 1 and 4 streams with
# consistent metrics (structural invariants only: op counts, union <= sum,
# the efficiency and throughput definitions; no timing thresholds), the sync
# modes, CSV, compare with verdicts, and bad flags exiting 2.
set -u
aorta=${AORTA:?set by ctest}
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"

command -v python3 >/dev/null || {
    echo "SKIP: python3 not installed"
    exit 77
}

[ "$("$aorta" queues list | wc -l)" = 7 ] || fail "queues list: not 7 workloads"

for w in hetero tiny gemm experts fsdp pipeline dataload; do
    if ! "$aorta" queues "$w" --backend cpu --streams 4,1 --iterations 3 --warmup 1 \
        --json "$tmp/$w.json" --csv "$tmp/$w.csv" >"$tmp/$w.out" 2>"$tmp/$w.err"; then
        fail "$w exited non-zero"
        cat "$tmp/$w.out" "$tmp/$w.err"
        continue
    fi
    grep -Eq '^ +1 +[0-9]+ ' "$tmp/$w.out" || fail "$w: no 1-stream row"
    grep -Eq '^ +4 +[0-9]+ ' "$tmp/$w.out" || fail "$w: no 4-stream row"
    [ "$(wc -l <"$tmp/$w.csv")" = 3 ] || fail "$w: CSV is not a header and 2 rows"
    python3 - "$tmp/$w.json" "$w" <<'PY' || fail "$w: JSON invariants"
import json, math, sys
d = json.load(open(sys.argv[1])); w = sys.argv[2]
assert d["command"] == "queues" and d["workload"] == w and d["backend"] == "cpu", d
assert "CUDA_DEVICE_MAX_CONNECTIONS" in d["env"] and "GPU_MAX_HW_QUEUES" in d["env"]
res = {r["streams"]: r for r in d["results"]}
assert sorted(res) == [1, 4], res.keys()
ops = {"tiny": lambda s: 8 * s, "gemm": lambda s: s, "hetero": lambda s: 1 + 4 * max(s - 1, 1),
       "experts": lambda s: 2 + 2 * s, "fsdp": lambda s: 11, "pipeline": lambda s: 4 * s,
       "dataload": lambda s: 4 * s}[w]
thr1, ops1 = res[1]["throughput_ops_per_s"], res[1]["ops_per_iteration"]
for s, r in res.items():
    n = r["ops_per_iteration"]
    assert n == ops(s), (s, n)
    assert len(r["latency_samples_us"]) == 3 == r["latency_us"]["n"]
    L = r["latency_us"]
    assert 0 < L["min"] <= L["p50"] <= L["p95"] <= L["p99"] <= L["max"], L
    assert abs(L["mean"] - sum(r["latency_samples_us"]) / 3) <= 1e-9 * L["mean"]
    u = r["union"]
    assert 0 < u["busy_ms"] <= u["sum_ms"] * (1 + 1e-12), u
    assert 0 <= u["concurrent_ms"] <= u["busy_ms"], u
    assert 1 <= u["max_streams"] <= s, u
    assert abs(u["concurrency"] - u["sum_ms"] / u["busy_ms"]) < 1e-9
    assert 1 - 1e-9 <= u["concurrency"] <= u["max_streams"] + 1e-9
    if s == 1:
        assert u["concurrent_ms"] == 0 and u["max_streams"] == 1
        assert r["gaps_us"]["inter_stream"]["n"] == 0
        assert r["scaling_efficiency"] == 1
    thr = r["throughput_ops_per_s"]
    assert abs(thr - 3 * n / (r["span_ms"] * 1e-3)) <= 1e-9 * thr
    assert abs(r["throughput_per_stream_ops_per_s"] - thr / s) <= 1e-9 * thr
    assert abs(r["scaling_efficiency"] - thr / thr1 * ops1 / n) <= 1e-9
    if n == s * ops1:  # work grows with the streams: the usual definition
        assert abs(r["scaling_efficiency"] - thr / (s * thr1)) <= 1e-9
    # Iterations do not overlap under per_iteration sync: the span is their sum.
    assert r["span_ms"] * 1e3 <= sum(r["latency_samples_us"]) * (1 + 1e-9)
    g = r["gaps_us"]
    assert g["intra_stream"]["n"] + g["inter_stream"]["n"] <= 3 * n
    assert sum(o["duration_us"]["n"] for o in r["ops"]) == 3 * n
    for o in r["ops"]:
        assert o["latency_us"]["mean"] >= o["duration_us"]["mean"] - 1e-6, o
        assert o["latency_us"]["min"] >= 0 and o["duration_us"]["min"] >= 0, o
    assert r["kernels"] is None
    assert all(c is None or 1 - 1e-9 <= c <= s + 1e-9 for c in r["concurrency_samples"])
if w == "fsdp":
    assert "stand in" in d["note"], d["note"]
PY
done

for sync in end_only none; do
    "$aorta" queues tiny --backend cpu --streams 1,4 --iterations 3 --warmup 1 --sync "$sync" \
        --json "$tmp/tiny-$sync.json" >"$tmp/out" 2>&1 || { fail "--sync $sync"; cat "$tmp/out"; }
    python3 - "$tmp/tiny-$sync.json" "$sync" <<'PY' || fail "--sync $sync: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sync"] == sys.argv[2]
for r in d["results"]:
    assert len(r["latency_samples_us"]) == 3 and r["union"]["sum_ms"] >= r["union"]["busy_ms"]
PY
done

# compare: a record against itself is no significant difference everywhere.
"$aorta" queues compare "$tmp/tiny.json" "$tmp/tiny.json" --json "$tmp/cmp.json" >"$tmp/cmp.out" 2>&1 ||
    fail "compare exited non-zero"
[ "$(grep -c 'no significant difference' "$tmp/cmp.out")" = 6 ] || {
    fail "compare of a record with itself: not 6 'no significant difference' lines"
    cat "$tmp/cmp.out"
}
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['comparisons']) == 6" \
    "$tmp/cmp.json" || fail "compare --json"
CUDA_DEVICE_MAX_CONNECTIONS=4 "$aorta" queues tiny --backend cpu --streams 1 --iterations 3 \
    --warmup 0 --json "$tmp/tiny-c4.json" >/dev/null 2>&1 || fail "tiny with a queue variable"
"$aorta" queues compare "$tmp/tiny.json" "$tmp/tiny-c4.json" >"$tmp/cmp2.out" 2>&1 || fail "compare 2"
grep -q 'env.CUDA_DEVICE_MAX_CONNECTIONS' "$tmp/cmp2.out" || fail "compare: env difference not shown"

# A sweep over a queue variable: one launch per value, a row per stream count.
cat >"$tmp/sweep.yaml" <<'YAML'
name: qs
command: queues
args: [tiny, --backend, cpu, --iterations, 2, --warmup, 0]
axes:
  streams: [1, 2]
env:
  CUDA_DEVICE_MAX_CONNECTIONS: [1, 8]
metric: [latency_p99_us, scaling_efficiency]
YAML
if "$aorta" sweep "$tmp/sweep.yaml" --out "$tmp/qs.csv" --work-dir "$tmp/qs" >"$tmp/sw.out" 2>&1; then
    [ "$(wc -l <"$tmp/qs.csv")" = 5 ] || fail "queues sweep: not a header and 4 rows"
    for row in '^1,1,' '^2,8,'; do
        grep -q "$row" "$tmp/qs.csv" || fail "queues sweep: no row $row (streams, the variable)"
    done
    for png in qs.png qs_scaling_efficiency.png; do
        [ -s "$tmp/$png" ] || fail "queues sweep: no chart $png"
    done
else
    fail "queues sweep exited non-zero"
    cat "$tmp/sw.out"
fi

# Bad input: exit 2 and one error line.
expect2() {
    local what=$1
    shift
    "$aorta" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    local rc=$?
    [ $rc = 2 ] || fail "$what: exit $rc, want 2"
    grep -q '^aorta: error: ' "$tmp/bad.err" || fail "$what: no error line"
}
expect2 "no workload" queues --backend cpu
expect2 "unknown workload" queues nope --backend cpu
expect2 "unknown flag" queues tiny --backend cpu --nope
expect2 "streams 0" queues tiny --backend cpu --streams 0
expect2 "streams 65" queues tiny --backend cpu --streams 65
expect2 "streams twice" queues tiny --backend cpu --streams 2,2
expect2 "bad sync" queues tiny --backend cpu --sync sometimes
expect2 "iterations 0" queues tiny --backend cpu --iterations 0
expect2 "missing value" queues tiny --backend cpu --iterations
expect2 "bad backend" queues tiny --backend tpu
expect2 "list with args" queues list x
expect2 "compare one file" queues compare "$tmp/tiny.json"
expect2 "compare missing" queues compare "$tmp/tiny.json" "$tmp/none.json"
expect2 "compare workloads" queues compare "$tmp/tiny.json" "$tmp/gemm.json"
echo '{"command": "coll"}' >"$tmp/other.json"
expect2 "compare not queues" queues compare "$tmp/other.json" "$tmp/tiny.json"
finish queues_cpu
