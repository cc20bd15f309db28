"""TEST WORKLOAD (named as such): floods stdout with NCCL_DEBUG_SUBSYS=ALL-like lines, fast."""

import os
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
rank = os.environ.get("RANK", "0")
w = sys.stdout.write
chunk = []
for i in range(n):
    chunk.append(f"flood-host:{rank}:{i % 97} [0] NCCL INFO Channel {i % 32:02d}/0 : {rank}[0] -> 1[1] via NET/Socket/0 line {i}\n")
    if len(chunk) == 2000:
        w("".join(chunk))
        chunk = []
w("".join(chunk))
w(f"flood done rank {rank} lines {n}\n")
sys.stdout.flush()
