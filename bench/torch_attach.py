#!/usr/bin/env python3
"""A PyTorch training script of aorta's model (DESIGN §6, config/large.yaml's
shape by default), for `aorta attach`'s benchmarks: nothing in it knows about
aorta.

    torch_attach.py [--steps N] [--layers L] [--d D] [--ff F] [--heads H]
                    [--batch B] [--seq T] [--profile A:B] [--trace FILE] [--fsdp2]
    torchrun --nproc_per_node 2 torch_attach.py ...   (DDP over NCCL)

Each step is an NVTX range "step" (torch.cuda.nvtx.range, as a user writes
it; also a torch.profiler annotation "step" for the Kineto trace) holding forward, backward, grad clipping and AdamW; CUDA events around it
time the step. One JSON line per step on rank 0's stdout: step, step_ms, loss.
--profile A:B records steps A..B-1 with torch.profiler (a second CUPTI
client); the line {"profiler_cuda_kernels": n, "profiler_steps": [A, B)} says
what it saw, and --trace writes its Chrome trace (for `aorta analyze`).
Data is drawn on the device each step (no loader), so steps are device work.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.dense = nn.Linear(a.dense_features * a.dense_dim, a.d)
        self.table = nn.EmbeddingBag(a.vocab, a.emb, mode="mean")
        self.sparse = nn.Linear(a.emb, a.d)
        layer = nn.TransformerEncoderLayer(a.d, a.heads, a.ff, dropout=a.dropout,
                                           activation="gelu", batch_first=True,
                                           norm_first=False)
        self.layers = nn.TransformerEncoder(layer, a.layers, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(a.d), nn.Linear(a.d, a.mlp), nn.GELU(),
                                  nn.Linear(a.mlp, 1))

    def forward(self, dense, ids):
        b, t = dense.shape[:2]
        x = self.dense(dense.flatten(2))
        x = x + self.sparse(self.table(ids.flatten(0, 1))).view(b, t, -1)
        return self.head(self.layers(x)).squeeze(-1)


_slow = None


def plant(a, rank, dev):
    """Faults with a known cause, for checking a diagnosis: a late host (the
    launch thread sleeps before the step's first launch) or a slow GPU (extra
    GEMMs on the compute stream before the forward)."""
    global _slow
    if rank == a.late_rank and a.late_ms > 0:
        time.sleep(a.late_ms / 1000.0)
    if rank == a.slow_rank and a.slow_gemms > 0:
        if _slow is None:
            _slow = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        for _ in range(a.slow_gemms):
            _slow = (_slow @ _slow).clamp_(-1, 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d", type=int, default=2048)
    p.add_argument("--ff", type=int, default=8192)
    p.add_argument("--mlp", type=int, default=8192)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--dense-features", type=int, default=16)
    p.add_argument("--dense-dim", type=int, default=128)
    p.add_argument("--vocab", type=int, default=60000)
    p.add_argument("--emb", type=int, default=256)
    p.add_argument("--sparse", type=int, default=32)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--profile", default=None, help="A:B, steps torch.profiler records")
    p.add_argument("--trace", default=None)
    p.add_argument("--fsdp2", action="store_true",
                   help="FSDP2 (fully_shard each encoder layer and the root; bf16 parameters, "
                        "fp32 reduction), on one rank too")
    p.add_argument("--late-rank", type=int, default=-1,
                   help="planted fault: this rank's host sleeps --late-ms before each step's launches")
    p.add_argument("--late-ms", type=float, default=0.0)
    p.add_argument("--slow-rank", type=int, default=-1,
                   help="planted fault: this rank runs --slow-gemms extra 4096^2 bf16 GEMMs a step")
    p.add_argument("--slow-gemms", type=int, default=0)
    a = p.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    if world > 1 or a.fsdp2:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        torch.distributed.init_process_group("nccl", device_id=dev, rank=rank, world_size=world)
    torch.manual_seed(42 + rank)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = Model(a).to(dev)
    if a.fsdp2:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.layers.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
    elif world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.01)
    prof_range = tuple(int(x) for x in a.profile.split(":")) if a.profile else None
    prof = None
    kernels = 0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for step in range(a.steps):
        if prof_range and step == prof_range[0]:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                      torch.profiler.ProfilerActivity.CUDA])
            prof.__enter__()
        dense = torch.randn(a.batch, a.seq, a.dense_features, a.dense_dim, device=dev)
        ids = torch.randint(0, a.vocab, (a.batch, a.seq, a.sparse), device=dev)
        target = torch.rand(a.batch, a.seq, device=dev)
        weight = torch.rand(a.batch, a.seq, device=dev)
        start.record()
        # the NVTX range is attach's step; the same name as a profiler
        # annotation is `aorta analyze --step '^step$'`'s in the Kineto trace
        with torch.cuda.nvtx.range("step"), torch.profiler.record_function("step"):
            plant(a, rank, dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                z = model(dense, ids)
            loss = (nn.functional.binary_cross_entropy_with_logits(
                z.float(), target, reduction="none") * weight).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        end.record()
        end.synchronize()
        if prof is not None and step == prof_range[1] - 1:
            prof.__exit__(None, None, None)
            kernels = sum(1 for e in prof.events()
                          if e.device_type == torch.autograd.DeviceType.CUDA)
            if a.trace:  # one file a rank: FILE, or FILE with _rankN before .json
                prof.export_chrome_trace(a.trace if world == 1 else
                                         a.trace.replace(".json", "") + f"_rank{rank}.json")
            if rank == 0:
                print(json.dumps({"profiler_cuda_kernels": kernels,
                                  "profiler_steps": list(prof_range)}), flush=True)
            prof = None
        if rank == 0:
            print(json.dumps({"step": step, "step_ms": start.elapsed_time(end),
                              "loss": loss.item()}), flush=True)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
