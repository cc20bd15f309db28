"""BENCH WORKLOAD (named as such): replays recorded NCCL lines (corpus 90, a 64-rank job's init
chatter) to stdout as fast as Python writes, N lines in all. Its first line says when it began
(time.time()), so the benchmark can time the stream without torchrun's start-up."""

import os
import sys
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "corpus" / "nccl"
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
base = [x + "\n" for x in (CORPUS / "90-healthy-socket-aws-64ranks.log").read_text().splitlines() if not x.startswith("# ")]
w = sys.stdout.write
w(f"nccl_flood start {time.time():.6f} rank {os.environ.get('RANK', '0')}\n")
done = 0
while done < n:
    part = base[: n - done]
    w("".join(part))
    done += len(part)
w(f"nccl_flood done lines {n}\n")
sys.stdout.flush()
