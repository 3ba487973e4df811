#!/usr/bin/env bash
# aorta plan against what cuda runs measure (tests/e2e/plan_cpu.sh on the cpu
# backend): the seed's default config, full_shard with bf16 compute and gathers
# and ddp in fp32, one rank, data on the device; the device-memory high-water
# mark of aorta's own allocations (mem_peak_mb) is within 2 % of the plan's
# total for the run's row: the plan shares its sizes with the code that
# allocates them, and only CUB's sort storage is estimated (the issue's goal
# is 10 %; the runtime's own memory is outside both).
# Skips (77) without a GPU.
set -u
aorta=${AORTA:?set by ctest}
src=${AORTA_SOURCE_DIR:?set by ctest}
# shellcheck source=tests/e2e/lib/tally.sh
. "$(dirname "$0")/../e2e/lib/tally.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
nvidia-smi -L 2>/dev/null | grep -q '^GPU' || { echo "SKIP: no CUDA device"; exit 77; }
out="$tmp/out"
check() { # name strategy precision overrides...
    local name=$1 strategy=$2 prec=$3
    shift 3
    set -- dataset.placement=device "$@"
    "$aorta" train --backend cuda --nproc 1 --config "$src/config/default.yaml" --run-name "$name" \
        --override training.output_dir="$out" training.max_steps=3 training.summary_skip_steps=1 \
        "$@" >"$tmp/$name.out" 2>&1 ||
        { fail "$name: train exited $?"; tail "$tmp/$name.out"; return; }
    "$aorta" plan --backend cuda --config "$src/config/default.yaml" --json --override "$@" \
        >"$tmp/$name.json" 2>/dev/null || { fail "$name: plan exited $?"; return; }
    python3 - "$out/$name" "$tmp/$name.json" "$strategy" "$prec" >"$tmp/$name.check" 2>&1 <<'PY' ||
import json, sys
run, plan, strategy, prec = sys.argv[1:5]
peak = max(json.loads(l)["mem_peak_mb"] for l in open(run + "/rank_00_metrics.jsonl"))
rows = [p for p in json.load(open(plan))["plans"]
        if (p["strategy"], p["precision"], p["gradient_accumulation"]) == (strategy, prec, 1)]
assert len(rows) == 1, rows
planned = rows[0]["total"] / 1048576
assert abs(peak - planned) <= 0.02 * peak, ("measured", peak, "MiB, planned", planned)
print("ok", peak, planned)
PY
        { fail "$name: plan vs measured"; cat "$tmp/$name.check"; }
    cat "$tmp/$name.check"
}
check full_shard_bf16 full_shard bf16 distributed.mode=fsdp fsdp.sharding_strategy=full_shard \
    training.mixed_precision=bf16 fsdp.param_dtype=bf16
check ddp_fp32 ddp fp32 distributed.mode=ddp fsdp.sharding_strategy=no_shard \
    training.mixed_precision=none fsdp.param_dtype=fp32
finish gpu/plan
