#!/usr/bin/env bash
# `aorta plan` against the device memory `aorta train` measures (issue 26): for
# each config, the strategy x precision x accumulation rows of the plan that
# differ on NPROC ranks are trained for a few steps, and each run's measured
# peak (mem_peak_mb, the high-water mark of aorta's device allocations, max over
# ranks) is printed beside the plan's total for that row; the goal is |plan -
# peak| <= 10 % of the peak.
#   bench/plan.sh [CONFIG ...]   (default config/default.yaml config/large.yaml)
#   env: AORTA (default build-device/aorta), OUT (default ./out), STEPS (default 5),
#        NPROC (default 1), BACKEND (default cuda)
# Writes $OUT/plan.tsv and $OUT/plan.json (one record a run), logs in $OUT/plan/.
set -euo pipefail
aorta=${AORTA:-build-device/aorta}
out=${OUT:-out}
steps=${STEPS:-5}
np=${NPROC:-1}
backend=${BACKEND:-cuda}
[ -x "$aorta" ] || { echo "bench/plan.sh: no aorta binary at $aorta (make device-build)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench/plan.sh: needs python3" >&2; exit 2; }
[ $# -gt 0 ] || set -- config/default.yaml config/large.yaml
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off: it can take a shared host's GPUs down
mkdir -p "$out/plan"
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
records="$out/plan/records.jsonl"
: >"$records"

# run CONFIG STRATEGY PRECISION ACCUM
run() {
    local config=$1 strategy=$2 prec=$3 accum=$4
    local name
    name="$(basename "$config" .yaml)-$strategy-$prec-a$accum"
    local mode=fsdp sharding=$strategy mp=bf16
    [ "$strategy" = ddp ] && { mode=ddp; sharding=no_shard; }
    [ "$prec" = fp32 ] && mp=none
    local ov=(distributed.mode="$mode" fsdp.sharding_strategy="$sharding"
        training.mixed_precision="$mp" fsdp.param_dtype="$prec"
        training.gradient_accumulation="$accum")
    echo "+ $name"
    local t0=$SECONDS
    timeout 300 "$aorta" train --backend "$backend" --nproc "$np" --config "$config" \
        --run-name "$name" --override training.output_dir="$runs" training.max_steps="$steps" \
        training.summary_skip_steps=1 "${ov[@]}" >"$out/plan/$name.train.log" 2>&1 ||
        { echo "  train exited $?"; tail -3 "$out/plan/$name.train.log"; }
    "$aorta" plan --backend "$backend" --nproc "$np" --config "$config" --json \
        --override "${ov[@]}" >"$out/plan/$name.plan.json" 2>/dev/null || true
    python3 - "$name" "$config" "$strategy" "$prec" "$accum" "$out/plan/$name.plan.json" \
        "$runs/$name" "$((SECONDS - t0))" >>"$records" <<'PY' || true
import glob, json, sys
name, config, strategy, prec, accum, pj, run, secs = sys.argv[1:9]
peaks = [max(json.loads(l).get("mem_peak_mb") or 0 for l in open(p))
         for p in glob.glob(run + "/rank_*_metrics.jsonl")]
rec = {"run": name, "config": config, "strategy": strategy, "precision": prec,
       "gradient_accumulation": int(accum), "peak_mib": max(peaks) if peaks else None,
       "wall_s": int(secs)}
try:
    for p in json.load(open(pj))["plans"]:
        if (p["strategy"], p["precision"], p["gradient_accumulation"]) == (strategy, prec, int(accum)):
            rec["plan_mib"] = p["total"] / 1048576
            rec["parts_mib"] = {k: p[k] / 1048576 for k in ("params", "params16", "gathered", "grads",
                                "optimizer", "activations", "activations16", "data", "comm", "baseline")}
except Exception as e:
    rec["error"] = str(e)
if rec.get("peak_mib") and rec.get("plan_mib"):
    rec["error_pct"] = 100 * (rec["plan_mib"] - rec["peak_mib"]) / rec["peak_mib"]
print(json.dumps(rec))
PY
}

for config in "$@"; do
    [ -f "$config" ] || { echo "bench/plan.sh: no config $config" >&2; exit 2; }
    # one rank: shard_grad_op in bf16 equals full_shard (one shard gathers in place)
    run "$config" full_shard bf16 1
    run "$config" ddp fp32 1
    if [ "$(basename "$config")" = large.yaml ]; then
        run "$config" full_shard fp32 1
        run "$config" shard_grad_op fp32 1
        run "$config" ddp bf16 1
        run "$config" full_shard bf16 4
    fi
done

python3 - "$records" "$out/plan.tsv" "$out/plan.json" "$np" "$backend" <<'PY'
import json, sys
src, tsv, dst, np, backend = sys.argv[1:6]
recs = [json.loads(l) for l in open(src) if l.strip()]
with open(tsv, "w") as f:
    f.write("run\tplan_mib\tpeak_mib\terror_pct\n")
    for r in recs:
        plan = f"{r['plan_mib']:.0f}" if "plan_mib" in r else "-"
        peak = f"{r['peak_mib']:.0f}" if r.get("peak_mib") else "-"
        err = f"{r['error_pct']:+.1f}" if "error_pct" in r else "-"
        f.write(f"{r['run']}\t{plan}\t{peak}\t{err}\n")
ok = all(abs(r.get("error_pct", 1e9)) <= 10 for r in recs)
json.dump({"schema": 1, "ranks": int(np), "backend": backend, "within_10pct": ok, "runs": recs},
          open(dst, "w"), indent=1)
print(open(tsv).read(), end="")
print("every run within 10 %:", "yes" if ok else "NO")
PY
