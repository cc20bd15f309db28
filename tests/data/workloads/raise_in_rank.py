"""TEST WORKLOAD (named as such): the last rank's training code raises a ValueError half a second
after the process group is up; the other ranks wait in a barrier and see their link to it break.

A training script's own error, the most common failure there is: the diagnosis must name it, not
only the peers' "Connection closed by peer" it causes (remote-rank-died).
"""

import time

import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
print(f"raise_in_rank: rank {rank} of {world} up", flush=True)
if rank == world - 1:
    time.sleep(0.5)
    raise ValueError(f"batch 17 has 0 samples: the dataset shard for rank {rank} is empty")
dist.barrier()
print(f"raise_in_rank: rank {rank} passed the barrier", flush=True)
