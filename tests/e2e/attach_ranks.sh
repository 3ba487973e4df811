#!/usr/bin/env bash
# aorta attach's rank ownership under each launcher, without a GPU: a job of
# attach's tracer core over a stand-in backend (helpers/attach_fake_job.c),
# whose root is a launcher that starts ranks with torchrun's, aorta's,
# OpenMPI's or Slurm's variables (and real mpirun where there is one). A
# process writes files only once it does GPU work; its rank is the
# launcher's; the launcher's own GPU work never takes rank 0; unknown and
# duplicate ranks get pid-named files and a note; run.json lists every
# process that did GPU work with its pid, rank and steps. Skipped (77) in a
# build without an attach library.
set -u
aorta=${AORTA:?set by ctest}
job=${AORTA_ATTACH_FAKE_JOB:?set by ctest}
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
# without an attach library (no CUDA, no rocprofiler-sdk headers) attach runs
# every job untraced; the claims are still unit-tested (test_attach_claim)
if "$aorta" attach --output "$tmp/lib" -- true 2>&1 | grep -q "running the command untraced"; then
    echo "SKIP: this build has no attach library"
    exit 77
fi

run() { # NAME JOB-ARGS...: attach the job; its stdout in $tmp/NAME.out
    local name=$1
    shift
    "$aorta" attach --output "$tmp/a" --run-name "$name" -- "$@" >"$tmp/$name.out" \
        2>"$tmp/$name.err"
    local rc=$?
    [ $rc = 0 ] || fail "$name: attach exited $rc: $(cat "$tmp/$name.err")"
}

# check NAME RANKS PIDS: the rank-named files are exactly RANKS ("0 1"), the
# pid-named ones belong to the processes of role PIDS ("launcher", "rank:1",
# "" for none), each with the steps the job played; run.json says the same.
check() {
    python3 - "$tmp/a/$1" "$tmp/$1.out" "$2" "$3" <<'PY'
import json, os, sys
d, out, ranks, pids = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
procs = [json.loads(l) for l in open(out) if l.startswith("{")]
by_role = {}
for p in procs:
    by_role.setdefault(p["role"] if p["role"] == "launcher" else "rank:%d" % p["rank"], []).append(p["pid"])
files = sorted(f for f in os.listdir(d) if f.endswith("_metrics.jsonl"))
want = sorted(["rank_%02d_metrics.jsonl" % int(r) for r in ranks] +
              ["pid_%d_metrics.jsonl" % by_role[p][0] for p in pids])
assert files == want, (files, want)
run = json.load(open(d + "/run.json"))
listed = run["config"]["attach.processes"]["value"]
assert len(listed) == len(files), listed
for e in listed:
    n = sum(1 for _ in open("%s/%s_metrics.jsonl" % (d, e["files"])))
    assert e["steps"] == n > 0, e
    assert e["finished"] is True, e
    assert e["info"]["pid"] == e["pid"], e
    if e["files"].startswith("pid_"):
        assert e["note"], e
        assert e["files"] == "pid_%d" % e["pid"], e
    else:
        assert e["rank"] == int(e["files"][5:]), e
        assert e["note"] is None, e
        for line in open("%s/%s_metrics.jsonl" % (d, e["files"])):
            r = json.loads(line)
            assert r["rank"] == e["rank"], r
            assert (r["compute_ms"], r["comm_ms"], r["overlap_ms"], r["exposed_comm_ms"]) == (10, 8, 4, 4), r
for r in ranks:
    e = [e for e in listed if e["rank"] == int(r) and e["files"].startswith("rank_")][0]
    assert e["pid"] in by_role.get("rank:%s" % r, []) + by_role.get("launcher", []), (e, by_role)
PY
}

# torchrun: the agent starts the GPU runtime (cuInit) but runs nothing
run torchrun "$job" --launcher torchrun --nproc 2 --parent init
check torchrun "0 1" "" || fail "torchrun"
grep -q "note\|warning" "$tmp/torchrun.err" && fail "torchrun: $(cat "$tmp/torchrun.err")"
python3 - "$tmp/a/torchrun/run.json" <<'PY' || fail "torchrun: run.json"
import json, sys
run = json.load(open(sys.argv[1]))
assert run["world_size"] == 2, run["world_size"]
assert [e["rank"] for e in run["config"]["attach.processes"]["value"]] == [0, 1]
assert [e["launcher"] for e in run["config"]["attach.processes"]["value"]] == ["torchrun"] * 2
assert run["config"]["attach.step_source"]["value"] == "nvtx"
PY
[ -s "$tmp/a/torchrun/summary.json" ] || fail "torchrun: no summary.json"

