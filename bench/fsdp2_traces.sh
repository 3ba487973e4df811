#!/usr/bin/env bash
# Records real PyTorch FSDP2 Kineto traces with known faults, for checking the
# cross-rank analysis and the diagnosis (issue 45): bench/torch_attach.py
# --fsdp2 (config/large.yaml's shapes) under torchrun, steps 4..6 profiled.
#   healthy2   2 ranks, no fault
#   late2      2 ranks, rank 1's host sleeps LATE_MS before each step
#   slow2      2 ranks, rank 0 runs SLOW_GEMMS extra 4096^2 GEMMs a step
#   healthy4   4 ranks, no fault
#   late4      4 ranks, rank 2's host sleeps LATE_MS before each step
# Writes $OUT/fsdp2_traces.tar (NAME/rankN.json.gz) and prints each run's steps.
#   bash bench/fsdp2_traces.sh   (on a machine with 4 GPUs and torch)
#   env: OUT (default ./out), LATE_MS (default 40), SLOW_GEMMS (default 40), CASES
set -euo pipefail
out=${OUT:-out}
late=${LATE_MS:-40}
slow=${SLOW_GEMMS:-40}
read -r -a cases <<<"${CASES:-healthy2 late2 slow2 healthy4 late4}"
here=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off: it can take a shared host's GPUs down
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in "${cases[@]}"; do
    case $c in
    healthy2) n=2 fault=() ;;
    late2) n=2 fault=(--late-rank 1 --late-ms "$late") ;;
    slow2) n=2 fault=(--slow-rank 0 --slow-gemms "$slow") ;;
    healthy4) n=4 fault=() ;;
    late4) n=4 fault=(--late-rank 2 --late-ms "$late") ;;
    *) echo "bench/fsdp2_traces.sh: unknown case $c" >&2; exit 2 ;;
    esac
    mkdir -p "$tmp/$c"
    echo "== $c: $n ranks ${fault[*]}"
    python3 -m torch.distributed.run --standalone --nproc_per_node "$n" "$here/torch_attach.py" \
        --fsdp2 --steps 8 --profile 4:7 --trace "$tmp/$c/rank.json" "${fault[@]}" \
        >"$tmp/$c/stdout" 2>"$tmp/$c/stderr" || { tail -20 "$tmp/$c/stderr"; exit 1; }
    grep '"step"' "$tmp/$c/stdout" | tr '\n' ' '
    echo
    for f in "$tmp/$c"/rank_rank*.json; do
        gzip -c "$f" >"$tmp/$c/$(basename "$f" | sed 's/^rank_//').gz"
        rm "$f"
    done
    rm "$tmp/$c/stdout" "$tmp/$c/stderr"
done
tar -C "$tmp" -cf "$out/fsdp2_traces.tar" "${cases[@]}"
ls -la "$out/fsdp2_traces.tar"
