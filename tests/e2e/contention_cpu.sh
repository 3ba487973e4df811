#!/usr/bin/env bash
# The price of overlap from a kernel trace, end to end on the CPU (DESIGN §7,
# "Contention"): a hand-made Kineto trace whose second GEMM of each step runs
# 200 us alone (steps 0, 1) and 260 us beside an all-gather (steps 2, 3);
# `aorta analyze` prices 0.060 ms a step against that launch's own alone time
# (not the name's mean, which the first GEMM's 100 us would pull down), the
# summary holds it per rank with its evidence, and diagnose leads with it
# (0.06 of a 0.38 ms median step: contention-bound). A cpu train run with baselines
# has no kernel trace: its decomposition says it is in events.
set -euo pipefail

: "${AORTA:?AORTA must name the aorta binary}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
SRC="${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/e2e/lib/assert.sh
. "$(dirname "$0")/lib/assert.sh"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

python3 - "$TMP/trace.json" <<'PY'
import json, sys
ev, t = [], 0.0
def kernel(name, ts, dur, stream):
    ev.append({"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0,
               "tid": stream, "args": {"stream": stream, "device": 0}})
for step in range(4):
    beside = step >= 2
    g1 = 260 if beside else 200
    kernel("gemm", t, 100, 7)
    kernel("gemm", t + 100, g1, 7)
    kernel("layernorm", t + 100 + g1, 50, 7)
    if beside:  # hidden under the second GEMM: nothing exposed
        kernel("ncclDevKernel_AllGather_RING_LL", t + 120, 200, 20)
    end = t + 100 + g1 + 50
    ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "ts": t,
               "dur": end - t, "pid": 1, "tid": 1})
    t = end + 1000
json.dump({"traceEvents": ev}, open(sys.argv[1], "w"))
PY

run_expect 0 "$TMP/an.log" analyze "$TMP/trace.json" --output "$TMP/an" --run-name k
contains "$TMP/an.log" "contention (the same kernels beside a collective against alone), ms a step: rank 0 0.060"
python3 - "$TMP/an/k" <<'PY'
import json, sys
run = sys.argv[1]
recs = [json.loads(l) for l in open(f"{run}/rank_00_metrics.jsonl")]
got = [(r["extra"].get("contention") or {}).get("ms") for r in recs]
assert got[:2] == [None, None], got  # no collective: nothing to price
assert all(abs(x - 0.060) < 1e-9 for x in got[2:]), got
c = json.load(open(f"{run}/summary.json"))["summary"]["contention"]
assert len(c) == 1 and abs(c[0]["ms_median"] - 0.060) < 1e-9, c
k = c[0]["evidence"]["kernels"][0]
assert k["name"] == "gemm" and k["beside_per_step"] == 1 and k["alone_us"] == 200, k
assert k["beside_us"] == 260 and abs(k["ms_per_step"] - 0.060) < 1e-9, k
PY

run_expect 0 "$TMP/diag.log" diagnose "$TMP/an/k"
contains "$TMP/diag.log" "contention-bound"
contains "$TMP/diag.log" "1. [contention] contention: compute kernels ran 0.06 ms a step longer"
contains "$TMP/diag.log" "gemm: 1 a step beside, 260 us against 200 us alone"
contains "$TMP/diag.log" "NCCL's CTA limit" # a traced job: not aorta's config keys
run_expect 0 "$TMP/diag.json" diagnose "$TMP/an/k" --json
python3 - "$TMP/diag.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["runs"][0]
assert d["bound"] == "contention-bound", d["bound"]
assert d["findings"][0]["id"] == "contention" and abs(d["findings"][0]["ms"] - 0.06) < 1e-9
PY

# A cpu run with baselines: no kernel trace, so the decomposition is in events.
if "$AORTA" train --help >/dev/null 2>&1; then
    run_expect 0 "$TMP/train.log" train --config "$SRC/config/tiny.yaml" --backend cpu \
        --run-name b --override training.output_dir="$TMP/runs" training.max_steps=10 \
        training.summary_skip_steps=1 training.baseline_steps=2
    contains "$TMP/train.log" "decomposition (events)"
    python3 - "$TMP/runs/b/summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["summary"]["decomposition"]
assert d["source"] == "events", d
assert d["events_vs_kernels"]["compute_only_compute_ms"]["kernels"] is None, d
assert abs(d["gap_ms"] - (d["step_ms"] - d["ideal_ms"])) < 1e-9, d
PY
    run_expect 0 "$TMP/trdiag.log" diagnose "$TMP/runs/b"
    contains "$TMP/trdiag.log" "[decomposition_events]"
    if grep -qF '[contention]' "$TMP/trdiag.log"; then
        fail "a cpu run has no kernel trace to price contention with"
    fi
fi
echo "contention_cpu: ok"
