#!/usr/bin/env bash
# Who waited for whom on real PyTorch FSDP2 traces with planted faults
# (tests/data/fsdp2_h100x4, its README) and on the shared pair (rank 0's host
# late): collectives.jsonl matches every collective across the ranks, and
# diagnose names the late rank, its cause and the ranks waiting for it.
#   late2  rank 1's host sleeps 40 ms a step: rank 1 late, host wait; rank 0
#          waits in all-gather and reduce-scatter
#   late4  rank 2's host sleeps: rank 2 late, host wait; ranks 0, 1, 3 wait
#   slow2  rank 0 runs 40 extra GEMMs before each forward: rank 0 late at the
#          step's first all-gather, by its own compute (the recorded job's rank
#          1 launches ~30 % slower than rank 0 in every case, healthy2 too, so
#          rank 1's host is what the others wait for most over the step)
#   pair   rank 0 late, host-bound; rank 1 waits in all-gather and reduce-scatter
# Then: the second pass reading traces again (--keep-mb 0) writes the same
# files; malformed collectives.jsonl and --coll-ref files are one-line errors.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
data="$src/tests/data/fsdp2_h100x4"
out="$tmp/runs"

analyze() { # name dir [flags]
    local name=$1 dir=$2
    shift 2
    "$aorta" analyze "$dir" --output "$out" --run-name "$name" "$@" >"$tmp/$name.log" 2>&1 ||
        { fail "$name: analyze exited $?"; tail -5 "$tmp/$name.log"; return 1; }
    "$aorta" diagnose --json "$out/$name" >"$tmp/$name.json" 2>"$tmp/$name.err" ||
        { fail "$name: diagnose exited $?"; cat "$tmp/$name.err"; return 1; }
}

# check NAME LATE CAUSE BOUND WAITERS [STEP_FIRST_LATE STEP_FIRST_CAUSE]
check() {
    python3 - "$out/$1" "$tmp/$1.json" "${@:2}" >"$tmp/$1.check" 2>&1 <<'PY' || { fail "$1"; cat "$tmp/$1.check"; }
import json, sys
run, diag, late, cause, bound, waiters = sys.argv[1:7]
late, waiters = int(late), [int(w) for w in waiters.split(",")]
lines = [json.loads(l) for l in open(f"{run}/collectives.jsonl")]
assert len(lines) == 81, len(lines)  # 3 steps of 17 gathers, 9 reduce-scatters, 1 all-reduce
for x in lines:
    assert x["consistent"] and x["complete"] and x["aligned"], x
    assert x["late_rank"] is not None and x["skew_us"] >= 0 and x["transfer_us"] > 0, x
    assert x["bytes"] and x["busbw_gbps"] > 0 and x["dtype"] and x["group"] == "0", x
    assert x["late_cause"] is not None, x
    # FSDP2's own ranges name the pass and the unit of its collectives
    if x["kind"] in ("allgather", "reducescatter"):
        assert x["phase"] in ("forward", "backward") and x["unit"] != "unknown", x
    if x["kind"] == "reducescatter":
        assert x["phase"] == "backward", x
by_kind = {}
for x in lines:
    by_kind[x["kind"]] = by_kind.get(x["kind"], 0) + 1
assert by_kind == {"allgather": 51, "reducescatter": 27, "allreduce": 3}, by_kind
s = json.load(open(f"{run}/summary.json"))["summary"]
assert s["rank_skew"]["slowest_rank"] == late, s["rank_skew"]
d = json.load(open(diag))["runs"][0]
assert d["critical_rank"] == late and d["bound"] == bound, (d["critical_rank"], d["bound"])
f = d["findings"][0]
assert f["id"] == "late_rank" and f["rank"] == late and f["cause"] == cause, f
for w in waiters:
    assert f"rank {w} " in f["evidence"], (w, f["evidence"])
ev = f["evidence"].split("the others wait for it:")[1]
assert "all-gather" in ev and "reduce-scatter" in ev, ev
text = json.dumps(d)
for bad in ("unit -1", "forward unit 0", " 0 KiB", "seed 0", "sessions"):
    assert bad not in text, bad
if len(sys.argv) > 7:  # the step's first all-gather of every step
    first_late, first_cause = int(sys.argv[7]), sys.argv[8]
    for x in lines:
        if x["kind"] == "allgather" and x["seq"] == 0:
            assert x["late_rank"] == first_late and x["late_cause"] == first_cause, x
            assert x["phase"] == "forward" and x["unit"] == "root", x
    assert f"rank {first_late} " in f["evidence"] and "(compute)" in f["evidence"], f["evidence"]
PY
}