# aorta train's spawn, its parent doing GPU work before the ranks: it held
# rank 0 of 1 until rank 0 came, which moved its files aside
run parent_first "$job" --launcher aorta --nproc 2 --parent work
check parent_first "0 1" "launcher" || fail "parent_first"
grep -q "held rank_00's files" "$tmp/parent_first.err" || fail "parent_first: no warning"
grep -q "note: attach: pid .* wrote pid_" "$tmp/parent_first.err" || fail "parent_first: no note"
# ... and after them
run parent_last "$job" --launcher aorta --nproc 2 --parent late
check parent_last "0 1" "launcher" || fail "parent_last"

# OpenMPI's and Slurm's variables; torchrun's workers inside a Slurm task
run openmpi "$job" --launcher openmpi --nproc 3
check openmpi "0 1 2" "" || fail "openmpi"
run slurm "$job" --launcher slurm --nproc 2 --parent init
check slurm "0 1" "" || fail "slurm"
run torchrun_slurm "$job" --launcher torchrun-slurm --nproc 2 --parent init
check torchrun_slurm "0 1" "" || fail "torchrun inside slurm"

# a plain multi-process program: ranks unknown, every file pid-named
run plain "$job" --launcher plain --nproc 2
check plain "" "rank:0 rank:1" || fail "plain"
grep -q "ranks are unknown" "$tmp/plain.err" || fail "plain: no note"
[ -f "$tmp/a/plain/summary.json" ] && fail "plain: a summary of no rank"

# a second process of rank 0; inconsistent variables; a rank with no GPU work
run dup "$job" --launcher torchrun --nproc 2 --dup-rank
python3 - "$tmp/a/dup" <<'PY' || fail "dup"
import json, os, sys
d = sys.argv[1]
files = sorted(f for f in os.listdir(d) if f.endswith("_metrics.jsonl"))
assert len(files) == 2 and files[1] == "rank_00_metrics.jsonl" and files[0].startswith("pid_"), files
listed = json.load(open(d + "/run.json"))["config"]["attach.processes"]["value"]
assert [e["rank"] for e in listed] == [0, 0], listed
assert "a second process of rank 0" in listed[1]["note"], listed
PY
grep -q "1 of 2 ranks have no rank files (1)" "$tmp/dup.err" || fail "dup: no note of rank 1"
run bad "$job" --launcher torchrun --nproc 2 --bad-rank 1
check bad "0" "rank:1" || fail "bad"
grep -q "inconsistent" "$tmp/bad.err" || fail "bad: no note"
run idle "$job" --launcher torchrun --nproc 3 --idle-rank 1 --parent init
check idle "0 2" "" || fail "idle"
grep -q "pid_" "$tmp/idle.err" && fail "idle: $(cat "$tmp/idle.err")"

# one process, no launcher, even behind a shell: rank 0 of 1, as before
run single sh -c "\"$job\" --nproc 0 --parent work; true"
check single "0" "" || fail "single"

# real mpirun (ctest sets AORTA_MPIRUN empty without MPI)
mpirun=${AORTA_MPIRUN-mpirun}
if command -v "$mpirun" >/dev/null 2>&1; then
    flags=(--oversubscribe --bind-to none)
    [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
    run mpirun "$mpirun" "${flags[@]}" -np 2 "$job" --child --steps 3
    python3 - "$tmp/a/mpirun" <<'PY' || fail "mpirun: $(cat "$tmp/mpirun.err")"
import json, sys
listed = json.load(open(sys.argv[1] + "/run.json"))["config"]["attach.processes"]["value"]
assert [(e["rank"], e["files"], e["steps"], e["launcher"]) for e in listed] == \
    [(0, "rank_00", 3, "openmpi"), (1, "rank_01", 3, "openmpi")], listed
PY
else
    echo "no mpirun: the real-mpirun case is not run"
fi
finish attach_ranks
