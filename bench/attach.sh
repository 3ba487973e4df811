#!/usr/bin/env bash
# aorta attach on 1, 2 or 4 GPUs: overhead and agreement, rank by rank
# (bench/RESULTS.md).
#   train   `aorta train --config config/large.yaml [--nproc N]` alone, under
#           attach, and alone again: each rank's step time with and without
#           attach (limit 1 %), and each rank's attach steps against that
#           rank's own event values, step by step (step, compute, comm and
#           overlap within 5 %, exposed comm within 0.2 ms); on one GPU also
#           a profiling.kernel_trace=true run's medians.
#   torch   bench/torch_attach.py (the same model in PyTorch; FSDP2 under
#           torchrun when NPROC > 1) alone, under attach, and alone again:
#           step time (limit 1 %), losses, every rank's attach steps; then
#           under attach with torch.profiler on steps PROF (a Kineto trace a
#           rank), `aorta analyze` of those traces, and each rank's attach
#           medians of the same steps of the unprofiled run against it (5 %).
# Each attached run's processes are listed (run.json's attach.processes):
# rank 0 must be there, with steps. The last table holds every criterion and
# its verdict; every table's JSON is in the output directory.
# Usage: bench/attach.sh [train|torch|all]   env: AORTA (default build-device/aorta),
#        OUT (default out/attach; each call writes a fresh OUT/nN-TIME), STEPS (default 40),
#        PY (default python3), NPROC (default 1), FSDP2 (default 1 when NPROC > 1),
#        PROF (default 10:16, the profiled steps A:B)
set -euo pipefail
aorta=${AORTA:-build-device/aorta}
steps=${STEPS:-40}
py=${PY:-python3}
nproc=${NPROC:-1}
fsdp2=${FSDP2:-$([ "$nproc" -gt 1 ] && echo 1 || echo 0)}
prof=${PROF:-10:16}
what=${1:-all}
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-out/attach}/n$nproc-$(date +%Y%m%dT%H%M%S)
cmp=("$py" "$here/attach_compare.py")
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
stamp "$nproc GPU(s), $steps steps, output in $out"

train_part() {
    local args=(--config config/large.yaml --override training.max_steps="$steps"
        scheduler.total_steps="$steps" scheduler.warmup_steps=$((steps / 4))
        training.output_dir="$out")
    local n=()
    [ "$nproc" -gt 1 ] && n=(--nproc "$nproc")
    stamp "aorta train ${n[*]}, alone"
    "$aorta" train "${n[@]}" --run-name train-plain "${args[@]}" >"$out/train-plain.log" 2>&1
    stamp "aorta train ${n[*]}, under aorta attach"
    "$aorta" attach --output "$out" --run-name attach-train -- \
        "$aorta" train "${n[@]}" --run-name train-attached "${args[@]}" \
        >"$out/train-attached.log" 2>&1
    stamp "aorta train ${n[*]}, alone again (the run-to-run spread)"
    "$aorta" train "${n[@]}" --run-name train-plain2 "${args[@]}" >"$out/train-plain2.log" 2>&1
    local kt=()
    if [ "$nproc" = 1 ]; then
        stamp "aorta train, profiling.kernel_trace=true"
        "$aorta" train --run-name train-ktrace "${args[@]}" profiling.kernel_trace=true \
            >"$out/train-ktrace.log" 2>&1
        kt=(--ktrace "$out/train-ktrace")
    fi
    stamp "compare"
    "${cmp[@]}" processes "$out/attach-train" --json "$out/train-processes.json"
    grep "aorta: .*attach" "$out/train-attached.log" || true
    "${cmp[@]}" train "$out/attach-train" "$out/train-attached" "${kt[@]}" --skip 10 \
        --json "$out/train-compare.json"
    "${cmp[@]}" overhead "$out/train-plain" "$out/train-attached" "$out/train-plain2" \
        --skip 10 --json "$out/train-overhead.json"
}

torch_part() {
    if ! "$py" -c 'import torch' 2>/dev/null; then
        echo "bench/attach.sh: $py has no torch; skipping the PyTorch runs" >&2
        return 0
    fi
    local pyexe launch script a b
    pyexe=$(command -v "$py")
    launch=("$pyexe")
    [ "$nproc" -gt 1 ] &&
        launch=("$pyexe" -m torch.distributed.run --standalone --nproc_per_node "$nproc")
    script=("$here/torch_attach.py")
    [ "$fsdp2" = 1 ] && script+=(--fsdp2)
    a=${prof%:*} b=${prof#*:}
    stamp "torch ${script[*]:1}, alone"
    "${launch[@]}" "${script[@]}" --steps "$steps" >"$out/torch-plain.out" 2>"$out/torch-plain.err"
    stamp "torch, under aorta attach"
    "$aorta" attach --output "$out" --run-name attach-torch -- \
        "${launch[@]}" "${script[@]}" --steps "$steps" \
        >"$out/torch-attach.out" 2>"$out/torch-attach.err"
    stamp "torch, alone again (the script's own run-to-run spread)"
    "${launch[@]}" "${script[@]}" --steps "$steps" >"$out/torch-plain2.out" 2>"$out/torch-plain2.err"
    stamp "torch, under aorta attach, torch.profiler on steps $a..$((b - 1))"
    "$aorta" attach --output "$out" --run-name attach-torch-prof -- \
        "${launch[@]}" "${script[@]}" --steps $((b + 4)) --profile "$prof" \
        --trace "$out/torch-kineto.json" >"$out/torch-prof.out" 2>"$out/torch-prof.err" || true
    stamp "compare"
    "${cmp[@]}" processes "$out/attach-torch" --json "$out/torch-processes.json"
    grep "aorta: .*attach" "$out/torch-attach.err" || true
    "${cmp[@]}" torch "$out/torch-plain.out" "$out/torch-attach.out" "$out/attach-torch" \
        "$out/torch-plain2.out" --skip 5 --world "$nproc" --json "$out/torch-compare.json"
    grep profiler_cuda_kernels "$out/torch-prof.out" || echo "no profiler line"
    local traces=("$out"/torch-kineto*.json)
    if [ -s "${traces[0]}" ]; then
        stamp "aorta analyze of the profiler's Kineto traces (${#traces[@]})"
        if "$aorta" analyze "${traces[@]}" --step '^step$' --output "$out" \
            --run-name analyze-kineto >"$out/analyze.log" 2>&1; then
            "${cmp[@]}" kineto "$out/attach-torch" "$out/analyze-kineto" --steps "$prof" \
                --profiled "$out/attach-torch-prof" --skip 5 --json "$out/kineto-compare.json"
        else
            tail -5 "$out/analyze.log"
        fi
    else
        echo "no Kineto trace"
        tail -5 "$out/torch-prof.err"
    fi
    grep -h "aorta" "$out/torch-prof.err" | head -8 || true
}

case $what in
train) train_part ;;
torch) torch_part ;;
all)
    train_part
    torch_part
    ;;
*)
    echo "usage: bench/attach.sh [train|torch|all]" >&2
    exit 2
    ;;
esac
"${cmp[@]}" summary "$out"/*-processes.json "$out"/*-compare.json "$out"/*-overhead.json \
    --json "$out/attach-bench.json"
stamp finished
