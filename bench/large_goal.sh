#!/usr/bin/env bash
# Issue 30 goal 1 in one call, on one GPU: config/large.yaml's step against
#   - the dense bf16 GEMM rate measured in the same call (aorta sdma, operands
#     with random mantissas, as a training step's are: on low-entropy operands
#     the same GEMM draws less power and runs ~12 % faster; bench/RESULTS.md,
#     session 20), twice: 20 GEMMs (the burst rate every session has quoted)
#     and 300 (the clock a run keeps under sustained load: session 16);
#   - PyTorch FSDP2 on the same shapes (bench/torch_attach.py --fsdp2, the
#     median of steps 5 on), where torch is installed.
# With BASE set, that aorta's runs alternate with AORTA's (a side-by-side A/B).
# Prints a table and writes $OUT/large_goal.json.
#   bench/large_goal.sh   (from the repository root)
#   env: AORTA (default build-device/aorta), BASE (optional), OUT (default ./out),
#        RUNS (aorta runs a binary, default 3), PEER_RUNS (default 2), STEPS (default 30)
set -euo pipefail
aorta=${AORTA:-build-device/aorta}
base=${BASE:-}
out=${OUT:-out}
runs=${RUNS:-3}
peer_runs=${PEER_RUNS:-2}
steps=${STEPS:-30}
for b in "$aorta" ${base:+"$base"}; do
    [ -x "$b" ] || { echo "bench/large_goal.sh: no aorta binary at $b" >&2; exit 2; }
done
[ "$steps" -gt 10 ] || { echo "bench/large_goal.sh: STEPS=$steps: large skips 10 steps" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off: it can take a shared host's GPUs down
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for n in 20 300; do
    "$aorta" sdma --backend cuda --matrix-size 8192 --dtype bf16 --copy-mb 1 --direction d2d \
        --iterations "$n" --json "$tmp/sdma_$n.json" >"$tmp/sdma_$n.log" 2>&1 ||
        { echo "aorta sdma --iterations $n failed:"; tail -5 "$tmp/sdma_$n.log"; exit 1; }
done

run() { # NAME BINARY INDEX
    local name=$1_$3
    "$2" train --backend cuda --nproc 1 --config config/large.yaml --run-name "$name" \
        --override training.output_dir="$tmp" training.max_steps="$steps" \
        scheduler.total_steps="$steps" scheduler.warmup_steps=$((steps / 4)) \
        >"$tmp/$name.log" 2>&1 || { echo "run $name failed:"; tail -5 "$tmp/$name.log"; exit 1; }
}
for i in $(seq 1 "$runs"); do
    [ -n "$base" ] && run base "$base" "$i"
    run aorta "$aorta" "$i"
done

peer=0
if python3 -c 'import torch' 2>/dev/null; then
    peer=$peer_runs
    for i in $(seq 1 "$peer_runs"); do
        python3 "$(dirname "$0")/torch_attach.py" --steps "$steps" --fsdp2 >"$tmp/peer_$i.jsonl" \
            2>"$tmp/peer_$i.err" || { echo "peer run $i failed:"; tail -5 "$tmp/peer_$i.err"; exit 1; }
    done
else
    echo "peer: not run (python3 has no torch)"
fi

python3 - "$tmp" "$out/large_goal.json" "$runs" "$peer" ${base:+base} aorta <<'PY'
import json, re, statistics, sys
tmp, dst, runs, peer = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
names = sys.argv[5:]
def rate(n):
    modes = json.load(open(f"{tmp}/sdma_{n}.json"))["modes"]
    return next(m["gemm_tflops"] for m in modes if m["mode"] == "gemm")
burst, sustained = rate(20), rate(300)
def tflop(log):
    m = re.search(r"model: ([0-9.eE+-]+) TFLOP per rank per step", open(log).read())
    return float(m.group(1))
res = {"gemm_tflops_20": burst, "gemm_tflops_300": sustained, "builds": {}}
peer_ms = []
for i in range(1, peer + 1):
    s = [json.loads(l)["step_ms"] for l in open(f"{tmp}/peer_{i}.jsonl")
         if l.startswith("{") and '"step"' in l]
    peer_ms.append(statistics.median(s[5:]))
peer_mean = statistics.mean(peer_ms) if peer_ms else None
res["peer_step_ms"] = peer_ms
print(f"GEMM rate (8192^3 bf16): {burst:.1f} TFLOP/s over 20 GEMMs, {sustained:.1f} over 300")
print(f"{'build':8} {'step medians (ms)':28} {'mean':>7} {'TFLOP/s':>8} {'of 20':>7} "
      f"{'of 300':>7} {'/ FSDP2':>8}")
for name in names:
    med = [json.load(open(f"{tmp}/{name}_{i}/summary.json"))["summary"]["metrics"]["step_ms"]
           ["median"] for i in range(1, runs + 1)]
    mean = statistics.mean(med)
    tf = tflop(f"{tmp}/{name}_1.log") / (mean * 1e-3)
    ratio = mean / peer_mean if peer_mean else None
    res["builds"][name] = {"step_ms_medians": med, "step_ms_mean": mean, "tflops": tf,
                           "of_gemm_20": tf / burst, "of_gemm_300": tf / sustained,
                           "over_fsdp2": ratio}
    print(f"{name:8} {', '.join(f'{m:.2f}' for m in med):28} {mean:7.2f} {tf:8.1f} "
          f"{100 * tf / burst:6.1f}% {100 * tf / sustained:6.1f}% "
          + (f"{ratio:8.3f}" if ratio else f"{'-':>8}"))
if peer_ms:
    print("FSDP2 step medians (ms): " + ", ".join(f"{m:.2f}" for m in peer_ms))
print("goal 1: <= 0.70 x FSDP2 and >= 58 % of the GEMM rate (quoted: 20 GEMMs)")
json.dump(res, open(dst, "w"), indent=1)
PY
