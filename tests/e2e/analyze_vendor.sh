#!/usr/bin/env bash
# aorta analyze on the rocprofv3 (CSV and rocpd) and Nsight Systems test
# traces. These are HAND-WRITTEN to the vendors' documented schemas
# (tests/data/rocprof/, rocpd.sql, nsys.sql): no lent machine runs either
# profiler. Each is found by --format auto, its steps come from roctx / NVTX
# ranges, and the per-step numbers equal the ones worked out by hand from the
# files; bad input exits 2 with one error line naming the file and the line or
# table, and leaves no run directory.
set -euo pipefail

: "${AORTA:?AORTA must name the aorta binary}"
SRC="${AORTA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=tests/e2e/lib/assert.sh
. "$(dirname "$0")/lib/assert.sh"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
DATA="$SRC/tests/data"

# db SCRIPT OUT [EXTRA_SQL]: a database from a test script (the SQLite library
# through Python's sqlite3 module; the aorta binary only reads databases).
db() {
    python3 - "$@" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[2])
con.executescript(open(sys.argv[1]).read())
if len(sys.argv) > 3:
    con.executescript(sys.argv[3])
con.commit()
PY
}
db "$DATA/rocpd.sql" "$TMP/rank_0_results.db"
db "$DATA/nsys.sql" "$TMP/job_rank_0.sqlite"

# check RUN FORMAT DEVICE 'STEP compute comm copy overlap' ...: run.json's format
# and device, and each step record's milliseconds.
check() {
    local run=$TMP/out/$1 format=$2 device=$3
    shift 3
    contains "$run/run.json" "\"source_format\": \"$format\""
    contains "$run/run.json" "\"name\": \"$device\""
    python3 - "$run/rank_00_metrics.jsonl" "$@" <<'PY'
import json, sys
recs = {r["step"]: r for r in map(json.loads, open(sys.argv[1]))}
want = [s.split() for s in sys.argv[2:]]
assert sorted(recs) == sorted(int(w[0]) for w in want), (sorted(recs), want)
for step, *ms in want:
    r = recs[int(step)]
    got = [r["compute_ms"], r["comm_ms"], r["copy_ms"], r["overlap_ms"]]
    assert all(abs(g - float(m)) < 1e-9 for g, m in zip(got, ms)), (step, got, ms)
PY
}

run_expect 0 "$TMP/csv.log" analyze "$DATA/rocprof/rank_1" --output "$TMP/out" --run-name csv \
    --step '^step ([0-9]+)'
# step 1: the GEMM 50 us, the RCCL kernel 70.5 us, 20-50 us of them together, the HtoD copy 5.5 us
check csv rocprof-csv "AMD Instinct MI300X" "1 0.05 0.0705 0.0055 0.03" "2 0.04025 0 0.001 0"

run_expect 0 "$TMP/rocpd.log" analyze "$TMP/rank_0_results.db" --output "$TMP/out" \
    --run-name rocpd --step '^step ([0-9]+)'
# step 2 launched nothing: one record
check rocpd rocpd "AMD Instinct MI300X" "1 0.05 0.0605 0.0025 0.04"

run_expect 0 "$TMP/nsys.log" analyze "$TMP/job_rank_0.sqlite" --output "$TMP/out" --run-name nsys
# ProfilerStep#7 (a registered NVTX string): the memcpy 4 us and the memset 1 us are copies
check nsys nsys "NVIDIA H200" "7 0.04 0.06525 0.005 0.03"

mkdir "$TMP/trunc"
cp "$DATA/rocprof/rank_1/"4242_* "$TMP/trunc/"
head -n 3 "$DATA/rocprof/rank_1/4242_kernel_trace.csv" >"$TMP/trunc/4242_kernel_trace.csv"
printf '"KERNEL_DISPATCH",2,1,0,4243,3,18' >>"$TMP/trunc/4242_kernel_trace.csv"
analyze_fails csv_truncated "4242_kernel_trace.csv: line 4: 7 fields where the header has 22" \
    "$TMP/trunc/4242_kernel_trace.csv"
db "$DATA/nsys.sql" "$TMP/no_kernels.sqlite" "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;"
analyze_fails nsys_no_kernel_table "no_kernels.sqlite: no CUPTI_ACTIVITY_KIND_KERNEL table" \
    --format nsys "$TMP/no_kernels.sqlite"
db "$DATA/rocpd.sql" "$TMP/bad_type.db" \
    "UPDATE rocpd_kernel_dispatch_0001 SET end = 'later' WHERE id = 1;"
analyze_fails rocpd_wrong_type "bad_type.db: table rocpd_kernel_dispatch, row 1: column end is text" \
    "$TMP/bad_type.db"
printf 'not a database\n' >"$TMP/fake.sqlite"
analyze_fails nsys_not_a_database "fake.sqlite: not an SQLite database" --format nsys "$TMP/fake.sqlite"
echo "analyze_vendor: ok"
