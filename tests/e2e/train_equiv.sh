#!/usr/bin/env bash
# Numerical equivalence of the sharding engine on the cpu backend (dropout
# on): 2 ranks x batch B = 1 rank x 2B; full_shard, shard_grad_op, no_shard,
# ddp (small buckets), accumulation with one gathered buffer and
# BACKWARD_POST, the serialized and shared-communicator variants, and
# hybrid_shard on 4 ranks in groups of 2, and initial parameters drawn by
# every rank instead of broadcast from rank 0 (fsdp.sync_module_states), all
# give the same global losses over 20 steps.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
command -v "${AORTA_MPIRUN:-mpirun}" >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/lib/tally.sh"
n=0
# run NAME NPROC BATCH [overrides...]
run() {
    local name=$1 np=$2 b=$3
    shift 3
    "$aorta" train --backend cpu --config "$src/config/tiny.yaml" --nproc "$np" --run-name "$name" \
        --override training.output_dir="$tmp/out" training.max_steps=20 training.summary_skip_steps=2 \
        model.dropout=0.1 training.batch_size="$b" "$@" >"$tmp/$name.log" 2>&1 ||
        { fail "$name exited $?"; tail -20 "$tmp/$name.log"; }
    n=$((n + 1))
}
run one 1 8
run full 2 4
run grad_op 2 4 fsdp.sharding_strategy=shard_grad_op
run no_shard 2 4 fsdp.sharding_strategy=no_shard
run ddp 2 4 distributed.mode=ddp distributed.bucket_cap_mb=0.1
run accum 2 2 training.gradient_accumulation=2 fsdp.limit_all_gathers=1 \
    fsdp.backward_prefetch=BACKWARD_POST fsdp.forward_prefetch=false
run accum_once 2 2 training.gradient_accumulation=2 fsdp.reduce_every_microbatch=false
run serial 2 4 distributed.enable_overlap=false
run shared 2 4 distributed.comm_per_stream=false fsdp.backward_prefetch=NONE
run hybrid 4 2 fsdp.sharding_strategy=hybrid_shard fsdp.shard_group_size=2
run nosync 2 4 fsdp.sync_module_states=false
# rank 0's initial parameters are broadcast by default, drawn by each rank without
grep -q "parameters broadcast from rank 0" "$tmp/full.log" || fail "full: no broadcast at start"
! grep -q "parameters broadcast from rank 0" "$tmp/nosync.log" || fail "nosync: broadcast anyway"

python3 - "$tmp/out" >"$tmp/check" 2>&1 <<'PY' || { fail "losses differ"; cat "$tmp/check"; }
import json, sys
out = sys.argv[1]
def losses(name):
    recs = [json.loads(l) for l in open(f"{out}/{name}/rank_00_metrics.jsonl")]
    return [r["loss"] for r in recs if r["phase"] == "train"]
ref = losses("one")
assert len(ref) == 20
for name, tol in [("full", 1e-4), ("grad_op", 1e-5), ("no_shard", 1e-5), ("ddp", 1e-5),
                  ("accum", 1e-5), ("accum_once", 1e-5), ("serial", 1e-5), ("shared", 1e-5),
                  ("hybrid", 1e-5), ("nosync", 1e-4)]:
    got = losses(name)
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
    print(f"{name}: worst relative difference {worst:.2e}")
    assert len(got) == 20 and worst <= tol, name
# Ranks agree on the global loss; their local losses differ (different samples).
full1 = [json.loads(l) for l in open(f"{out}/full/rank_01_metrics.jsonl")]
full0 = [json.loads(l) for l in open(f"{out}/full/rank_00_metrics.jsonl")]
assert all(a["loss"] == b["loss"] for a, b in zip(full0, full1))
assert any(a["loss_local"] != b["loss_local"] for a, b in zip(full0, full1))
PY
cat "$tmp/check"
echo "train_equiv: $n runs"
finish train_equiv
