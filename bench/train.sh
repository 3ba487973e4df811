#!/usr/bin/env bash
# GPU benchmark of `aorta train`: each run of a matrix, its summary table, and
# one line per run in train.tsv (median/p90 step, tokens/s, achieved TFLOP/s per
# GPU from the model's analytic count at the median step, compute, comm,
# overlap ratio, exposed comm, idle, and the decomposition when baselines ran).
#   train.tsv            the table printed last
#   train/NAME.log       each run's stdout (rank 0) and summary.json
# Usage: bench/train.sh [MATRIX]   MATRIX = smoke | engine | scaling | trace | single | hold | host | idle | timing | prefetch | kernels
#   (default smoke)
#   env: AORTA=path/to/aorta (default build-device/aorta); OUT=dir (default ./out);
#        NPROC=ranks (default every visible GPU); STEPS=steps per run (default per matrix);
#        EXTRA="key=value ..." overrides added to every run, SUFFIX appended to its name
set -euo pipefail
aorta=${AORTA:-build-device/aorta}
out=${OUT:-out}
matrix=${1:-smoke}
suffix=${SUFFIX:-}
[ -x "$aorta" ] || { echo "bench/train.sh: no aorta binary at $aorta (make device-build)" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off: it can take a shared host's GPUs down
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
nproc=${NPROC:-${ngpu:-1}}
[ "$nproc" -ge 1 ] || nproc=1
mkdir -p "$out/train"
runs_dir=$(mktemp -d)
trap 'rm -rf "$runs_dir"' EXIT
tsv="$out/train.tsv"
[ -s "$tsv" ] || printf 'run\tranks\tstep_med_ms\tstep_p90_ms\ttokens_s\ttflops_gpu\tcompute_ms\tcomm_ms\toverlap_ratio\texposed_ms\tidle_ms\tideal_ms\tachieved\trc\n' >"$tsv"

# one NAME CONFIG NPROC STEPS [override ...]
one() {
    local name=$1$suffix config=$2 np=$3 steps=$4
    shift 4
    # shellcheck disable=SC2086 # EXTRA is a list of overrides
    set -- "$@" ${EXTRA:-}
    local log="$out/train/$name.log" rc=0
    echo "+ aorta train $name: $config x$np, $steps steps, $*"
    timeout 240 "$aorta" train --backend cuda --nproc "$np" --config "$config" --run-name "$name" \
        --override training.output_dir="$runs_dir" training.max_steps="$steps" \
        scheduler.total_steps="$steps" scheduler.warmup_steps=$((steps / 4)) "$@" >"$log" 2>&1 ||
        rc=$?
    tail -n 24 "$log"
    [ -f "$runs_dir/$name/summary.json" ] && cp "$runs_dir/$name/summary.json" "$out/train/$name.summary.json"
    # The summary table: "  step_ms   median mean p90 p99 unit" (rank 0's prefix first).
    awk -v name="$name" -v np="$np" -v rc="$rc" '
        { sub(/^\[rank [0-9]+\] /, "") }
        $1 == "model:" { fl = $2 }
        $1 == "step_ms" { sm = $2; sp = $4 }
        $1 == "tokens_per_s" { tk = $2 }
        $1 == "compute_ms" { c = $2 }
        $1 == "comm_ms" { m = $2 }
        $1 == "overlap_ratio" { r = $2 }
        $1 == "exposed_comm_ms" { e = $2 }
        $1 == "idle_ms" { i = $2 }
        /decomposition:/ { for (k = 1; k <= NF; k++) {
            if ($k == "ideal") id = $(k + 1)
            if ($k == "achieved") ac = $(k + 1) } }
        END { gsub(/,/, "", ac)
              tf = fl && sm ? sprintf("%.1f", fl / (sm / 1e3)) : "-"
              printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, np,
                  sm ? sm : "-", sp ? sp : "-", tk ? tk : "-", tf, c ? c : "-", m ? m : "-",
                  r ? r : "-", e ? e : "-", i ? i : "-", id ? id : "-", ac ? ac : "-", rc }' \
        "$log" >>"$tsv"
}

d=config/default.yaml
l=config/large.yaml
case $matrix in
smoke)
    one default_fs "$d" "$nproc" "${STEPS:-40}"
    one large_fs "$l" "$nproc" "${STEPS:-30}" training.baseline_steps=4
    one large_fs_notiming "$l" "$nproc" "${STEPS:-30}" profiling.timing=false
    ;;
