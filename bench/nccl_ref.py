#!/usr/bin/env python3
"""NCCL's own bandwidth on this machine, measured the way nccl-tests measures it,
through PyTorch's NCCL process group: the reference `aorta coll` is compared
against where nccl-tests is not installed (bench/internode.sh).

Per size: `--warmup` ops, then `--iters` ops back to back on one stream, timed
on the host from before the first to after a synchronisation that follows the
last (nccl-tests' time), out of place, averaged over ranks (aorta coll's
default `-a avg`). algbw = size / time; busbw = algbw x nccl-tests' factor
(all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n). "size" is
nccl-tests' column: the receive buffer of all_gather, the send buffer of
reduce_scatter, the buffer of all_reduce.

    torchrun --nproc_per_node 4 --standalone bench/nccl_ref.py \\
        --coll all_gather,reduce_scatter,all_reduce -b 1M -e 256M -f 4 --json ref.json

AORTA_EMULATE_NODES=N in the environment (scripts/emulate-nodes.sh) gives each
rank the NCCL_HOSTID of its node as aorta does (launch/nodes.c), so that one
wrapper puts both on one transport.
Rank 0 prints a table and writes the JSON rows aorta coll writes (coll,
nranks, size, count, type, oop_time_us, oop_algbw_gbps, oop_busbw_gbps) plus
the NCCL version torch runs.
"""
import argparse
import json
import os
import socket
import sys
import time

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
NAMES = {"all_gather": "allgather", "reduce_scatter": "reducescatter", "all_reduce": "allreduce"}


def size_arg(text):
    t = text.strip().upper().rstrip("B")
    unit = t[-1] if t and t[-1] in UNITS else ""
    try:
        value = int(t[: len(t) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (like 1M)")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive size")
    return value * UNITS[unit]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--coll", default="all_gather,reduce_scatter,all_reduce")
    p.add_argument("-b", "--minbytes", type=size_arg, default=1 << 20)
    p.add_argument("-e", "--maxbytes", type=size_arg, default=256 << 20)
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup", type=int, default=5)
    p.add_argument("--json")
    a = p.parse_args()
    colls = [c.strip() for c in a.coll.split(",") if c.strip()]
    bad = [c for c in colls if c not in NAMES]
    if bad or a.stepfactor < 2 or a.iters < 1 or a.warmup < 0 or a.minbytes > a.maxbytes:
        print(f"nccl_ref.py: bad arguments (collectives: {', '.join(NAMES)})", file=sys.stderr)
        return 2
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", rank))
    nodes = os.environ.get("AORTA_EMULATE_NODES", "")
    if nodes:
        if not nodes.isdigit() or int(nodes) < 1 or world % int(nodes):
            print(f"nccl_ref.py: AORTA_EMULATE_NODES '{nodes}' does not divide {world} ranks",
                  file=sys.stderr)
            return 2
        base = os.environ.get("NCCL_HOSTID") or socket.gethostname()
        os.environ["NCCL_HOSTID"] = f"{base}.aorta-node{rank // (world // int(nodes))}"
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    stream = torch.cuda.current_stream()
    rows = []
    for coll in colls:
        size = a.minbytes
        while size <= a.maxbytes:
            n = size // 4 // world * world  # floats, a multiple of the ranks
            if n == 0:
                size *= a.stepfactor
                continue
            big = torch.ones(n, dtype=torch.float32, device="cuda")
            small = torch.ones(n // world, dtype=torch.float32, device="cuda")
            if coll == "all_gather":
                op = lambda: dist.all_gather_into_tensor(big, small)  # noqa: E731
                factor, count = (world - 1) / world, n // world
            elif coll == "reduce_scatter":
                op = lambda: dist.reduce_scatter_tensor(small, big)  # noqa: E731
                factor, count = (world - 1) / world, n // world
            else:
                op = lambda: dist.all_reduce(big)  # noqa: E731
                factor, count = 2 * (world - 1) / world, n
            for _ in range(a.warmup):
                op()
            stream.synchronize()
            t0 = time.perf_counter()
            for _ in range(a.iters):
                op()
            stream.synchronize()
            t = torch.tensor([(time.perf_counter() - t0) / a.iters], device="cuda")
            dist.all_reduce(t)
            us = t.item() / world * 1e6
            algbw = n * 4 / (us * 1e3)
            rows.append({"coll": NAMES[coll], "nranks": world, "size": n * 4, "count": count,
                         "type": "float", "oop_time_us": us, "oop_algbw_gbps": algbw,
                         "oop_busbw_gbps": algbw * factor})
            size *= a.stepfactor
    version = ".".join(str(v) for v in torch.cuda.nccl.version())
    if rank == 0:
        print(f"# NCCL {version} through torch {torch.__version__}, {world} ranks"
              f"{f', {nodes} emulated nodes' if nodes else ''}")
        print(f"{'coll':>14} {'size (B)':>12} {'time (us)':>10} {'algbw':>8} {'busbw':>8}")
        for r in rows:
            print(f"{r['coll']:>14} {r['size']:>12} {r['oop_time_us']:>10.1f} "
                  f"{r['oop_algbw_gbps']:>8.2f} {r['oop_busbw_gbps']:>8.2f}")
        if a.json:
            with open(a.json + ".tmp", "w") as f:
                json.dump({"nccl": version, "torch": torch.__version__, "rows": rows}, f, indent=1)
            os.replace(a.json + ".tmp", a.json)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
