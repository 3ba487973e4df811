#!/usr/bin/env bash
# The inter-node path (issue 52), in one call on a 4-GPU machine:
#   1. bench/hold_probe: whether allocating pinned host memory (what NCCL's
#      network transport does on a communicator's first use) waits for a
#      stream the host holds, the mechanism of issue 52's hang (DESIGN §4);
#   2. config/large.yaml under full_shard, hybrid_shard 2x2 and ddp, on NVLink
#      and on an emulated network of two nodes of two GPUs (scripts/emulate-
#      nodes.sh: NCCL's network transport between the nodes, NVLink inside
#      one), and full_shard with every communicator on the network (NCCL_P2P_
#      DISABLE=1 NCCL_SHM_DISABLE=1: the run that hung in issue 52);
#   3. aorta coll against NCCL's own numbers on the same transports, measured
#      the way nccl-tests measures them through torch's NCCL process group
#      (bench/nccl_ref.py; nccl-tests is not installed there);
#   4. aorta diagnose on every run: on the slow link communication must be the
#      bound it names, and hybrid_shard's gain over full_shard is measured.
# Prints a table and checks, writes
#   internode.json    every run's step time, comm, exposed comm, bound, top
#                     finding, transports seen; the coll rows; the checks
#   internode/        each run's train log, diagnosis and coll tables
# Usage: bench/internode.sh
#   env: AORTA (default build-device/aorta), OUT (default ./out), STEPS (12),
#        CONFIG (config/large.yaml), PARTS ("probe train coll"), PYTHON (python3),
#        TORCHRUN (torchrun), NET (NCCL_NET between the emulated nodes, default
#        Socket: the TCP transport, as the lent machines have no other).
#   Parts run in separate calls add up: PARTS="probe train" then PARTS=coll
#   leaves the same internode.json as one call (each call appends to the log).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
aorta=${AORTA:-build-device/aorta}
out=${OUT:-out}
steps=${STEPS:-12}
config=${CONFIG:-config/large.yaml}
parts=${PARTS:-probe train coll}
python=${PYTHON:-python3}
torchrun=${TORCHRUN:-torchrun}
wrap=()
[ -x "$aorta" ] || { echo "bench/internode.sh: no aorta binary at $aorta (make device-build)" >&2; exit 2; }
[ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 4 ] ||
    { echo "bench/internode.sh: needs 4 GPUs" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off: it can take a shared host's GPUs down
export NCCL_NET=${NET:-Socket}
d="$out/internode"
mkdir -p "$d"
runs="$d/runs"
log="$out/internode.log"
touch "$log"
say() { echo "$*" | tee -a "$log"; }

# The command prefix of a transport: nvlink (none), net (two emulated nodes),
# allnet (two emulated nodes, every communicator on the network).
wrapper() {
    case $1 in
    nvlink) wrap=() ;;
    net) wrap=("$here/scripts/emulate-nodes.sh") ;;
    allnet) wrap=("$here/scripts/emulate-nodes.sh" --all-network) ;;
    esac
}

# train NAME TRANSPORT OVERRIDES...: one run of $config on 4 ranks; the NCCL
# log lines that name each connection's transport are kept in its log.
train() {
    local name=$1
    wrapper "$2"
    shift 2
    say "+ $name: ${wrap[*]} aorta train --nproc 4 --config $config $*"
    local rc=0
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 600 "${wrap[@]}" "$aorta" train --backend cuda \
        --nproc 4 --config "$config" --run-name "$name" --override training.output_dir="$runs" \
        training.max_steps="$steps" training.summary_skip_steps=4 distributed.timeout_s=120 "$@" \
        >"$d/$name.train.log" 2>&1 || rc=$?
    grep -E 'step [0-9]+/|error|hint' "$d/$name.train.log" | tail -4 | tee -a "$log" || true
    say "  $name: exit $rc, transports: $(grep -oE 'via (NET/[A-Za-z]+|P2P|SHM)[^ ]*' \
        "$d/$name.train.log" | sed 's/^via //' | sort | uniq -c | tr '\n' ' ')"
    "$aorta" diagnose --json "$runs/$name" >"$d/$name.diagnose.json" 2>/dev/null || true
    echo "$rc" >"$d/$name.rc"
}

