"""RECORDING WORKLOAD (named as such), run on a GPU machine to record what real NCCL prints
(tests/data/recorded/gpu/): one NCCL all_reduce. Every rank takes cuda:0 (the classic mistake of
a train.py that never picks its GPU by LOCAL_RANK, which NCCL refuses: "Duplicate GPU
detected"), or with DEVICE=local its LOCAL_RANK's GPU (right, until a rank finds no GPU of that
number)."""

import os

import torch
import torch.distributed as dist

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) if os.environ.get("DEVICE") == "local" else 0)
t = torch.ones(1, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print(f"rank {dist.get_rank()} all_reduce -> {t.item()}", flush=True)
dist.destroy_process_group()