engine)
    # Every strategy, prefetch on and off, timing on and off (issue: the engine).
    for c in default large; do
        cfg=config/$c.yaml
        s=${STEPS:-40}
        for strat in full_shard shard_grad_op no_shard; do
            one "${c}_${strat}" "$cfg" "$nproc" "$s" fsdp.sharding_strategy=$strat training.baseline_steps=5
        done
        one "${c}_ddp" "$cfg" "$nproc" "$s" distributed.mode=ddp training.baseline_steps=5
        one "${c}_fs_noprefetch" "$cfg" "$nproc" "$s" fsdp.forward_prefetch=false \
            fsdp.backward_prefetch=NONE training.baseline_steps=5
        one "${c}_fs_notiming" "$cfg" "$nproc" "$s" profiling.timing=false
    done
    # Data generated on the device: no host loader in the step (as PyTorch's
    # numbers with data already on the device).
    one default_fs_devdata "$d" "$nproc" "${STEPS:-40}" dataset.placement=device training.baseline_steps=5
    ;;
scaling)
    # full_shard at 2 ranks and at every visible GPU (scaling efficiency is
    # relative to 2), hybrid groups where they fit.
    s=${STEPS:-30}
    [ "$nproc" -gt 2 ] && one large_fs_x2 "$l" 2 "$s" training.baseline_steps=4
    [ "$nproc" -gt 4 ] && one large_fs_x4 "$l" 4 "$s" training.baseline_steps=4
    one "large_fs_x$nproc" "$l" "$nproc" "$s" training.baseline_steps=4
    if [ "$nproc" -ge 4 ]; then
        one "large_hybrid2_x$nproc" "$l" "$nproc" "$s" fsdp.sharding_strategy=hybrid_shard \
            fsdp.shard_group_size=2 training.baseline_steps=4
    fi
    if [ "$nproc" -ge 8 ]; then
        one "large_hybrid4_x$nproc" "$l" "$nproc" "$s" fsdp.sharding_strategy=hybrid_shard \
            fsdp.shard_group_size=4 training.baseline_steps=4
    fi
    ;;
hold)
    # What holding a collective's stream until it is enqueued costs (device.h,
    # ao_stream_hold), on the host-bound default config, against holds off
    # and timing off.
    for np in 1 "$nproc"; do
        one "default_x${np}" "$d" "$np" "${STEPS:-40}" dataset.placement=device
        export AORTA_STREAM_HOLD=0
        one "default_x${np}_nohold" "$d" "$np" "${STEPS:-40}" dataset.placement=device
        unset AORTA_STREAM_HOLD
        one "default_x${np}_notiming" "$d" "$np" "${STEPS:-40}" dataset.placement=device \
            profiling.timing=false
    done
    ;;
single)
    # One GPU, no communication (the model issue's benchmark), beside the
    # dense bf16 GEMM rate of the same GPU in the same visit.
    "$aorta" sdma --backend cuda --matrix-size 8192 --dtype bf16 --copy-mb 1 --direction d2d \
        --iterations 20 2>&1 | tee "$out/train/gemm_rate.txt" | grep -E '^# aorta|gemm '
    one default_1gpu "$d" 1 "${STEPS:-40}" dataset.placement=device
    one large_1gpu "$l" 1 "${STEPS:-30}"
    ;;
trace)
    # Event timeline against CUPTI kernels (profiling.kernel_trace), per
    # iteration, and where the time goes kernel by kernel (2 profiled steps).
    for c in ${CONFIGS:-large default}; do
        one "${c}_trace" "config/$c.yaml" "$nproc" "${STEPS:-16}" profiling.kernel_trace=true \
            profiling.enabled=true profiling.skip_first=0 profiling.wait=12 profiling.warmup=0 profiling.active=2 \
            profiling.repeat=1 profiling.chrome_trace=true
        r=${c}_trace$suffix
        if [ -d "$runs_dir/$r" ]; then
            python3 "$(dirname "$0")/kernel_check.py" "$runs_dir/$r" 40 | tee "$out/train/${r}_kernels.txt"
            python3 "$(dirname "$0")/overlap_gaps.py" "$runs_dir/$r" 25 | tee "$out/train/${r}_gaps.txt"
            cp "$runs_dir/$r/trace.json" "$out/train/$r.trace.json" 2>/dev/null || true
            cp "$runs_dir/$r/rank_00_metrics.jsonl" "$out/train/$r.rank_00_metrics.jsonl" 2>/dev/null || true
        fi
    done
    ;;
