"""The ddptui DDP smoke test: the script users start from.

Started by torchrun on every node. Trains a small DDP model for a few steps, then times an
all_reduce, and prints one result line per rank:

    ddptui-smoke result host=node02 rank=0 local_rank=0 world_size=6 backend=gloo
        all_reduce=ok sum=15 expected=15 params_in_sync=true allreduce_ms=0.41 total_s=4.20

(on one line). Then it measures all_reduce bandwidth, bounded in time (`--bw-seconds`, a few seconds
whatever the link): over the whole job, and over one rank per node (local rank 0 of each node:
the network's figure, not shared memory's). Each node's local rank 0 prints one line per scope:

    ddptui-smoke bandwidth scope=inter-node size=33554432 algbw_gbps=0.81 busbw_gbps=0.81
        backend=gloo ranks=2 iters=4 sizes=1048576,8388608,33554432 busbw_by_size=0.5,0.7,0.81 ...

busbw = algbw x 2(n-1)/n (nccl-tests' definition for all_reduce); GB/s are 1e9 bytes/s; the figure
is the largest size measured, timed by the group's slowest rank. With nccl, NCCL_ALGO=Ring is set
for the whole job (tree and NVLS read up to 2x the NIC on 2 nodes). With one node the inter-node
line says `skipped=single-node`.

Works with gloo on CPU and with nccl on GPUs.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Callable
from datetime import timedelta

MiB = 1 << 20
BW_SIZES = (1 * MiB, 8 * MiB, 32 * MiB)
BW_WARMUP = 256 << 10  # small, so that a very slow link still fits the budget
BW_MAX_ITERS = 20


def bus_factor(n: int) -> float:
    """all_reduce's busbw / algbw for n ranks: 2(n-1)/n (NVIDIA/nccl-tests doc/PERFORMANCE.md)."""
    return 2 * (n - 1) / n


def sweep(timed: Callable[[int, int], float], sizes: tuple[int, ...], budget: float) -> list[tuple[int, float, int]]:
    """Time all_reduce at growing sizes within about `budget` seconds, after one small warm-up (NCCL
    connects on first use). `timed(nbytes, iters)` runs `iters` all_reduces and returns the seconds one
    took, the same value on every rank of the group (its slowest); every decision here uses only those
    values, so every rank makes the same calls. A size is skipped when the last rate says it would not
    fit; when not even the first fits, the warm-up size is measured instead. Returns
    [(nbytes, seconds per all_reduce, iters)], never empty."""
    spent = warm = timed(BW_WARMUP, 1)
    per_byte = warm / BW_WARMUP
    out: list[tuple[int, float, int]] = []
    for i, size in enumerate(sizes):
        one = max(per_byte * size, 1e-9)
        left = budget - spent
        if one > left:
            if not out:
                t = timed(BW_WARMUP, 1)
                out.append((BW_WARMUP, t, 1))
            break
        share = 0.8 if i == len(sizes) - 1 else 0.25  # the largest size is the figure: most time goes there
        iters = max(1, min(BW_MAX_ITERS, int(left * share / one)))
        t = timed(size, iters)
        spent += t * iters
        per_byte = t / size
        out.append((size, t, iters))
    return out


def bandwidth_line(scope: str, measured: list[tuple[int, float, int]], n: int, backend: str, host: str,
                   rank: int) -> str:
    """The parseable line for one scope: the figure of the largest size measured."""
    def gbps(size: int, t: float) -> float:
        return size / t / 1e9

    size, t, iters = measured[-1]
    alg = gbps(size, t)
    by_size = ",".join(f"{gbps(s, x) * bus_factor(n):.4g}" for s, x, _ in measured)
    line = (f"ddptui-smoke bandwidth scope={scope} size={size} algbw_gbps={alg:.4g} "
            f"busbw_gbps={alg * bus_factor(n):.4g} backend={backend} ranks={n} iters={iters} "
            f"time_ms={t * 1000:.3f} sizes={','.join(str(s) for s, _, _ in measured)} busbw_by_size={by_size} "
            f"host={host} rank={rank}")
    return line + (f" nccl_algo={os.environ.get('NCCL_ALGO', '')}" if backend == "nccl" else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5, help="training steps (default 5)")
    ap.add_argument("--backend", default=os.environ.get("DDPTUI_BACKEND", "auto"),
                    choices=("auto", "gloo", "nccl"))
    ap.add_argument("--size", type=int, default=1 << 20, help="all_reduce elements (default 1M)")
    ap.add_argument("--timeout", type=float, default=120.0, help="process group timeout, seconds")
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds to stay up after the test")
    ap.add_argument("--bw-seconds", type=float, default=3.0,
                    help="time budget of the bandwidth measurement, all scopes (default 3; 0: none)")
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

    if backend == "nccl" and args.bw_seconds > 0:  # read by NCCL when it creates a communicator
        prev = os.environ.get("NCCL_ALGO")
        os.environ["NCCL_ALGO"] = "Ring"
        say("NCCL_ALGO=Ring for the bandwidth measurement" + (f" (was {prev})" if prev and prev != "Ring" else ""))
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
    if args.bw_seconds > 0 and world > 1:
        measure_bandwidth(dist, torch, device, backend, args.bw_seconds, host, rank, local_rank, world)
    if args.sleep:
        time.sleep(args.sleep)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if status == "ok" else 1


def measure_bandwidth(dist, torch, device, backend: str, budget: float, host: str, rank: int, local_rank: int,
                      world: int) -> None:
    """The whole job's all_reduce busbw, then the inter-node one (local rank 0 of each node). Every
    rank takes part in the first and in creating the sub-group; each node's local rank 0 prints."""
    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def timer(group) -> Callable[[int, int], float]:
        def timed(nbytes: int, iters: int) -> float:
            buf = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
            dist.all_reduce(torch.zeros(1, device=device), group=group)  # start together
            sync()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(buf, group=group)
            sync()
            dt = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64, device=device)
            dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=group)  # the slowest rank's time, agreed
            return float(dt.item())
        return timed

    mine = torch.tensor([local_rank], device=device)
    every = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    leaders = [r for r, x in enumerate(every) if int(x.item()) == 0]  # one per node (per torchrun)
    share = budget / 2 if len(leaders) > 1 else budget
    measured = sweep(timer(None), BW_SIZES, share)
    if local_rank == 0:
        print(bandwidth_line("world", measured, world, backend, host, rank), flush=True)
    if len(leaders) < 2:
        if local_rank == 0:
            print(f"ddptui-smoke bandwidth scope=inter-node skipped=single-node backend={backend} ranks=1 "
                  f"host={host} rank={rank}", flush=True)
        return
    sub = dist.new_group(ranks=leaders)  # every rank must call it, members or not
    if rank in leaders:
        measured = sweep(timer(sub), BW_SIZES, budget - share)
        print(bandwidth_line("inter-node", measured, len(leaders), backend, host, rank), flush=True)


if __name__ == "__main__":
    rc = main()
    # torch 2.13's gloo can abort in its static destructors at interpreter exit ("terminate called
    # without an active exception", SIGABRT) after every rank finished fine. The test is over and
    # the process group destroyed, so leave without running the C++ teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
