"""BENCH WORKLOAD (named as such): replays recorded NCCL lines (corpus 90, a 64-rank job's init
chatter) to stdout as fast as Python writes, N lines in all. Its first line says when it began
(time.time()), so the benchmark can time the stream without torchrun's start-up; its last says
when it wrote the lines before it (`nccl_flood done lines N at T`).

    nccl_flood.py N [TRAINING_SHARE [LOG [RATE]]]

TRAINING_SHARE (default 0): that share of the lines are a training loop's output between the NCCL
ones (bench/diagnosis.py's mix: 0.95 is a job that logs each step), as a real job's stream is once
its communicators are up; 0 is the diagnosis' worst case, every line NCCL init chatter. LOG: another
recorded log to replay (a corpus file: its `# key: value` header is left out). RATE (default 0: as
fast as it can): lines a second, written a hundredth of a second's worth at a time on a fixed
schedule and flushed, as a job's output comes, so that what is timed is how far behind the reader
of the stream is, not how fast the stream could go."""

import os
import re
import sys
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "corpus" / "nccl"
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
share = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
log = Path(sys.argv[3]) if len(sys.argv) > 3 else CORPUS / "90-healthy-socket-aws-64ranks.log"
rate = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
if not 0 <= share < 1:
    sys.exit(f"nccl_flood.py: TRAINING_SHARE must be in [0, 1), not {share}")
if rate < 0:
    sys.exit(f"nccl_flood.py: RATE must be 0 (as fast as it can) or lines a second, not {rate}")
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
t0 = time.time()
w(f"nccl_flood start {t0:.6f} rank {os.environ.get('RANK', '0')}\n")
step = max(1, round(rate / 100)) if rate else len(base)  # lines a write
base *= -(-step // len(base))  # a write's lines are one slice of it
done = 0
while done < n:
    if rate:
        wait = t0 + done / rate - time.time()
        if wait > 0:
            time.sleep(wait)
    at = done % len(base)
    part = base[at: at + min(step, n - done)]
    w("".join(part))
    done += len(part)
    if rate:
        sys.stdout.flush()
sys.stdout.flush()
w(f"nccl_flood done lines {n} at {time.time():.6f}\n")
sys.stdout.flush()