host)
    # Where the host thread's time goes on the host-bound default config, and
    # what timing costs it: bench/api_cost's per-call prices, then each run
    # with timing on and off, then the timed one again sampled by
    # bench/hostprof (train/hostprof/NAME.<pid>; bench/hostprof/report.py
    # reads them; its signals slow the run, so that run is not the timing
    # comparison's).
    bin=$(dirname "$aorta")/bench
    "$bin/api_cost" --backend cuda --json "$out/train/api_cost.json" | tee "$out/train/api_cost.txt"
    mkdir -p "$out/train/hostprof"
    cp "$aorta" "$out/train/hostprof/" # report.py names functions from this binary
    for np in 1 "$nproc"; do
        one "default_x${np}" "$d" "$np" "${STEPS:-200}" dataset.placement=device
        one "default_x${np}_notiming" "$d" "$np" "${STEPS:-200}" dataset.placement=device \
            profiling.timing=false
        HOSTPROF_OUT="$out/train/hostprof/default_x${np}" LD_PRELOAD="$bin/libhostprof.so" \
            one "default_x${np}_sampled" "$d" "$np" "${STEPS:-200}" dataset.placement=device
    done
    ;;
idle)
    # Where the default step's idle time goes, op boundary by op boundary
    # (bench/idle_gaps.py over 20 steps of per-op intervals), beside what the
    # records at an op boundary cost the device (bench/api_cost's device table).
    bin=$(dirname "$aorta")/bench
    timeout 120 "$bin/api_cost" --backend cuda --calls 2000 --json "$out/train/api_cost.json" |
        tee "$out/train/api_cost.txt" || true
    for np in 1 "$nproc"; do
        r=default_idle_x$np
        one "$r" "$d" "$np" "${STEPS:-200}" dataset.placement=device profiling.enabled=true \
            profiling.skip_first=0 profiling.wait=150 profiling.warmup=0 profiling.active=20 profiling.repeat=1
        [ -d "$runs_dir/$r$suffix" ] &&
            python3 "$(dirname "$0")/idle_gaps.py" "$runs_dir/$r$suffix" 15 | tee "$out/train/$r${suffix}_gaps.txt"
    done
    ;;
timing)
    # What timing costs (profiling.timing on against off), each pair run twice
    # in turn, since one pair of the host-bound default config moves by a few
    # %: default on 1 GPU and on every GPU (200 steps), then large full_shard
    # (80 steps, baselines for step / ideal).
    for round in 1 2; do
        for np in 1 "$nproc"; do
            one "default_x${np}_on$round" "$d" "$np" "${STEPS:-200}" dataset.placement=device
            one "default_x${np}_off$round" "$d" "$np" "${STEPS:-200}" dataset.placement=device \
                profiling.timing=false
        done
    done
    one large_on "$l" "$nproc" 80 training.baseline_steps=6
    one large_off "$l" "$nproc" 80 profiling.timing=false
    ;;
kernels)
    # Why aorta's own kernels of the large step take what they take: Nsight
    # Compute (clocks left alone) over one training step's worth of them on
    # one GPU, after the first step; bench/ncu_table.py prints, per kernel,
    # duration, DRAM and SM throughput, occupancy and registers.
    command -v ncu >/dev/null 2>&1 || {
        echo "bench/train.sh kernels: ncu (Nsight Compute) is not on PATH" >&2
        exit 2
    }
    rk=$runs_dir/ncu
    timeout 240 ncu --clock-control none --kernel-name-base function \
        --kernel-name "regex:softmax|dropout|layernorm|cast_|column_partials|adamw|map_kernel|teacher|sum_squares|embedding|bce_" \
        --launch-skip 260 --launch-count 150 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        -f -o "$rk.report" \
        "$aorta" train --backend cuda --nproc 1 --config "$l" --run-name ncu \
        --override training.output_dir="$rk" training.max_steps=4 training.summary_skip_steps=1 \
        scheduler.total_steps=4 scheduler.warmup_steps=1 >"$out/train/large_ncu.log" 2>&1 || true
    ncu --import "$rk.report.ncu-rep" --csv --page details >"$out/train/large_ncu.csv" \
        2>>"$out/train/large_ncu.log" || true
    python3 "$(dirname "$0")/ncu_table.py" "$out/train/large_ncu.csv" | tee "$out/train/large_ncu.txt"
    ;;
prefetch)
    # Prefetch on against off, with data generated on the device (the host
    # loader's noise on default is larger than the difference).
    for c in default large; do
        one "${c}_prefetch" "config/$c.yaml" "$nproc" "${STEPS:-40}" dataset.placement=device \
            training.baseline_steps=5
        one "${c}_noprefetch" "config/$c.yaml" "$nproc" "${STEPS:-40}" dataset.placement=device \
            fsdp.forward_prefetch=false fsdp.backward_prefetch=NONE training.baseline_steps=5
    done
    ;;
*)
    echo "bench/train.sh: unknown matrix '$matrix' (smoke, engine, scaling, trace, single, hold, host, idle, timing, prefetch, kernels)" >&2
    exit 2
    ;;
esac
echo
column -t -s $'\t' "$tsv" 2>/dev/null || cat "$tsv"
