#!/usr/bin/env bash
# aorta analyze beside aorta train: a 2-rank CPU run's own trace.json analysed
# gives the run's JSONL numbers within 1 %, and one `aorta report` compares
# the analyzed PyTorch trace pair with the train run (different sources).
set -euo pipefail

: "${AORTA:?AORTA must name the aorta binary}"
# MPI's leaks resolve to its own frames (tests/lsan.supp) only with slow unwinding.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
SRC="${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/e2e/lib/assert.sh
. "$(dirname "$0")/lib/assert.sh"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

if ! "$AORTA" train --help >/dev/null 2>&1; then
    echo "aorta train is not built in: skipped"
    exit 77
fi

run_expect 0 "$TMP/train.log" train --config "$SRC/config/tiny.yaml" --backend cpu --nproc 2 \
    --run-name cpu --override training.output_dir="$TMP/runs" training.max_steps=6 \
    training.summary_skip_steps=1 profiling.chrome_trace=true profiling.enabled=true \
    profiling.wait=0 profiling.warmup=0 profiling.active=6
run_expect 0 "$TMP/own.log" analyze "$TMP/runs/cpu/trace.json" --output "$TMP/an" --run-name own
run_expect 0 "$TMP/kineto.log" analyze "$SRC/tests/data/fsdp2_default_h200x2" --output "$TMP/an" \
    --run-name fsdp2

python3 - "$TMP/runs/cpu" "$TMP/an/own" <<'PY'
import json, sys
train, own = sys.argv[1], sys.argv[2]
for rank in (0, 1):
    a = [json.loads(l) for l in open(f"{train}/rank_0{rank}_metrics.jsonl")]
    b = {x["step"]: x for x in map(json.loads, open(f"{own}/rank_0{rank}_metrics.jsonl"))}
    a = [x for x in a if x["phase"] == "train"]
    assert len(a) == 6 and set(b) == {x["step"] for x in a}, (len(a), sorted(b))
    for x in a:
        y = b[x["step"]]
        for k in ("step_ms", "compute_ms", "comm_ms", "copy_ms", "overlap_ms", "exposed_comm_ms",
                  "idle_ms", "compute_allgather_ms", "compute_reducescatter_ms"):
            assert abs(x[k] - y[k]) <= 0.01 * abs(x[k]) + 1e-9, (rank, x["step"], k, x[k], y[k])
PY

run_expect 0 "$TMP/report.log" report --log-dir "$TMP/runs/cpu" --label cpu \
    --log-dir "$TMP/an/fsdp2" --label fsdp2 --output "$TMP/rep" --reference cpu --candidate fsdp2
[[ -f "$TMP/rep/index.html" ]] || fail "no index.html"
# the analyzed label's section: HTA's numbers per rank, slowest ranks, top kernels
contains "$TMP/rep/index.html" "Trace analysis (kineto traces)"
contains "$TMP/rep/index.html" 'id="slowest-1"'
contains "$TMP/rep/index.html" "ncclDevKernel_AllGather_RING_LL"
python3 - "$TMP/rep/summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
labels = {l["label"]: l for l in d["labels"]}
assert set(labels) == {"cpu", "fsdp2"}, labels.keys()
assert labels["fsdp2"]["steps"] == 3 and labels["fsdp2"]["skip_steps"] == 0, labels["fsdp2"]
assert "step_ms" in d["comparison"]["metrics"]
PY
