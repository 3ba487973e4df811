#!/usr/bin/env bash
# Profiling in aorta train on the cpu backend: the Chrome trace of a 2-rank
# run (valid JSON, one thread per stream with ops per rank, an event per op),
# profiling windows that keep per-op intervals on exactly the steps of the
# torch.profiler schedule (three schedules, baselines counted as steps),
# bench/idle_gaps.py giving back each record's idle_ms from its ops, and
# telemetry / kernel trace requested where there is no GPU: one warning each,
# the run succeeds, no telemetry or kernels in the records; profiling.timing
# off still gives each record its step time, and null for what needs the ops.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
# MPI's libraries have no frame pointers: without the slow unwinder their
# leaks cannot be matched with tests/lsan.supp.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
out="$tmp/out"
train() { "$aorta" train --backend cpu --config "$src/config/tiny.yaml" "$@"; }
# run NAME NPROC OVERRIDES...: a run that must succeed; its stderr in $tmp/NAME.err
run() {
    local name=$1 nproc=$2
    shift 2
    train --nproc "$nproc" --run-name "$name" --override profiling.skip_first=0 training.output_dir="$out" "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { fail "run $name exited $?"; cat "$tmp/$name.out" "$tmp/$name.err"; }
}
# warnings NAME PATTERN: how many lines of the run's output match
warnings() { cat "$tmp/$1.out" "$tmp/$1.err" | grep -c "$2"; }

# The records of every rank carry "ops" on exactly the active iterations of
# the schedule (torch.profiler.schedule, skip_first 0; iterations counted as
# the run issues them, baselines included) and no telemetry or kernels.
# ACTIVE 0: windows off.
check_windows() { # RUN WAIT WARMUP ACTIVE REPEAT NRANKS
    python3 - "$out/$1" "$2" "$3" "$4" "$5" "$6" >"$tmp/$1.check" 2>&1 <<'PY' ||
import glob, json, sys
run = sys.argv[1]
wait, warmup, active, repeat, nranks = map(int, sys.argv[2:])
def is_active(step):
    if active == 0:  # windows off
        return False
    cycle = wait + warmup + active
    if repeat > 0 and step // cycle >= repeat:
        return False
    return step % cycle >= wait + warmup
files = sorted(glob.glob(run + "/rank_*_metrics.jsonl"))
assert len(files) == nranks, files
for f in files:
    recs = [json.loads(l) for l in open(f)]
    assert len(recs) >= 8, (f, len(recs))
    got = [k for k, r in enumerate(recs) if "ops" in r]
    want = [k for k in range(len(recs)) if is_active(k)]
    assert got == want, (f, "ops on", got, "expected", want)
    for k in got:
        assert len(recs[k]["ops"]) > 0, (f, k)
    for r in recs:
        extra = r.get("extra", {})
        assert extra.get("telemetry", {"status": "absent"})["status"] == "absent", r
        assert "kernels" not in extra and "overlap_kernels" not in extra, r
print("ok")
PY
        { fail "windows of $1"; cat "$tmp/$1.check"; }
}

# --- (a) 2 ranks: chrome trace, a window schedule, kernel trace without a GPU
run a 2 training.max_steps=10 profiling.enabled=true profiling.wait=1 profiling.warmup=1 \
    profiling.active=2 profiling.repeat=1 profiling.chrome_trace=true \
    profiling.trace_filename=t.json profiling.kernel_trace=true
