#!/usr/bin/env bash
# aorta plan against what cpu runs measure: the device-memory high-water mark
# each rank records (mem_peak_mb) is within 10 % of the plan's total for the
# run's strategy, on 1 and 2 ranks, full_shard, shard_grad_op and ddp; the
# plan's parts and fit columns; bad flags exit 2.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
export OPENBLAS_NUM_THREADS=1
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
out="$tmp/out"
# nproc strategy-name mode sharding [overrides...]
check() {
    local np=$1 name=$2 mode=$3 sharding=$4
    shift 4
    local ov=(distributed.mode="$mode" fsdp.sharding_strategy="$sharding" "$@")
    "$aorta" train --backend cpu --nproc "$np" --config "$src/config/tiny.yaml" --run-name "$name-$np" \
        --override training.output_dir="$out" training.max_steps=4 training.summary_skip_steps=1 \
        "${ov[@]}" >"$tmp/$name-$np.out" 2>&1 || { fail "$name-$np: train exited $?"; tail "$tmp/$name-$np.out"; return; }
    "$aorta" plan --backend cpu --nproc "$np" --config "$src/config/tiny.yaml" --json \
        --override "${ov[@]}" >"$tmp/$name-$np.json" 2>&1 || { fail "$name-$np: plan exited $?"; cat "$tmp/$name-$np.json"; return; }
    python3 - "$out/$name-$np" "$tmp/$name-$np.json" "$name" >"$tmp/$name-$np.check" 2>&1 <<'PY' || { fail "$name-$np: plan vs measured"; cat "$tmp/$name-$np.check"; }
import glob, json, sys
run, plan, strategy = sys.argv[1], sys.argv[2], sys.argv[3]
peaks = []
for f in glob.glob(run + "/rank_*_metrics.jsonl"):
    peaks.append(max(json.loads(l)["mem_peak_mb"] for l in open(f)))
assert peaks, "no records"
rows = [p for p in json.load(open(plan))["plans"]
        if p["strategy"] == strategy and p["precision"] == "fp32" and p["gradient_accumulation"] == 1]
assert len(rows) == 1, rows
p = rows[0]
parts = sum(p[k] for k in ("params", "params16", "gathered", "grads", "optimizer", "activations",
                           "activations16", "data", "comm", "baseline"))
assert parts == p["total"], (parts, p["total"])
planned = p["total"] / 1048576
for peak in peaks:
    assert abs(peak - planned) <= 0.10 * peak, ("measured", peak, "MiB, planned", planned)
print("ok", peaks, planned)
PY
}
check 1 full_shard fsdp full_shard
check 2 full_shard fsdp full_shard
check 2 shard_grad_op fsdp shard_grad_op
check 2 ddp ddp no_shard

# the cuda backend's plan (no device needed): its parts add up; 16-bit copies of the
# activations only with bf16 compute, of the shard only where fsdp gathers in bf16;
# its model (dropout masks, kept probabilities, workspaces) above the cpu model's
for np in 1 2; do
    if ! "$aorta" plan --backend cuda --nproc $np --config "$src/config/tiny.yaml" --json >"$tmp/cuda-$np.json" 2>&1 ||
        ! "$aorta" plan --backend cpu --nproc $np --config "$src/config/tiny.yaml" --json >"$tmp/cpu-$np.json" 2>&1; then
        fail "plan --backend cuda/cpu --nproc $np failed"
        continue
    fi
    python3 - "$tmp/cuda-$np.json" "$tmp/cpu-$np.json" >"$tmp/cuda-$np.check" 2>&1 <<'PY' || { fail "cuda plan, $np rank(s)"; cat "$tmp/cuda-$np.check"; }
import json, sys
cuda, cpu = (json.load(open(f))["plans"] for f in sys.argv[1:3])
key = lambda p: (p["strategy"], p["precision"], p["gradient_accumulation"])
cpu = {key(p): p for p in cpu}
assert cuda and set(map(key, cuda)) == set(cpu), (list(map(key, cuda)), list(cpu))
for p in cuda:
    c = cpu[key(p)]
    parts = sum(p[k] for k in ("params", "params16", "gathered", "grads", "optimizer", "activations",
                               "activations16", "data", "comm", "baseline"))
    assert parts == p["total"], (key(p), parts, p["total"])
    bf16 = p["precision"] == "bf16"
    assert (p["activations16"] > 0) == bf16, key(p)
    assert (p["params16"] > 0) == (bf16 and p["strategy"] != "ddp"), key(p)
    assert c["activations16"] == c["params16"] == 0, key(p)
    assert p["activations"] > c["activations"], (key(p), p["activations"], c["activations"])
    assert (p["params"], p["optimizer"], p["grads"]) == (c["params"], c["optimizer"], c["grads"]), key(p)
print("ok")
PY
done

# --device-mem: fits and the largest batch; a device too small fits nothing
"$aorta" plan --backend cpu --config "$src/config/tiny.yaml" --device-mem 64M >"$tmp/fit.out" 2>&1 \
    || fail "plan --device-mem exited $?"
grep -q 'max_batch' "$tmp/fit.out" || { fail "no max_batch column"; cat "$tmp/fit.out"; }
"$aorta" plan --backend cpu --config "$src/config/tiny.yaml" --device-mem 1K --json >"$tmp/small.json" \
    || fail "plan --device-mem 1K exited $?"
python3 -c "
import json, sys
p = json.load(open(sys.argv[1]))['plans']
assert p and all(not r['fits'] and r['max_batch'] == 0 for r in p), p
" "$tmp/small.json" || fail "a 1K device fits something"
for bad in "--nproc 0" "--backend tpu" "--device-mem lots" "--bogus"; do
    # shellcheck disable=SC2086 # the flag and its value are two words
    "$aorta" plan $bad >"$tmp/bad.out" 2>&1
    rc=$?
    [ $rc = 2 ] || fail "plan $bad exited $rc, not 2"
    grep -q 'aorta: error:' "$tmp/bad.out" || fail "plan $bad: no error line"
done
"$aorta" plan --nproc 6 --override fsdp.sharding_strategy=hybrid_shard fsdp.shard_group_size=4 \
    >"$tmp/hyb.out" 2>&1
[ $? = 2 ] || fail "a group size that does not divide the ranks did not exit 2"
finish plan_cpu
