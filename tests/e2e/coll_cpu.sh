#!/usr/bin/env bash
# aorta coll on the cpu backend (2 ranks through mpirun): every element of
# every collective checked (#wrong = 0), busbw = algbw x the nccl-tests factor,
# the JSON/CSV files, and bad flags exiting 2.
set -u
aorta=${AORTA:?set by ctest}
# shellcheck source=tests/e2e/lib/mpi.sh
. "$(dirname "$0")/lib/mpi.sh"
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"

# --- the CI run --------------------------------------------------------------
"$aorta" coll --backend cpu --nproc 2 -b 1K -e 1M -f 4 -c 1 \
    --coll all_reduce,all_gather,reduce_scatter,broadcast \
    --json "$tmp/coll.json" --csv "$tmp/coll.csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || { fail "coll exited $rc"; cat "$tmp/out" "$tmp/err"; }
for c in allreduce allgather reducescatter broadcast; do
    grep -q "^\[rank 0\] # $c\$" "$tmp/out" || fail "no table for $c"
done
[ "$(grep -c 'Out of bounds values : 0 OK' "$tmp/out")" = 4 ] || fail "not 4 clean checks"
grep -q 'Avg bus bandwidth' "$tmp/out" || fail "no average bus bandwidth"
grep -q '^\[rank 1\]' "$tmp/out" && fail "rank 1 printed to stdout"

# The text table (after "[rank 0]"): 6 sizes x 4 collectives; #wrong is 0, and
# busbw = algbw x factor within the 2-decimal rounding (factors for 2 ranks).
awk '
    /^\[rank 0\] # [a-z]+$/ { coll = $4; next }
    /^\[rank 0\] +[0-9]/ {
        rows++
        f = (coll == "allreduce" || coll == "broadcast") ? 1 : 0.5
        for (g = 0; g < 2; g++) {
            algbw = $(9 + 4 * g); busbw = $(10 + 4 * g); wrong = $(11 + 4 * g)
            if (wrong != "0") { print "wrong elements: " $0; bad++ }
            d = busbw - algbw * f; if (d < 0) d = -d
            if (d > 0.011) { print "busbw != algbw x " f ": " $0; bad++ }
        }
    }
    END { if (rows != 24) { print "rows: " rows " (want 24)"; bad++ } exit bad > 0 }
' "$tmp/out" || fail "text table"

if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/coll.json" "$tmp/coll.csv" <<'PY' || fail "JSON/CSV content"
import csv, json, sys
rows = json.load(open(sys.argv[1]))
factor = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
          "reducescatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0}
assert len(rows) == 24, len(rows)
for r in rows:
    n = r["nranks"]
    assert n == 2, r
    for g in ("oop", "ip"):
        assert r[g + "_wrong"] == 0, r
        assert r[g + "_time_us"] > 0, r
        algbw = r["size"] / (r[g + "_time_us"] * 1e-6) / 1e9
        assert abs(r[g + "_algbw_gbps"] - algbw) <= 1e-9 * algbw, r
        want = r[g + "_algbw_gbps"] * factor[r["coll"]](n)
        assert abs(r[g + "_busbw_gbps"] - want) <= 1e-9 * want, r
    per_rank = {"allgather": n, "reducescatter": n}.get(r["coll"], 1)
    assert r["size"] == r["count"] * 4 * per_rank, r
assert [r["size"] for r in rows[:6]] == [1024 << (2 * i) for i in range(6)]
assert len(list(csv.DictReader(open(sys.argv[2])))) == 24
PY
else
    grep -q '"oop_wrong": 0' "$tmp/coll.json" || fail "JSON lacks wrong counts"
fi

# --- other collectives, ops, --per-iter and -a ---------------------------------
"$aorta" coll --backend cpu --nproc 2 -b 64 -e 4K -i 2K -n 3 -w 1 -c 1 --op max -a max \
    --per-iter --coll reduce,alltoall,sendrecv --root 1 >"$tmp/out2" 2>"$tmp/err2" ||
    { fail "per-iter run exited $?"; cat "$tmp/out2" "$tmp/err2"; }
[ "$(grep -c 'Out of bounds values : 0 OK' "$tmp/out2")" = 3 ] || fail "per-iter checks"
grep -q ' p50 ' "$tmp/out2" || fail "no p50 column with --per-iter"
grep -Eq '^\[rank 0\] +2112 +528 +float +max +1 ' "$tmp/out2" || fail "reduce row (size 2112, root 1)"

# --- under a GEMM loop: the compute columns are there and sane -----------------
"$aorta" coll --backend cpu --nproc 2 -b 4K -e 16K -f 4 -n 2 -w 1 -c 0 --with-compute 64,64,64 \
    --json "$tmp/comp.json" >"$tmp/out3" 2>"$tmp/err3" ||
    { fail "--with-compute run exited $?"; cat "$tmp/out3" "$tmp/err3"; }
grep -q 'under compute' "$tmp/out3" || fail "no compute column group"
grep -q 'GEMM 64x64x64 float' "$tmp/out3" || fail "no GEMM header line"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/comp.json" <<'PY' || fail "compute JSON"
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 2, rows
for r in rows:
    assert r["gemm_tflops_alone"] > 0 and r["comp_time_us"] > 0, r
    assert abs(r["comp_busbw_gbps"] - r["size"] / r["comp_time_us"] / 1e3) < 1e-9, r
    g = r["gemm_tflops_comp"]
    assert g is None or abs(r["gemm_slowdown"] - r["gemm_tflops_alone"] / g) < 1e-9, r
    assert r["oop_wrong"] is None, r  # -c 0: not checked
PY
fi

# --- usage errors: one error line, the usage, exit 2 ------------------------------
bad() {
    "$aorta" coll --backend cpu "$@" >"$tmp/bo" 2>"$tmp/be"
    local rc=$?
    [ $rc = 2 ] || fail "coll $* exited $rc, want 2"
    grep -q '^aorta: error: ' "$tmp/be" || fail "coll $*: no error line"
    grep -q '^usage: aorta coll' "$tmp/be" || fail "coll $*: no usage line"
}
bad --bogus
bad -b 1Q
bad -b 2K -e 1K
bad -f 1
bad -f 2 -i 1K
bad --coll all_reduce,gather
bad -c 2
bad -n 0
bad -a median
bad --op mean2
bad --dtype float7
bad --with-compute 1,2
bad --backend tpu
bad -b

"$aorta" coll --help >"$tmp/help" || fail "--help exited $?"
for f in --coll -b -e -f -i -n -w --dtype --op -c -a --root --per-iter --json --csv --min-ctas \
    --max-ctas --rdzv-file --nproc --backend --with-compute --help; do
    grep -q -- "$f" "$tmp/help" || fail "--help does not document $f"
done

finish coll_cpu
