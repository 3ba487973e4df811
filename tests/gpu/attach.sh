#!/usr/bin/env bash
# aorta attach on a CUDA program with a known overlap (tests/helpers/attach_probe.cu):
# every step's compute, comm, copy, overlap and exposed comm from attach equal
# what the program measured with its own events; steps come from its NVTX
# ranges. Then the same program as a second CUPTI client for two steps: it
# sees every kernel it launched, and attach lists exactly those two steps as
# unseen and measures the others. Then rank ownership: the program as two
# ranks under its own launcher, whose process initializes CUDA (and, second
# run, runs a kernel itself before the ranks): both ranks have their steps in
# rank_00 and rank_01, the launcher never takes rank 0. Skips (77) without a
# GPU (one GPU is enough: the ranks share it).
set -u
aorta=${AORTA:?set by ctest}
probe=${AORTA_ATTACH_PROBE:?set by ctest}
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/../e2e/lib/tally.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
"$probe" --steps 0 >/dev/null 2>&1
[ $? = 77 ] && { echo "SKIP: no CUDA device"; exit 77; }

check() { # run-dir probe-output unseen-steps [rank]
    python3 - "$1" "$2" "$3" "${4:-0}" <<'PY'
import json, sys
run, out, unseen, rank = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
want = {}
for line in open(out):
    d = json.loads(line)
    if "step" in d and d["rank"] == rank:
        want[d["step"]] = d
got = {}
for line in open(run + "/rank_%02d_metrics.jsonl" % rank):
    r = json.loads(line)
    assert r["rank"] == rank, r
    got[r["step"]] = r
info = json.load(open(run + "/rank_%02d_attach.json" % rank))
assert info["step_source"] == "nvtx", info
assert info["unseen_steps"] == unseen, (info["unseen_steps"], unseen)
assert sorted(got) == sorted(set(want) - set(unseen)), (sorted(got), sorted(want), unseen)
bad = []
for s, r in got.items():
    w = want[s]
    assert r["extra"]["step_source"] == "nvtx" and r["extra"]["step_name"] == "step", r
    for k in ("step_ms", "compute_ms", "comm_ms", "copy_ms", "overlap_ms", "exposed_comm_ms"):
        tol = 0.05 + 0.02 * w[k]
        if abs(r[k] - w[k]) > tol:
            bad.append((s, k, r[k], w[k]))
    ratio = w["overlap_ms"] / w["comm_ms"]
    if abs(r["overlap_ratio"] - ratio) > 0.02:
        bad.append((s, "overlap_ratio", r["overlap_ratio"], ratio))
assert not bad, bad
run_json = json.load(open(run + "/run.json"))
assert run_json["config"]["attach.step_source"]["value"] == "nvtx", run_json["config"]
assert json.load(open(run + "/summary.json"))["summary"], "summary"
print("rank", rank, ": attach matches the program's events on", len(got), "steps")
PY
}

"$aorta" attach --output "$tmp" --run-name plain --comm fake_comm -- "$probe" --steps 6 \
    >"$tmp/plain.out" 2>"$tmp/plain.err"
rc=$?
[ $rc = 0 ] || { fail "attach exited $rc"; cat "$tmp/plain.err"; }
check "$tmp/plain" "$tmp/plain.out" '[]' || { fail "plain run"; cat "$tmp/plain.err"; }

# a second CUPTI client in steps 2 and 3
"$aorta" attach --output "$tmp" --run-name own --comm fake_comm -- "$probe" --steps 6 \
    --own-cupti 2 >"$tmp/own.out" 2>"$tmp/own.err"
rc=$?
[ $rc = 0 ] || { fail "attach (second client) exited $rc"; cat "$tmp/own.err"; }
python3 - "$tmp/own.out" <<'PY' || fail "the second client lost kernels"
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if "own_cupti" in l][0]
assert d["own_cupti_kernels"] == d["own_cupti_launched"] > 0, d
PY
grep -q "another CUPTI client" "$tmp/own.err" || fail "no warning about the second client"
check "$tmp/own" "$tmp/own.out" '[2, 3]' || { fail "second-client run"; cat "$tmp/own.err"; }

# rank ownership: two ranks under a launcher that initializes CUDA itself
# (init), or runs a kernel itself before starting them (work)
for mode in init work; do
    extra=()
    [ $mode = work ] && extra=(--parent-work)
    "$aorta" attach --output "$tmp" --run-name "spawn-$mode" --comm fake_comm -- "$probe" \
        --spawn 2 --steps 4 "${extra[@]}" >"$tmp/spawn-$mode.out" 2>"$tmp/spawn-$mode.err"
    rc=$?
    [ $rc = 0 ] || { fail "spawn $mode: attach exited $rc"; cat "$tmp/spawn-$mode.err"; }
    for r in 0 1; do
        check "$tmp/spawn-$mode" "$tmp/spawn-$mode.out" '[]' $r ||
            { fail "spawn $mode: rank $r"; cat "$tmp/spawn-$mode.err"; }
    done
    python3 - "$tmp/spawn-$mode" "$tmp/spawn-$mode.out" $mode <<'PY' || fail "spawn $mode: run.json"
import json, sys
run, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
said = [json.loads(l) for l in open(out) if '"role"' in l]
launcher = [d["pid"] for d in said if d["role"] == "launcher"][0]
ranks = {d["rank"]: d for d in said if d["role"] == "rank"}
listed = json.load(open(run + "/run.json"))["config"]["attach.processes"]["value"]
by_files = {e["files"]: e for e in listed}
for r in (0, 1):
    e = by_files["rank_%02d" % r]
    assert e["pid"] == ranks[r]["pid"] and e["rank"] == r and e["steps"] == 4, e
    assert e["device"] == ranks[r]["device"], (e, ranks[r])
    assert e["launcher"] == "torchrun" and e["note"] is None, e
if mode == "init":  # no GPU work in the launcher: no files of its own
    assert len(listed) == 2, listed
else:  # its kernel: its own pid-named files, rank unknown
    e = by_files["pid_%d" % launcher]
    assert len(listed) == 3 and e["rank"] is None and e["note"], listed
print("spawn", mode, ": ranks 0 and 1 have their steps;", len(listed), "processes listed")
PY
done

# the exit status of a CUDA program passes through too
"$aorta" attach --output "$tmp" --run-name st -- sh -c "\"$probe\" --steps 1 >/dev/null; exit 5"
rc=$?
[ $rc = 5 ] || fail "exit status 5 came back as $rc"
finish attach
