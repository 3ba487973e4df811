#!/usr/bin/env bash
# aorta train on the cpu backend: the run's files (run.json, records that
# validate, summary.json), never appending, bad input exiting 2 before any
# rank starts, the §7 invariants in every record, baselines and their
# decomposition, a loss that falls on the teacher data set and bit-identical
# losses for the same seed.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
# MPI's libraries have no frame pointers: without the slow unwinder their
# leaks cannot be matched with tests/lsan.supp.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
tiny=("$src/config/tiny.yaml")
train() { "$aorta" train --backend cpu --config "${tiny[@]}" "$@"; }

# --- (a) one rank: files, records, summary; a second run never appends ------
out="$tmp/out"
train --run-name one --override training.output_dir="$out" training.max_steps=12 \
    >"$tmp/a.out" 2>"$tmp/a.err" || { fail "one-rank run exited $?"; cat "$tmp/a.out" "$tmp/a.err"; }
run="$out/one"
for f in run.json rank_00_metrics.jsonl rank_00.log summary.json; do
    [ -s "$run/$f" ] || fail "no $f"
done
[ "$(readlink "$out/latest")" = one ] || fail "latest does not point at the run"
grep -q 'step 10/12' "$tmp/a.out" || fail "no log line at step 10"
grep -q 'step_ms' "$tmp/a.out" || fail "no summary table"
train --run-name one --override training.output_dir="$out" >"$tmp/dup.out" 2>&1
rc=$?
[ $rc = 2 ] || fail "the same --run-name twice exited $rc, not 2"
grep -q 'exists' "$tmp/dup.out" || { fail "no 'exists' error"; cat "$tmp/dup.out"; }
train --override training.output_dir="$out" training.max_steps=6 training.summary_skip_steps=1 \
    >/dev/null 2>&1 || fail "second run without a name failed"
[ "$(find "$out" -mindepth 1 -maxdepth 1 -type d | wc -l)" = 2 ] || fail "not two run directories"

# Records, the §7 invariants, run.json's config with origins.
python3 - "$run" 12 >"$tmp/check.out" 2>&1 <<'PY' || { fail "record checks"; cat "$tmp/check.out"; }
import json, sys
run, steps = sys.argv[1], int(sys.argv[2])
recs = [json.loads(l) for l in open(run + "/rank_00_metrics.jsonl")]
train = [r for r in recs if r["phase"] == "train"]
assert [r["step"] for r in train] == list(range(steps)), [r["step"] for r in train]
eps = 1e-6
for r in recs:
    assert r["schema"] == 1 and r["rank"] == 0 and r["world_size"] == 1
    c, m, o, s = r["compute_ms"], r["comm_ms"], r["overlap_ms"], r["step_ms"]
    assert o <= min(c, m) + eps, r
    assert s + eps >= max(c, m), r
    assert abs(r["exposed_comm_ms"] - (m - o)) < 1e-6, r
    assert r["wall_time"] > 1.6e9
for r in train:
    assert r["loss"] > 0 and r["grad_norm"] > 0 and r["lr"] >= 0 and r["tokens_per_s"] > 0
    assert abs(r["loss"] - r["loss_local"]) < 1e-12  # one rank
cfg = json.load(open(run + "/run.json"))
assert cfg["command"] == "train" and cfg["world_size"] == 1
assert cfg["config"]["training.max_steps"]["value"] == 12
assert cfg["config"]["training.max_steps"]["origin"] == "--override"
assert cfg["config"]["model.num_layers"]["origin"].endswith("tiny.yaml:40:15") or \
    "tiny.yaml" in cfg["config"]["model.num_layers"]["origin"]
s = json.load(open(run + "/summary.json"))
assert s["schema"] == 1
PY

# --- (f) bad input exits 2 before any rank starts ----------------------------
train --nproc 2 --override training.output_dir="$tmp/bad" model.num_heads=7 >"$tmp/f.out" 2>&1
rc=$?
[ $rc = 2 ] || fail "bad config exited $rc"
grep -qw 'rank' "$tmp/f.out" && fail "a rank started for a bad config"
[ -e "$tmp/bad" ] && fail "a run directory was made for a bad config"
train --nproc 3 --override training.output_dir="$tmp/bad" fsdp.sharding_strategy=hybrid_shard \
    fsdp.shard_group_size=2 >"$tmp/f2.out" 2>&1
