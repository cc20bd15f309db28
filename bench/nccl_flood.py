"""BENCH WORKLOAD (named as such): replays recorded NCCL lines (corpus 90, a 64-rank job's init
chatter) to stdout as fast as Python writes, N lines in all. Its first line says when it began
(time.time()), so the benchmark can time the stream without torchrun's start-up.

    nccl_flood.py N [TRAINING_SHARE [LOG]]

TRAINING_SHARE (default 0): that share of the lines are a training loop's output between the NCCL
ones (bench/diagnosis.py's mix: 0.95 is a job that logs each step), as a real job's stream is once
its communicators are up; 0 is the diagnosis' worst case, every line NCCL init chatter. LOG: another
recorded log to replay (a corpus file: its `# key: value` header is left out)."""

import os
import re
import sys
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "corpus" / "nccl"
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
share = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
log = Path(sys.argv[3]) if len(sys.argv) > 3 else CORPUS / "90-healthy-socket-aws-64ranks.log"
if not 0 <= share < 1:
    sys.exit(f"nccl_flood.py: TRAINING_SHARE must be in [0, 1), not {share}")
nccl = [x + "\n" for x in log.read_text().splitlines()]
while nccl and re.match(r"# [\w-]+: ", nccl[0]):  # the corpus header (source, scenario, ...), not output
    del nccl[0]
per = round(share / (1 - share))  # training lines after each NCCL line
base: list[str] = []
for line in nccl:
    base.append(line)
    base += [f"[default0]:epoch 3 step {len(base) + k} loss=0.{(len(base) + k) % 997:03d} lr=3.0e-4 tokens/s=81234\n"
             for k in range(per)]
w = sys.stdout.write
w(f"nccl_flood start {time.time():.6f} rank {os.environ.get('RANK', '0')}\n")
done = 0
while done < n:
    part = base[: n - done]
    w("".join(part))
    done += len(part)
w(f"nccl_flood done lines {n}\n")
sys.stdout.flush()
