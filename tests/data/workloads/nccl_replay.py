"""TEST WORKLOAD (named as such): replays recorded NCCL init lines, then runs a gloo all_reduce.

This machine has no GPUs, InfiniBand or NCCL; what NCCL prints on real nodes comes from the
corpus. Node 0 replays a node that chose NET/IB (corpus 92, node0) unless NCCL_IB_DISABLE=1 is
set; every other node replays one that chose NET/Socket (corpus 94). Like real NCCL with split
transports, a node that picked IB while a peer picked Socket hangs (here: sleeps) instead of
finishing; with the transports aligned the job completes.
"""

import os
import sys
import time
from datetime import timedelta
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "nccl"


def replay(name: str) -> None:
    for line in (CORPUS / name).read_text().splitlines():
        if line.startswith("# "):  # the file's header is for people, not part of the log
            continue
        print(line, flush=True)
        time.sleep(0.002)


def main() -> int:
    node = int(os.environ.get("GROUP_RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    ib = node == 0 and os.environ.get("NCCL_IB_DISABLE", "0") not in ("1", "true")
    if local == 0:
        replay("92-healthy-ib-two-nodes-node0.log" if ib else "94-healthy-socket-after-ib-disable.log")
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    if ib and local == 0:
        print("nccl_replay: NET/IB here while a peer may use NET/Socket: hanging like NCCL would", flush=True)
        time.sleep(float(os.environ.get("REPLAY_HANG_SECONDS", "300")))
    t = torch.ones(4)
    dist.all_reduce(t)
    print(f"nccl_replay: rank {dist.get_rank()} all_reduce={t[0].item():g} world={dist.get_world_size()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    os._exit(rc)  # skip torch 2.13's gloo teardown abort (see the smoke workload)