# coll NAME TRANSPORT: aorta coll and the NCCL reference on one transport.
coll() {
    local name=$1
    wrapper "$2"
    local args=(--coll "all_gather,reduce_scatter,all_reduce" -b 1M -e 256M -f 4 -n 10 -w 3)
    say "+ $name: ${wrap[*]} aorta coll ${args[*]}"
    timeout 300 "${wrap[@]}" "$aorta" coll --backend cuda --nproc 4 "${args[@]}" -c 0 \
        --json "$d/$name.aorta.json" 2>&1 | tee -a "$log" || say "  aorta coll exited $?"
    say "+ $name: ${wrap[*]} torchrun bench/nccl_ref.py ${args[*]}"
    # The same wrapper, so the same variables (AORTA_EMULATE_NODES included).
    timeout 300 "${wrap[@]}" "$torchrun" --nproc_per_node 4 --standalone \
        "$here/bench/nccl_ref.py" "${args[@]}" --json "$d/$name.ref.json" 2>&1 | tee -a "$log" ||
        say "  nccl_ref.py exited $?"
}

if [[ " $parts " == *" probe "* ]]; then
    say "+ hold_probe"
    "$(dirname "$aorta")/bench/hold_probe" --json "$d/hold_probe.json" 2>&1 | tee -a "$log" ||
        say "  hold_probe exited $?"
fi

