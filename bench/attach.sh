#!/usr/bin/env bash
# aorta attach on one GPU: overhead and agreement (bench/RESULTS.md).
#   train   `aorta train --config config/large.yaml` alone, under attach, and
#           with profiling.kernel_trace=true: step time with and without
#           attach, attach's per-step comm/compute/overlap against the run's
#           own event values, and medians against the kernel trace's.
#   torch   bench/torch_attach.py (the same model in PyTorch) alone and under
#           attach: step time, losses; then under attach with torch.profiler
#           recording steps 10..12: the profiler's kernels and attach's unseen
#           steps. With NPROC=2 the script runs under torchrun.
# Usage: bench/attach.sh [train|torch|all]   env: AORTA (default build-device/aorta),
#        OUT (default out/attach), STEPS (default 40), PY (default python3), NPROC (1)
set -euo pipefail
aorta=${AORTA:-build-device/aorta}
out=${OUT:-out/attach}
steps=${STEPS:-40}
py=${PY:-python3}
nproc=${NPROC:-1}
what=${1:-all}
here=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }

if [ "$what" = train ] || [ "$what" = all ]; then
    train() { # NAME [override ...]
        local name=$1
        shift
        "$aorta" train --run-name "$name" --config config/large.yaml --override \
            training.max_steps="$steps" scheduler.total_steps="$steps" \
            scheduler.warmup_steps=$((steps / 4)) training.output_dir="$out" "$@"
    }
    stamp "aorta train, alone"
    train train-plain >"$out/train-plain.log" 2>&1
    stamp "aorta train, under aorta attach"
    "$aorta" attach --output "$out" --run-name attach-train -- \
        "$aorta" train --run-name train-attached --config config/large.yaml --override \
        training.max_steps="$steps" scheduler.total_steps="$steps" \
        scheduler.warmup_steps=$((steps / 4)) training.output_dir="$out" \
        >"$out/train-attached.log" 2>&1
    stamp "aorta train, profiling.kernel_trace=true"
    train train-ktrace profiling.kernel_trace=true >"$out/train-ktrace.log" 2>&1
    stamp "compare"
    "$py" "$here/attach_compare.py" train "$out/attach-train" "$out/train-attached" \
        "$out/train-ktrace" --skip 10 | tee "$out/train-compare.json"
    "$py" - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def med(run):
    return statistics.median(json.loads(l)["step_ms"] for l in open(f"{out}/{run}/rank_00_metrics.jsonl") if json.loads(l)["step"] >= 10)
p, a = med("train-plain"), med("train-attached")
print(json.dumps({"train_plain_step_ms": p, "train_attached_step_ms": a, "overhead_pct": (a - p) / p * 100}))
PY
fi

if [ "$what" = torch ] || [ "$what" = all ]; then
    if ! "$py" -c 'import torch' 2>/dev/null; then
        echo "bench/attach.sh: $py has no torch; skipping the PyTorch runs" >&2
        exit 0
    fi
    pyexe=$(command -v "$py")
    launch=("$pyexe")
    [ "$nproc" -gt 1 ] && launch=("$pyexe" -m torch.distributed.run --standalone --nproc_per_node "$nproc")
    stamp "torch, alone"
    "${launch[@]}" "$here/torch_attach.py" --steps "$steps" >"$out/torch-plain.out" 2>"$out/torch-plain.err"
    stamp "torch, under aorta attach"
    "$aorta" attach --output "$out" --run-name attach-torch -- \
        "${launch[@]}" "$here/torch_attach.py" --steps "$steps" \
        >"$out/torch-attach.out" 2>"$out/torch-attach.err"
    stamp "torch, alone again (the script's own run-to-run spread)"
    "${launch[@]}" "$here/torch_attach.py" --steps "$steps" >"$out/torch-plain2.out" 2>"$out/torch-plain2.err"
    stamp "torch, under aorta attach, torch.profiler on steps 10..12"
    "$aorta" attach --output "$out" --run-name attach-torch-prof -- \
        "${launch[@]}" "$here/torch_attach.py" --steps 16 --profile 10:13 \
        --trace "$out/torch-kineto.json" >"$out/torch-prof.out" 2>"$out/torch-prof.err" || true
    stamp "compare"
    "$py" "$here/attach_compare.py" torch "$out/torch-plain.out" "$out/torch-attach.out" \
        "$out/attach-torch" "$out/torch-plain2.out" --skip 5 | tee "$out/torch-compare.json"
    grep profiler_cuda_kernels "$out/torch-prof.out" || echo "no profiler line"
    if [ -s "$out/torch-kineto.json" ]; then
        stamp "aorta analyze of the profiler's Kineto trace"
        "$aorta" analyze "$out/torch-kineto.json" --step '^step$' --output "$out" \
            --run-name analyze-kineto >"$out/analyze.log" 2>&1 &&
            "$py" "$here/attach_compare.py" kineto "$out/attach-torch-prof" \
                "$out/analyze-kineto" --skip 3 | tee "$out/kineto-compare.json"
    fi
    cat "$out/attach-torch-prof/rank_00_attach.json" 2>/dev/null || tail -5 "$out/torch-prof.err"
    grep -h "aorta" "$out/torch-prof.err" | head -5 || true
fi
stamp finished
