#!/usr/bin/env bash
# aorta attach's rocprofiler-sdk tool (libaorta_attach_rocm.so), built where
# the SDK's headers are, under a stand-in for the SDK (helpers/fake_rocprof.c:
# the SDK's functions, a job of roctx steps on a virtual clock): attach puts
# the tool in ROCP_TOOL_LIBRARIES (first, keeping a tool already there), the
# tool writes one JSONL line per step with the §7 numbers of the known
# overlap, the rank file and summary.json. Skipped (77) without the headers.
set -u
aorta=${AORTA:?set by ctest}
if [ -z "${AORTA_ATTACH_ROCM:-}" ] || [ -z "${AORTA_FAKE_ROCPROF:-}" ]; then
    echo "no rocprofiler-sdk headers in this build (AORTA_ROCPROF_SDK_INCLUDE): skipped"
    exit 77
fi
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"

# the tool exports the SDK's entry point and nothing else
syms=$(nm -D --defined-only "$AORTA_ATTACH_ROCM" | awk '$2 ~ /^[TDBR]$/ {print $3}' | grep -v '^_')
[ "$syms" = rocprofiler_configure ] || fail "the tool exports: $syms"
# it links against nothing of ROCm's (it calls the process's SDK)
ldd "$AORTA_ATTACH_ROCM" | grep -qi 'rocprofiler\|hsa\|amdhip' && fail "the tool links ROCm"

# not started by aorta attach: the tool declines and the job runs
ROCP_TOOL_LIBRARIES=$AORTA_ATTACH_ROCM "$AORTA_FAKE_ROCPROF" 2 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || fail "the job without attach exited $rc"
grep -q "the tool declined" "$tmp/err" || fail "the tool did not decline outside attach"

"$aorta" attach --output "$tmp/a" --run-name r -- "$AORTA_FAKE_ROCPROF" 4 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || fail "attach -- fake_rocprof exited $rc: $(cat "$tmp/err")"
grep -q "did not start\|no dispatches" "$tmp/err" && fail "the tool: $(cat "$tmp/err")"
grep -q "ROCP_TOOL_LIBRARIES=$AORTA_ATTACH_ROCM\$" "$tmp/err" || fail "ROCP_TOOL_LIBRARIES: $(cat "$tmp/err")"
d=$tmp/a/r
[ -f "$d/rank_00_metrics.jsonl" ] || fail "no rank_00_metrics.jsonl: $(cat "$tmp/err")"
[ "$(wc -l <"$d/rank_00_metrics.jsonl")" = 4 ] || fail "not 4 steps: $(cat "$d/rank_00_metrics.jsonl")"
python3 - "$d" <<'PY' || fail "metrics"
import json, sys
d = sys.argv[1]
lines = [json.loads(l) for l in open(d + "/rank_00_metrics.jsonl")]
for i, r in enumerate(lines):
    assert r["step"] == i, r
    for k, v in {"comm_ms": 8, "compute_ms": 10, "overlap_ms": 4, "exposed_comm_ms": 4,
                 "copy_ms": 2, "step_ms": 14}.items():
        assert abs(r[k] - v) < 1e-6, (k, r[k])
    assert r["extra"]["step_source"] == "nvtx" and r["extra"]["step_name"] == "step", r["extra"]
    assert r["extra"]["activities"] == 3, r["extra"]
info = json.load(open(d + "/rank_00_attach.json"))
assert info["steps"] == 4 and info["step_source"] == "nvtx", info
assert info["versions"]["rocprofiler_sdk"], info["versions"]
assert info["devices"] == [{"index": 0, "name": "a fake MI300X (gfx942)"}], info["devices"]
assert info["other_rocprofiler_tools"] is None, info
assert info["dropped_records"] == 0, info
run = json.load(open(d + "/run.json"))
assert run["config"], "run.json"
assert json.load(open(d + "/summary.json")), "summary"
PY

# a tool already listed stays, after attach's (and the list ends with ':')
ROCP_TOOL_LIBRARIES=/nonexistent/other.so "$aorta" attach --output "$tmp/a" --run-name r2 -- \
    "$AORTA_FAKE_ROCPROF" 1 >"$tmp/out" 2>"$tmp/err"
grep -q "ROCP_TOOL_LIBRARIES=$AORTA_ATTACH_ROCM:/nonexistent/other.so:\$" "$tmp/err" ||
    fail "a listed tool: $(grep ROCP_TOOL "$tmp/err")"
finish attach_rocm