rc=$?
[ $rc = 2 ] || fail "hybrid group size 2 of 3 ranks exited $rc"
grep -q 'fsdp.shard_group_size' "$tmp/f2.out" || fail "hybrid error does not name the key"
train --bogus >/dev/null 2>&1
[ $? = 2 ] || fail "unknown flag not exit 2"
train --run-name a/b >/dev/null 2>&1
[ $? = 2 ] || fail "--run-name with a slash not exit 2"

# --- (g) baselines: compute_only/comm_only records, a decomposition (2 ranks) --
if command -v "${AORTA_MPIRUN:-mpirun}" >/dev/null 2>&1; then
    train --nproc 2 --run-name base --override training.output_dir="$out" training.max_steps=14 \
        training.summary_skip_steps=2 training.baseline_steps=3 >"$tmp/g.out" 2>"$tmp/g.err" ||
        { fail "baseline run exited $?"; cat "$tmp/g.out" "$tmp/g.err"; }
    grep -q 'decomposition' "$tmp/g.out" || fail "no decomposition in the table"
    python3 - "$out/base" >"$tmp/g.chk" 2>&1 <<'PY' || { fail "baseline checks"; cat "$tmp/g.chk"; }
import json, sys
run = sys.argv[1]
for rank in (0, 1):
    recs = [json.loads(l) for l in open(f"{run}/rank_0{rank}_metrics.jsonl")]
    phases = [r["phase"] for r in recs]
    assert phases == ["train"] * 2 + ["compute_only"] * 3 + ["comm_only"] * 3 + ["train"] * 6, phases
    for r in recs:
        if r["phase"] == "compute_only":
            assert r["comm_ms"] == 0 and r["compute_ms"] > 0 and r["loss"] is None, r
        if r["phase"] == "comm_only":
            assert r["compute_ms"] == 0 and r["comm_ms"] > 0, r
        assert r["overlap_ms"] <= min(r["compute_ms"], r["comm_ms"]) + 1e-6
        assert r["step_ms"] + 1e-6 >= max(r["compute_ms"], r["comm_ms"])
d = json.load(open(run + "/summary.json"))["summary"]["decomposition"]
assert d["compute_isolated_ms"] > 0 and d["comm_isolated_ms"] > 0, d
assert abs(d["serial_ms"] - d["compute_isolated_ms"] - d["comm_isolated_ms"]) < 1e-9, d
PY
else
    echo "note: no mpirun, baseline test skipped"
fi

# --- (b) teacher targets: the loss falls >= 30%; the same seed, the same losses
teach=(--override training.output_dir="$out" training.max_steps=200 scheduler.total_steps=2000
    scheduler.warmup_steps=10 optimizer.lr=0.01 training.batch_size=8 training.log_interval=50
    dataset.target=teacher model.dropout=0)
train --run-name t1 "${teach[@]}" >"$tmp/b1.out" 2>&1 || { fail "teacher run 1"; cat "$tmp/b1.out"; }
train --run-name t2 "${teach[@]}" >"$tmp/b2.out" 2>&1 || { fail "teacher run 2"; cat "$tmp/b2.out"; }
python3 - "$out/t1" "$out/t2" >"$tmp/b.chk" 2>&1 <<'PY' || { fail "teacher checks"; cat "$tmp/b.chk"; }
import json, sys
def losses(run):
    return [json.loads(l)["loss"] for l in open(run + "/rank_00_metrics.jsonl")]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == 200 and a == b, "losses differ between two runs of the same seed"
first, last = a[0], sum(a[-20:]) / 20
print(f"loss {first:.4f} -> {last:.4f}")
assert last <= 0.7 * first, f"loss fell only from {first} to {last}"
PY
cat "$tmp/b.chk"