analyze late2 "$data/late2" --step '^step$' && check late2 1 host_wait host-bound 0
analyze late4 "$data/late4" --step '^step$' && check late4 2 host_wait host-bound 0,1,3
analyze slow2 "$data/slow2" --step '^step$' && check slow2 1 host_wait host-bound 0 0 compute
analyze pair "$src/tests/data/fsdp2_default_h200x2" && check pair 0 host_wait host-bound 1
if [ -d "$src/../shared/traces/fsdp2_default_h200x2" ]; then
    analyze shared "$src/../shared/traces/fsdp2_default_h200x2" && check shared 0 host_wait host-bound 1
else
    echo "note: ../shared/traces/fsdp2_default_h200x2 absent: the shared copy is not checked"
fi

# the second pass reads every trace again: the same files
analyze late4-reread "$data/late4" --step '^step$' --keep-mb 0 --threads 2
for f in collectives.jsonl rank_00_metrics.jsonl rank_03_metrics.jsonl; do
    cmp -s "$out/late4/$f" "$out/late4-reread/$f" || fail "--keep-mb 0 wrote another $f"
done

# malformed collectives.jsonl: one error line naming the file, line and key
cp -r "$out/late2" "$tmp/bad"
sed -i '3s/"late_rank":[0-9]*/"late_rank":"x"/' "$tmp/bad/collectives.jsonl"
"$aorta" diagnose "$tmp/bad" >"$tmp/bad.out" 2>&1
rc=$?
[ $rc = 2 ] || fail "malformed collectives.jsonl exited $rc, not 2"
[ "$(grep -c '^aorta: error: ' "$tmp/bad.out")" = 1 ] || { fail "not one error line"; cat "$tmp/bad.out"; }
grep -q 'collectives.jsonl: line 3: "late_rank"' "$tmp/bad.out" || { fail "error names no line and key"; cat "$tmp/bad.out"; }
printf '{"schema":1,"step":0}\n{' >"$tmp/bad/collectives.jsonl"
"$aorta" diagnose "$tmp/bad" >"$tmp/bad2.out" 2>&1
[ $? = 2 ] || fail "truncated collectives.jsonl did not exit 2"

# --coll-ref: transfers judged against `aorta coll --json` rows at their size
python3 - "$tmp/ref.json" <<'PY'
import json, sys
rows = [{"coll": c, "nranks": 2, "size": s, "count": s // 2, "type": "bfloat16", "redop": "none",
         "root": -1, "oop_time_us": 1, "oop_algbw_gbps": 2000.0, "oop_busbw_gbps": 1000.0,
         "oop_wrong": 0, "ip_time_us": 1, "ip_algbw_gbps": 2000.0, "ip_busbw_gbps": 1000.0,
         "ip_wrong": 0}
        for c in ("allgather", "reducescatter", "allreduce") for s in (1 << 10, 1 << 30)]
json.dump(rows, open(sys.argv[1], "w"))
PY
"$aorta" diagnose --json --coll-ref "$tmp/ref.json" "$out/late2" >"$tmp/ref.out" 2>&1 || fail "--coll-ref exited $?"
grep -q '"slow_transfer"' "$tmp/ref.out" || { fail "no slow_transfer against a 1000 GB/s reference"; head -c 600 "$tmp/ref.out"; }
echo '[{"coll": "allgather", "nranks": 2}]' >"$tmp/badref.json"
"$aorta" diagnose --coll-ref "$tmp/badref.json" "$out/late2" >"$tmp/badref.out" 2>&1
[ $? = 2 ] || fail "a malformed --coll-ref did not exit 2"
grep -q 'badref.json: row 0: "size"' "$tmp/badref.out" || { fail "--coll-ref error"; cat "$tmp/badref.out"; }
finish xrank_traces