[ "$(warnings a 'kernel_trace needs a GPU')" = 1 ] || fail "not one kernel_trace warning"
check_windows a 1 1 2 1 2
python3 - "$out/a" >"$tmp/trace.check" 2>&1 <<'PY' || { fail "trace of run a"; cat "$tmp/trace.check"; }
import json, sys
from collections import Counter
run = sys.argv[1]
ev = json.load(open(run + "/t.json"))["traceEvents"]
names = Counter((e["pid"], e["tid"]) for e in ev if e.get("ph") == "M" and e["name"] == "thread_name")
assert all(n == 1 for n in names.values()), names
streams = ["compute", "allgather", "reducescatter", "allreduce", "h2d"]
for rank in (0, 1):
    recs = [json.loads(l) for l in open(f"{run}/rank_{rank:02d}_metrics.jsonl")]
    ops = [op for r in recs for op in r.get("ops", [])]
    used = {streams.index(op["stream"]) for op in ops}
    assert {"compute", "allgather", "reducescatter", "h2d"} <= {streams[s] for s in used}, used
    named = {tid for (pid, tid) in names if pid == rank and tid < len(streams)}
    assert named == used, (rank, named, used)
    thread = {e["tid"]: e["args"]["name"] for e in ev
              if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == rank}
    for s in used:
        assert thread[s] == streams[s], thread
    op_events = [e for e in ev if e.get("ph") == "X" and e["pid"] == rank and e["tid"] in used]
    assert len(op_events) == len(ops), (rank, len(op_events), len(ops))
    assert Counter(e["name"] for e in op_events) == Counter(op["name"] for op in ops)
    steps = [e for e in ev if e.get("ph") == "X" and e["pid"] == rank and e["tid"] == 50]
    assert len(steps) == len(recs), (len(steps), len(recs))
print("ok")
PY

# bench/idle_gaps.py splits each profiled record's idle_ms into gaps between
# ops: its own union of the ops (an implementation independent of the C
# metrics) must give idle_ms back, record by record.
python3 "$src/bench/idle_gaps.py" "$out/a" >"$tmp/gaps.out" 2>&1 || { fail "idle_gaps.py"; cat "$tmp/gaps.out"; }
python3 - "$src/bench/idle_gaps.py" "$out/a" >"$tmp/gaps.check" 2>&1 <<'PY' || { fail "idle gaps of run a"; cat "$tmp/gaps.check"; }
import importlib.util, sys
spec = importlib.util.spec_from_file_location("idle_gaps", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
recs = m.load(sys.argv[2])
assert recs, "no record with ops"
for r in recs:
    idle = sum(b - a for a, b, _, _ in m.gaps(r["ops"], r["window_start_us"], r["window_end_us"]))
    assert abs(idle - 1e3 * r["idle_ms"]) < 1e-2, (r["step"], idle, r["idle_ms"])
print("ok")
PY

# --- (b) one rank, another schedule, baselines, telemetry without a GPU ------
run b 1 training.max_steps=14 training.baseline_steps=2 profiling.enabled=true \
    profiling.wait=0 profiling.warmup=1 profiling.active=1 profiling.repeat=0 telemetry.enabled=true
[ "$(warnings b 'telemetry disabled')" = 1 ] || fail "not one telemetry warning"
grep -q '"compute_only"' "$out/b/rank_00_metrics.jsonl" || fail "run b has no baselines"
check_windows b 0 1 1 0 1

# --- (c) a schedule with two cycles that then stops -------------------------
run c 1 training.max_steps=14 profiling.enabled=true profiling.wait=2 profiling.warmup=0 \
    profiling.active=3 profiling.repeat=2
check_windows c 2 0 3 2 1

# --- (d) windows off: no ops anywhere; the trace says why it has none --------
run d 1 training.max_steps=8 profiling.chrome_trace=true
[ "$(warnings d 'chrome_trace without profiling.enabled')" = 1 ] || fail "no warning in run d"
[ -s "$out/d/trace.json" ] || fail "run d has no trace"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$out/d/trace.json" ||
    fail "run d's trace is not JSON"
check_windows d 0 0 0 0 1

# --- (e) timing off: step time from one frame per iteration, the rest null --
run e 1 training.max_steps=8 profiling.timing=false
python3 - "$out/e/rank_00_metrics.jsonl" >"$tmp/e.check" 2>&1 <<'PY' || { fail "run e"; cat "$tmp/e.check"; }
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 8, len(recs)
for r in recs:
    assert r["step_ms"] > 0, r["step_ms"]
    assert r["tokens_per_s"] > 0, r["tokens_per_s"]
    for k in ("compute_ms", "comm_ms", "overlap_ms", "exposed_comm_ms", "idle_ms"):
        assert r[k] is None, (k, r[k])
    assert "ops" not in r
PY

finish profiling_cpu