if [[ " $parts " == *" train "* ]]; then
    rm -rf "$runs" "$d"/*.rc
    train nvlink_full nvlink fsdp.sharding_strategy=full_shard
    train nvlink_hybrid nvlink fsdp.sharding_strategy=hybrid_shard fsdp.shard_group_size=2
    train nvlink_ddp nvlink distributed.mode=ddp
    # hybrid_shard's shard groups by node (fsdp.shard_group_size 0): NVLink
    # inside each, only the replica all-reduce on the network.
    train net_full net fsdp.sharding_strategy=full_shard
    train net_hybrid net fsdp.sharding_strategy=hybrid_shard fsdp.shard_group_size=0
    train net_ddp net distributed.mode=ddp
    train allnet_full allnet fsdp.sharding_strategy=full_shard
fi

if [[ " $parts " == *" coll "* ]]; then
    coll net_coll net
    coll allnet_coll allnet
fi

"$python" - "$d" "$out/internode.json" <<'PY' | tee -a "$log"
import json, os, re, sys
d, out = sys.argv[1:3]

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def med(s, key):
    m = (s or {}).get("metrics", {}).get(key) or {}
    return m.get("median")

rows, checks = [], []
names = ["nvlink_full", "nvlink_hybrid", "nvlink_ddp", "net_full", "net_hybrid", "net_ddp",
         "allnet_full"]
for name in names:
    rcf = os.path.join(d, name + ".rc")
    if not os.path.exists(rcf):
        continue
    s = (load(os.path.join(d, "runs", name, "summary.json")) or {}).get("summary")
    dj = load(os.path.join(d, name + ".diagnose.json"))
    dg = (dj or {}).get("runs", [{}])[0] if dj else {}
    f = dg.get("findings") or []
    text = open(os.path.join(d, name + ".train.log"), errors="replace").read()
    # "... -> 2[2] [send] via NET/Socket/0": NET/Socket, P2P, SHM
    via = sorted(set(re.findall(r"via (NET/[A-Za-z]+|P2P|SHM)", text)))
    rows.append({"run": name, "exit": int(open(rcf).read()),
                 "completed": bool(s and s.get("completed")),
                 "step_ms": med(s, "step_ms"), "compute_ms": med(s, "compute_ms"),
                 "comm_ms": med(s, "comm_ms"), "exposed_comm_ms": med(s, "exposed_comm_ms"),
                 "bound": dg.get("bound"), "top_finding": f[0]["id"] if f else None,
                 "transports": via})

def fmt(v, p=1):
    return "-" if v is None else f"{v:.{p}f}"

print("\n| run | exit | step (ms) | compute | comm | exposed comm | bound | top finding | transports |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['run']} | {r['exit']} | {fmt(r['step_ms'])} | {fmt(r['compute_ms'])} | "
          f"{fmt(r['comm_ms'])} | {fmt(r['exposed_comm_ms'])} | {r['bound'] or '-'} | "
          f"{r['top_finding'] or '-'} | {', '.join(r['transports']) or '-'} |")
by = {r["run"]: r for r in rows}

def check(what, ok, detail=""):
    checks.append({"check": what, "ok": bool(ok), "detail": detail})
    print(f"{'PASS' if ok else 'FAIL'}: {what}{': ' + detail if detail else ''}")

print()
for r in rows:
    check(f"{r['run']} ran to completion", r["exit"] == 0 and r["completed"])
for name in ("net_full", "net_ddp", "allnet_full"):
    if name in by:
        check(f"{name}: communication is the bound diagnose names",
              by[name]["bound"] == "communication-exposed", str(by[name]["bound"]))
if "net_full" in by:
    check("net_full: the nodes talk over the network, a node inside over NVLink",
          any(t.startswith("NET") for t in by["net_full"]["transports"]) and
          "P2P" in by["net_full"]["transports"], ", ".join(by["net_full"]["transports"]))
for a, b in (("net_full", "net_hybrid"), ("nvlink_full", "nvlink_hybrid")):
    if a in by and b in by and by[a]["step_ms"] and by[b]["step_ms"]:
        gain = by[a]["step_ms"] / by[b]["step_ms"]
        print(f"hybrid_shard's gain over full_shard ({a.split('_')[0]}): {gain:.2f}x "
              f"({by[a]['step_ms']:.1f} -> {by[b]['step_ms']:.1f} ms)")
        if a == "net_full":
            check("hybrid_shard is faster than full_shard on the emulated network", gain > 1,
                  f"{gain:.2f}x")

colls = []
for name in ("net_coll", "allnet_coll"):
    mine = load(os.path.join(d, name + ".aorta.json")) or []
    ref = load(os.path.join(d, name + ".ref.json")) or {}
    refrows = {(r["coll"], r["size"]): r for r in ref.get("rows", [])}
    for r in mine:
        x = refrows.get((r["coll"], r["size"]))
        ratio = (r["oop_busbw_gbps"] / x["oop_busbw_gbps"]
                 if x and x.get("oop_busbw_gbps") else None)
        colls.append({"transport": name, "coll": r["coll"], "size": r["size"],
                      "aorta_busbw_gbps": r["oop_busbw_gbps"],
                      "nccl_ref_busbw_gbps": x["oop_busbw_gbps"] if x else None,
                      "ratio": ratio, "nccl_ref_version": ref.get("nccl")})
if colls:
    print("\n| transport | coll | size (B) | aorta busbw (GB/s) | NCCL ref busbw | ratio |")
    print("|---|---|---|---|---|---|")
    for c in colls:
        print(f"| {c['transport']} | {c['coll']} | {c['size']} | {fmt(c['aorta_busbw_gbps'], 2)} | "
              f"{fmt(c['nccl_ref_busbw_gbps'], 2)} | {fmt(c['ratio'], 3)} |")
    big = [c for c in colls if c["size"] >= 64 << 20 and c["ratio"] is not None]
    if big:
        worst = min(c["ratio"] for c in big)
        check("aorta coll within 3 % of NCCL's own busbw at 64 MiB and up", worst >= 0.97,
              f"worst ratio {worst:.3f}")
probe = load(os.path.join(d, "hold_probe.json"))
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump({"hold_probe": probe, "runs": rows, "coll": colls, "checks": checks}, f, indent=1)
os.replace(tmp, out)
print(f"\nbench/internode.sh: wrote {out}")
PY
