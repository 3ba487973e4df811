#!/usr/bin/env bash
# bench/ncu_table.py on a details page written here in Nsight Compute's CSV
# form: its own "==PROF==" lines skipped, durations in us / ms / ns made µs,
# each metric averaged over the instances that report it, ncu's "<unnamed>::"
# dropped and template arguments with parentheses kept while the parameter
# list goes, kernels ordered by total time; a missing file is reported (exit
# 0: it reports, the caller judges).
set -u
src=${AORTA_SOURCE_DIR:?set by ctest}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
table="$src/bench/ncu_table.py"

head='"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
row() { # ID KERNEL METRIC UNIT VALUE
    printf '"%s","1","aorta","h","%s","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0","S","%s","%s","%s"\n' "$@"
}
big='void <unnamed>::dropout_kernel<1, <unnamed>::gelu_dropout_map<(ao_dtype)2>>(T2, unsigned long)'
small='void <unnamed>::cast_parts_kernel(void *, ao_dtype)'
{
    echo "==PROF== Connected to process 1"
    echo "$head"
    row 0 "$big" Duration us 200
    row 0 "$big" "DRAM Throughput" % 40
    row 0 "$big" "Registers Per Thread" register/thread 62
    row 1 "$small" Duration ns 6000
    row 2 "$big" Duration ms 0.3
    row 2 "$big" "DRAM Throughput" % "1,000" # thousands separator
    echo "==PROF== Disconnected from process 1"
} >"$tmp/details.csv"

python3 "$table" "$tmp/details.csv" >"$tmp/out" 2>&1 || fail "ncu_table.py exited $?"
python3 - "$tmp/out" <<'PY' || { fail "table"; cat "$tmp/out"; }
import sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0].split()[:3] == ["total", "us", "calls"], lines[0]
rows = [l.split() for l in lines[1:]]
assert len(rows) == 2, rows
big, small = rows
# the dropout kernel: 2 calls of 200 and 300 us; DRAM averaged over both
assert big[-1] == "gelu_dropout_map<(ao_dtype)2>>", big
assert big[-2] == "dropout_kernel<1,", big  # "<unnamed>::" dropped
assert big[:3] == ["500.0", "2", "250.0"], big
assert big[3] == "520.0", big  # (40 + 1000) / 2
assert big[7] == "62", big  # registers: the one instance that reports them
assert small[:3] == ["6.0", "1", "6.0"], small
assert small[-1] == "cast_parts_kernel", small
print("ok")
PY

python3 "$table" "$tmp/none.csv" >"$tmp/missing" 2>&1 || fail "a missing file made it exit $?"
grep -q "No such file" "$tmp/missing" || { fail "a missing file is not reported"; cat "$tmp/missing"; }

finish ncu_table
