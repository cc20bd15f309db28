"""TEST WORKLOAD (named as such): floods stdout with NCCL_DEBUG_SUBSYS=ALL-like lines, fast.

    flood.py N [STOPFILE [PAUSE]]: N lines; with STOPFILE, more after them until that file exists
    (so a test knows the flood is still on while it presses keys), PAUSE seconds between each 2,000
    of them (default none). The last line says how many."""

import os
import sys
import time
from pathlib import Path

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
stop = Path(sys.argv[2]) if len(sys.argv) > 2 else None
pause = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
rank = os.environ.get("RANK", "0")
w = sys.stdout.write
i = 0


def chunk(count: int) -> None:
    global i
    w("".join(f"flood-host:{rank}:{j % 97} [0] NCCL INFO Channel {j % 32:02d}/0 : {rank}[0] -> 1[1] via NET/Socket/0 "
              f"line {j}\n" for j in range(i, i + count)))
    i += count


while i < n:
    chunk(min(2000, n - i))
while stop is not None and not stop.exists():
    chunk(2000)
    if pause:
        sys.stdout.flush()
        time.sleep(pause)
w(f"flood done rank {rank} lines {i}\n")
sys.stdout.flush()
