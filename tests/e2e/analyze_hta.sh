#!/usr/bin/env bash
# aorta analyze on the real 2-rank PyTorch FSDP2 trace pair (tests/data): the
# per-rank numbers under HTA's conventions equal HTA 0.5.0's (the data's
# README: overlap within 0.5 percentage points, temporal breakdown within 1 %),
# three steps per rank, and the run directory has the layout of a train run.
set -euo pipefail

: "${AORTA:?AORTA must name the aorta binary}"
SRC="${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/e2e/lib/assert.sh
. "$(dirname "$0")/lib/assert.sh"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

run_expect 0 "$TMP/analyze.log" analyze "$SRC/tests/data/fsdp2_default_h200x2" \
    --output "$TMP/runs" --run-name fsdp2
for f in run.json summary.json rank_00_metrics.jsonl rank_01_metrics.jsonl; do
    [[ -f "$TMP/runs/fsdp2/$f" ]] || fail "no $f"
done
[[ "$(readlink "$TMP/runs/latest")" == fsdp2 ]] || fail "latest does not point at the run"
contains "$TMP/analyze.log" "slowest rank per step"

python3 - "$TMP/runs/fsdp2" <<'PY'
import json, sys
d = sys.argv[1]
# HTA 0.5.0 on these files (tests/data/fsdp2_default_h200x2/README.md)
hta = {0: (0.00, 124132, 6047, 2972, 133151), 1: (3.68, 1710, 7344, 136797, 145851)}
def no_dup(pairs):
    keys = [k for k, _ in pairs]
    dup = {k for k in keys if keys.count(k) > 1}
    assert not dup, ("a key twice in one object of summary.json", dup)
    return dict(pairs)
s = json.load(open(f"{d}/summary.json"), object_pairs_hook=no_dup)
ranks = s["analyze"]["ranks"]
assert len(ranks) == 2
for r in ranks:
    want = hta[r["rank"]]
    got = r["hta"]
    assert abs(got["comm_comp_overlap_pctg"] - want[0]) <= 0.5, (r["rank"], got)
    for k, w in zip(("idle_time_us", "compute_time_us", "non_compute_time_us", "kernel_time_us"),
                    want[1:]):
        assert abs(got[k] - w) <= 0.01 * w, (r["rank"], k, got[k], w)
    assert r["steps"] == 3 and not r["stepless"], r
    assert r["kernels"][0]["class"] in ("comm", "compute"), r["kernels"][0]
    tot = r["total"]
    assert tot["idle_ms"] >= tot["host_wait_ms"] >= 0
# rank 0's GPU waits for its host 53-61 ms a step (the data's README): the
# host wait is a number, per step and in total, not null
assert ranks[0]["total"]["host_wait_ms"] > 150, ranks[0]["total"]
assert [x["step"] for x in s["analyze"]["steps"]] == [2, 3, 4]
assert s["summary"]["steps"] == 3, s["summary"]["steps"]
run = json.load(open(f"{d}/run.json"))
assert run["command"] == "analyze" and run["world_size"] == 2, run
assert run["devices"][0]["name"] == "NVIDIA H200", run["devices"]
for rank in (0, 1):
    recs = [json.loads(l) for l in open(f"{d}/rank_0{rank}_metrics.jsonl")]
    assert [x["step"] for x in recs] == [2, 3, 4]
    for x in recs:
        assert x["rank"] == rank and x["phase"] == "train"
        e = x["extra"]
        assert x["host_wait_ms"] is not None, "host wait per step"
        assert abs(x["host_wait_ms"] + e["idle_other_ms"] - x["idle_ms"]) < 1e-9
        if rank == 0:
            assert x["host_wait_ms"] > 40, x["host_wait_ms"]
        assert e["slowest_rank"] in (0, 1) and e["slowest_step_ms"] >= e["fastest_step_ms"]
        assert sum(e["exposed_by_kind_ms"].values()) >= x["exposed_comm_ms"] - 1e-9
        assert x["ops"], "per-op intervals"
PY
