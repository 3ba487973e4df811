#!/usr/bin/env bash
# Issue 30, goal 2 on a GPU: is the seed's default config, as shipped (host
# loader, 4 workers), input-bound? Runs it with host data and with device data
# on one GPU and prints each run's step median and p90 (summary.json), the
# ratio host/device of the medians and host p90 over its own median, and
# `aorta plan` against the measured peak of config/large.yaml (issue 26).
#   bench/loader_step.sh            (from the repository root)
#   env: AORTA (default build-device/aorta), OUT (default ./out), STEPS (default 80)
# Writes $OUT/loader_step.json.
set -euo pipefail
aorta=${AORTA:-build-device/aorta}
out=${OUT:-out}
steps=${STEPS:-80}
[ -x "$aorta" ] || { echo "bench/loader_step.sh: no aorta binary at $aorta" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT

run() { # NAME CONFIG OVERRIDES...
    local name=$1 config=$2
    shift 2
    "$aorta" train --nproc 1 --config "$config" --run-name "$name" \
        --override training.output_dir="$runs" "$@" >"$runs/$name.log" 2>&1 ||
        { echo "run $name failed:"; tail -5 "$runs/$name.log"; return 1; }
}
run host_4w config/default.yaml training.max_steps="$steps" dataset.placement=host \
    dataloader.num_workers=4
run device config/default.yaml training.max_steps="$steps" dataset.placement=device
run large config/large.yaml training.max_steps=15 training.summary_skip_steps=5
"$aorta" plan --backend cuda --nproc 1 --config config/large.yaml --json >"$runs/large.plan.json"

python3 - "$runs" "$out/loader_step.json" <<'PY'
import glob, json, sys
runs, dst = sys.argv[1:3]
def step(name):
    m = json.load(open(f"{runs}/{name}/summary.json"))["summary"]["metrics"]["step_ms"]
    return m["median"], m["p90"]
h, d = step("host_4w"), step("device")
peak = max(max(json.loads(l).get("mem_peak_mb") or 0 for l in open(p))
           for p in glob.glob(f"{runs}/large/rank_*_metrics.jsonl"))
plan = next(p["total"] / 1048576 for p in json.load(open(f"{runs}/large.plan.json"))["plans"]
            if p["strategy"] == "full_shard" and p["precision"] == "bf16"
            and p["gradient_accumulation"] == 1)
res = {"host_4w_median_ms": h[0], "host_4w_p90_ms": h[1], "device_median_ms": d[0],
       "device_p90_ms": d[1], "median_ratio": h[0] / d[0], "host_p90_over_median": h[1] / h[0],
       "large_plan_mib": plan, "large_peak_mib": peak, "plan_error": plan / peak - 1}
json.dump(res, open(dst, "w"), indent=1)
print(f"{'run':<26}{'median ms':>12}{'p90 ms':>10}")
print(f"{'default, host, 4 workers':<26}{h[0]:>12.3f}{h[1]:>10.3f}")
print(f"{'default, device data':<26}{d[0]:>12.3f}{d[1]:>10.3f}")
print(f"host/device median {res['median_ratio']:.3f} (goal <= 1.15); "
      f"host p90/median {res['host_p90_over_median']:.3f} (goal <= 1.3)")
print(f"large: plan {plan:.0f} MiB, measured peak {peak:.0f} MiB ({100 * res['plan_error']:+.1f} %)")
PY
