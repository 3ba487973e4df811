#!/usr/bin/env bash
# GPU matrix of planted faults for `aorta diagnose` (DESIGN §13): one known
# problem a run, the top finding of each, and whether it names the cause;
# then `aorta plan` against each run's measured peak (mem_peak_mb).
#   diagnose.tsv          run, expected, top finding, its first knob, share, bound, verdict,
#                         plan total vs measured peak (MiB)
#   diagnose/NAME.txt     each run's full diagnosis; NAME.json the same as JSON
# Usage: bench/diagnose.sh [CONFIG]   (default config/default.yaml)
#   env: AORTA=path/to/aorta (default build-device/aorta); OUT=dir (default ./out);
#        NPROC=ranks for the multi-rank cases (default every visible GPU, at least 2
#        for the collective cases); STEPS (default 30)
# The seed's default config with host data and 4 workers against device data is the
# input case of issue 26: data_wait_ms should account for the step difference.
set -euo pipefail
aorta=${AORTA:-build-device/aorta}
out=${OUT:-out}
config=${1:-config/default.yaml}
steps=${STEPS:-30}
[ -x "$aorta" ] || { echo "bench/diagnose.sh: no aorta binary at $aorta (make device-build)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench/diagnose.sh: needs python3" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off: it can take a shared host's GPUs down
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
np=${NPROC:-${ngpu:-1}}
[ "$np" -ge 1 ] || np=1
mkdir -p "$out/diagnose"
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
tsv="$out/diagnose.tsv"
printf 'run\tranks\texpected\ttop\tfirst_knob\tshare\tbound\tverdict\tplan_mib\tpeak_mib\n' >"$tsv"
# six profiled steps: a late rank's window reaches into the step before, which
# the collectives' cause needs profiled too (DESIGN §14)
prof=(profiling.enabled=true profiling.wait=5 profiling.warmup=1 profiling.active=6 profiling.repeat=0)

# case NAME NPROC EXPECTED-ID EXPECTED-KNOB [override ...]  (env via ENV="K=V ...")
case_() {
    local name=$1 n=$2 want=$3 knob=$4
    shift 4
    echo "+ $name: $n rank(s), expect $want ($knob): $*"
    # shellcheck disable=SC2086 # ENV is a list of assignments
    env ${ENV:-} timeout 300 "$aorta" train --backend cuda --nproc "$n" --config "$config" \
        --run-name "$name" --override training.output_dir="$runs" training.max_steps="$steps" \
        training.summary_skip_steps=5 "${prof[@]}" "$@" >"$out/diagnose/$name.train.log" 2>&1 ||
        echo "  train exited $?"
    "$aorta" diagnose "$runs/$name" >"$out/diagnose/$name.txt" 2>&1 || true
    "$aorta" diagnose --json "$runs/$name" >"$out/diagnose/$name.json" 2>/dev/null || true
    "$aorta" plan --backend cuda --nproc "$n" --config "$config" --json --override "$@" \
        >"$out/diagnose/$name.plan.json" 2>/dev/null || true
    sed -n 1,12p "$out/diagnose/$name.txt"
    python3 - "$name" "$n" "$want" "$knob" "$out/diagnose/$name.json" "$out/diagnose/$name.plan.json" \
        "$runs/$name" "$@" >>"$tsv" <<'PY' || true
import glob, json, sys
name, n, want, knob, dj, pj, run = sys.argv[1:8]
ov = dict(a.split("=", 1) for a in sys.argv[8:] if "=" in a)
try:
    d = json.load(open(dj))["runs"][0]
except Exception:
    print(f"{name}\t{n}\t{want}\t-\t-\t-\t-\tno diagnosis\t-\t-")
    sys.exit()
f = d["findings"]
top = f[0]["id"] if f else "none"
cause = f"({f[0]['cause']}, rank {f[0]['rank']})" if f and f[0].get("cause") else ""
k = f[0]["knobs"].split("; ")[0][:60] if f else "-"
share = f"{f[0]['share']:.2f}" if f else "-"
ok = ((top == want or (want.endswith("_") and top.startswith(want))) and knob in (f[0]["knobs"].split("; ")[0] if f else "")) if want != "none" \
    else not [x for x in f if x["share"] > 0.05]
peak = max((max(json.loads(l).get("mem_peak_mb") or 0 for l in open(p))
            for p in glob.glob(run + "/rank_*_metrics.jsonl")), default=0)
plan = "-"
try:
    strat = "ddp" if ov.get("distributed.mode") == "ddp" else ov.get("fsdp.sharding_strategy", "full_shard")
    for p in json.load(open(pj))["plans"]:
        if p["strategy"] == strat and p["precision"] == "bf16" and p["gradient_accumulation"] == 1:
            plan = f"{p['total'] / 1048576:.0f}"
except Exception:
    pass
print(f"{name}\t{n}\t{want}\t{top}{cause}\t{k}\t{share}\t{d['bound']}\t{'ok' if ok else 'MISSED'}\t{plan}\t{peak:.0f}")
PY
}

multi=$np
[ "$multi" -ge 2 ] || { echo "(one GPU: the collective cases run on 1 rank, in place)"; }
# healthy, then one fault each
case_ healthy "$multi" none - dataset.placement=device
case_ host_data_4w 1 input_wait dataloader.num_workers dataset.placement=host dataloader.num_workers=4
case_ host_data_1w 1 input_wait dataloader.num_workers dataset.placement=host dataloader.num_workers=1
case_ device_data 1 none - dataset.placement=device
case_ noprefetch "$multi" exposed_allgather _prefetch dataset.placement=device \
    fsdp.forward_prefetch=false fsdp.backward_prefetch=NONE
case_ limit1 "$multi" exposed_allgather fsdp.limit_all_gathers dataset.placement=device \
    fsdp.limit_all_gathers=1
case_ buckets "$multi" exposed_allreduce distributed.bucket_cap_mb dataset.placement=device \
    distributed.mode=ddp distributed.bucket_cap_mb=0.01
# one rank slow on its device, one rank's host late: the others wait for it at
# collectives (late_rank; its cause compute, host_wait)
ENV="AORTA_TEST_SLOW_RANK=1:50" case_ slow_rank "$multi" late_rank AORTA_TEST_SLOW_RANK \
    dataset.placement=device
ENV="AORTA_TEST_LATE_HOST=1:50" case_ late_host "$multi" late_rank AORTA_TEST_LATE_HOST \
    dataset.placement=device
ENV="CUDA_DEVICE_MAX_CONNECTIONS=1" case_ one_queue "$multi" exposed_ CUDA_DEVICE_MAX_CONNECTIONS \
    dataset.placement=device
echo
# the GPU machine has no column(1)
awk -F'\t' '{ printf "%-13s %-5s %-17s %-28s %-6s %-22s %s\n", $1, $2, $3, substr($4, 1, 28), $6, $7, $8 }' "$tsv"