# Precision the cpu backend cannot run: one warning each, named, never silent.
train --run-name prec --override training.output_dir="$out" training.max_steps=2 \
    training.summary_skip_steps=0 training.mixed_precision=bf16 fsdp.param_dtype=fp16 \
    fsdp.reduce_dtype=bf16 >"$tmp/prec.out" 2>&1 || { fail "precision run"; cat "$tmp/prec.out"; }
grep -q "fp32 only: training.mixed_precision=bf16 fsdp.param_dtype=fp16 run as fp32" "$tmp/prec.out" ||
    { fail "no fp32 warning naming the precision keys"; cat "$tmp/prec.out"; }
grep -q "fsdp.reduce_dtype=bf16 runs as fp32" "$tmp/prec.out" ||
    { fail "no reduce_dtype warning"; cat "$tmp/prec.out"; }

# fp16 dynamic loss scaling (on every backend): with a power-of-two scale the
# updates are those of the unscaled run, bit for bit; an overflow (here a
# diverging run, lr 1e30) skips the step and halves the scale, which the
# host learns one step late, so the halving shows two steps after the first
# skipped one.
common=(training.max_steps=8 training.summary_skip_steps=1 scheduler.warmup_steps=0)
train --run-name ls_none --override training.output_dir="$out" "${common[@]}" \
    training.mixed_precision=none >"$tmp/ls1.out" 2>&1 || { fail "none run"; cat "$tmp/ls1.out"; }
train --run-name ls_fp16 --override training.output_dir="$out" "${common[@]}" \
    training.mixed_precision=fp16 >"$tmp/ls2.out" 2>&1 || { fail "fp16 run"; cat "$tmp/ls2.out"; }
train --run-name ls_div --override training.output_dir="$out" "${common[@]}" \
    training.mixed_precision=fp16 optimizer.lr=1e30 >"$tmp/ls3.out" 2>&1 ||
    { fail "diverging fp16 run"; cat "$tmp/ls3.out"; }
python3 - "$out" >"$tmp/ls.chk" 2>&1 <<'PY' || { fail "loss scaling"; cat "$tmp/ls.chk"; }
import json, sys
def recs(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}/rank_00_metrics.jsonl")]
none, fp16, div = recs("ls_none"), recs("ls_fp16"), recs("ls_div")
assert [r["loss"] for r in none] == [r["loss"] for r in fp16], "fp16 scaling changed the losses"
assert all(r["loss_scale"] is None for r in none)
assert all(r["loss_scale"] == 65536 for r in fp16)
scales = [r["loss_scale"] for r in div]
assert scales == [65536, 65536, 65536, 32768, 16384, 8192, 4096, 2048], scales
assert div[0]["grad_norm"] is not None and all(r["grad_norm"] is None for r in div[1:])
print("loss scales of the diverging run:", scales)
PY
grep -q "overflow: step skipped" "$tmp/ls3.out" || fail "no skipped-step line"

# logging.level: DEBUG prints every step's line, WARNING none (the final
# table still), ERROR not even the warnings; the log file keeps every line.
for lv in DEBUG WARNING ERROR; do
    train --run-name "lv$lv" --override training.output_dir="$out" training.max_steps=7 \
        training.summary_skip_steps=2 logging.level=$lv fsdp.reduce_dtype=bf16 >"$tmp/lv$lv.out" 2>&1 ||
        { fail "logging.level=$lv run"; cat "$tmp/lv$lv.out"; }
done
[ "$(grep -c '^step ' "$tmp/lvDEBUG.out")" = 7 ] || fail "DEBUG: not one line per step"
! grep -q '^step ' "$tmp/lvWARNING.out" || fail "WARNING: progress lines printed"
grep -q "reduce_dtype=bf16 runs as fp32" "$tmp/lvWARNING.out" || fail "WARNING: warning missing"
grep -q "summary of lvWARNING" "$tmp/lvWARNING.out" || fail "WARNING: no final table"
! grep -q "warning" "$tmp/lvERROR.out" || fail "ERROR: warnings printed"
[ "$(grep -c '^step ' "$out/lvERROR/rank_00.log")" -ge 1 ] || fail "ERROR: the log file lost its lines"

finish train_cpu
