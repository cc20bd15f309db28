"""The ddptui DDP smoke test: the script users start from.

Started by torchrun on every node. Trains a small DDP model for a few steps, then times an
all_reduce, and prints one result line per rank:

    ddptui-smoke result host=node02 rank=0 local_rank=0 world_size=6 backend=gloo
        all_reduce=ok sum=15 expected=15 params_in_sync=true allreduce_ms=0.41 total_s=4.20

(on one line). Works with gloo on CPU and with nccl on GPUs.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from datetime import timedelta


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5, help="training steps (default 5)")
    ap.add_argument("--backend", default=os.environ.get("DDPTUI_BACKEND", "auto"),
                    choices=("auto", "gloo", "nccl"))
    ap.add_argument("--size", type=int, default=1 << 20, help="all_reduce elements (default 1M)")
    ap.add_argument("--timeout", type=float, default=120.0, help="process group timeout, seconds")
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds to stay up after the test")
    args = ap.parse_args()

    t0 = time.perf_counter()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    world = int(os.environ["WORLD_SIZE"])
    host = socket.gethostname()
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")

    def say(msg: str) -> None:
        print(f"ddptui-smoke [{host} rank {rank}] {msg}", flush=True)

    say(f"init_process_group backend={backend} world_size={world}")
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=args.timeout))
    say("init_process_group done")

    torch.manual_seed(1234)  # same start everywhere, so DDP's sync is checkable
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(device)
    ddp = DDP(model, device_ids=[local_rank] if backend == "nccl" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)  # different data per rank
    for _step in range(args.steps):
        x = torch.randn(16, 32, generator=gen).to(device)
        y = torch.randn(16, 4, generator=gen).to(device)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    say(f"trained {args.steps} steps, loss={loss.item():.4f}")

    # After DDP training every rank must hold the same parameters.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    in_sync = bool(torch.allclose(flat, ref))

    # A timed all_reduce whose answer is known: each rank contributes its rank.
    t = torch.full((args.size,), float(rank), device=device)
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize()
    ta = time.perf_counter()
    dist.all_reduce(t)
    if device.type == "cuda":
        torch.cuda.synchronize()
    ms = (time.perf_counter() - ta) * 1000
    expected = world * (world - 1) / 2
    got = t[0].item()
    ok = abs(got - expected) < 1e-6 and bool(torch.all(t == t[0]))
    status = "ok" if ok and in_sync else "FAILED"
    print(
        f"ddptui-smoke result host={host} rank={rank} local_rank={local_rank} world_size={world} "
        f"backend={backend} all_reduce={status} sum={got:g} expected={expected:g} "
        f"params_in_sync={'true' if in_sync else 'false'} allreduce_ms={ms:.2f} "
        f"total_s={time.perf_counter() - t0:.2f}",
        flush=True,
    )
    if args.sleep:
        time.sleep(args.sleep)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    rc = main()
    # torch 2.13's gloo can abort in its static destructors at interpreter exit ("terminate called
    # without an active exception", SIGABRT) after every rank finished fine. The test is over and
    # the process group destroyed, so leave without running the C++ teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
