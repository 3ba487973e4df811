#!/usr/bin/env bash
# Who waited for whom, against a known answer (issue 45): two MPI ranks on the
# cpu backend, rank 1's host made late by the test-only hook
# (AORTA_TEST_LATE_HOST=1:MS: its compute stream drained, then MS ms of sleep
# before each train step). The step's first all-gather must have rank 1 as
# its late rank and an arrival skew within 10 % of MS; the late window is
# host wait; summary and diagnose name rank 1 as the rank the others wait
# for, held by its host, with the planted hook as the first knob. The only
# time checked is that skew, relative to the planted value.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
# shellcheck source=tests/e2e/lib/mpi.sh
. "$(dirname "$0")/lib/mpi.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
export OPENBLAS_NUM_THREADS=1
ms=300
out="$tmp/out"
AORTA_TEST_LATE_HOST=1:$ms "$aorta" train --backend cpu --nproc 2 --config "$src/config/tiny.yaml" \
    --run-name late --override training.output_dir="$out" training.max_steps=6 \
    training.summary_skip_steps=1 dataset.placement=device profiling.enabled=true \
    profiling.wait=0 profiling.warmup=0 profiling.active=6 profiling.repeat=0 \
    >"$tmp/train.out" 2>&1 || { fail "train exited $?"; tail -30 "$tmp/train.out"; }
run="$out/late"
[ -f "$run/collectives.jsonl" ] || fail "no collectives.jsonl"

python3 - "$run" "$ms" >"$tmp/coll.check" 2>&1 <<'PY' || { fail "collectives"; cat "$tmp/coll.check"; }
import json, sys
run, ms = sys.argv[1], float(sys.argv[2])
lines = [json.loads(l) for l in open(f"{run}/collectives.jsonl")]
assert lines, "no collective"
steps = sorted({x["step"] for x in lines})
assert steps == [1, 2, 3, 4, 5], steps
for x in lines:
    # every collective: both ranks, skew, late rank, transfer, bytes, busbw, phase
    assert x["ranks"] == [0, 1] and x["consistent"] and x["complete"], x
    assert x["late_rank"] in (0, 1) and x["skew_us"] >= 0 and x["transfer_us"] >= 0, x
    assert x["bytes"] and x["busbw_gbps"] is not None, x
    assert x["phase"] in ("forward", "backward", "optimizer"), x
    assert x["kind"] != "allgather" or x["unit"].startswith("unit "), x
for s in steps:
    first = [x for x in lines if x["step"] == s and x["kind"] == "allgather" and x["seq"] == 0][0]
    assert first["late_rank"] == 1, first
    skew_ms = first["skew_us"] / 1e3
    assert abs(skew_ms - ms) <= 0.1 * ms, ("skew", s, skew_ms, "planted", ms)
    assert first["phase"] == "forward", first
    if s > 1:  # step 1's window reaches into step 0, a warm-up step the records leave out
        assert first["late_cause"] == "host_wait", first
        w = first["late_window_us"]
        assert w["host_wait"] >= 0.9 * sum(w.values()), w
s = json.load(open(f"{run}/summary.json"))["summary"]
assert s["rank_skew"]["slowest_rank"] == 1, s["rank_skew"]
assert s["rank_skew"]["slowest_rank_by"] == "waited_for", s["rank_skew"]
c = s["collectives"]
assert c["waited_for_rank"] == 1 and c["instances"] == len(lines), c
late = [st for st in c["steps"] if st["step"] > 1]
assert all(st["late_rank"] == 1 and st["late_cause"] == "host_wait" for st in late), late
PY

"$aorta" diagnose --json "$run" >"$tmp/diag.json" 2>"$tmp/diag.err" || { fail "diagnose exited $?"; cat "$tmp/diag.err"; }
python3 - "$tmp/diag.json" >"$tmp/diag.check" 2>&1 <<'PY' || { fail "diagnosis"; cat "$tmp/diag.check"; }
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
f = run["findings"][0]
assert f["id"] == "late_rank" and f["rank"] == 1 and f["cause"] == "host_wait", f
assert "AORTA_TEST_LATE_HOST" in f["knobs"].split("; ")[0], f["knobs"]
assert run["bound"] == "host-bound", run["bound"]
assert run["critical_rank"] == 1, run["critical_rank"]
# no GPU advice for a cpu run
text = json.dumps(run)
for gpu in ("CUDA_DEVICE_MAX_CONNECTIONS", "nccl", "sm_count_target", "CUDA graphs"):
    assert gpu not in text, gpu
PY
"$aorta" diagnose "$run" >"$tmp/diag.txt" 2>&1 || fail "diagnose (text) exited $?"
grep -q 'rank 1 is late at collectives' "$tmp/diag.txt" || { fail "text names no late rank"; cat "$tmp/diag.txt"; }
finish late_host_cpu
