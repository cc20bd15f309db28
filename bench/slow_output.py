"""What a slow terminal costs the run: `ddptui run --headless` of N local nodes flooding
(bench/stream.py's playbook and workload: recorded NCCL lines as fast as they go), its output
  - into a file (the baseline: never slower than the disk),
  - into a pipe read at RATE bytes a second (a terminal behind a slow ssh link, a slow `| tee`),
  - into a pipe nobody reads until the run's logs are whole (Ctrl-S, a pager left open).
For each: the workloads' first line -> their last line in the run's logs on disk (how long the job
took to put its output out, which is what its ranks wait for when the pipes are full), the ratio
against the file, and how many lines the output was not given (said in their place, every one
in the logs). A run that has not put its last line on disk after --limit seconds is stopped and
said so: the nodes waited for the terminal.

    .venv/bin/python -m bench.slow_output [--quick] [--nodes N] [--lines N] [--rate BYTES_PER_S] [--limit S]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.stream import end_of, free_port, playbook, settle, start_of

LEFT_OUT = re.compile(rb"\[ddptui: ([\d,]+) lines? \(")


def done(logs: list[Path]) -> bool:
    for log in logs:
        try:
            with open(log, "rb") as f:
                f.seek(max(0, log.stat().st_size - 65536))
                if b"nccl_flood done " not in f.read():
                    return False
        except OSError:
            return False
    return bool(logs)


def one(d: Path, nodes: int, lines: int, how: str, rate: float, limit: float) -> tuple[float | None, int, int]:
    """(first line -> last on disk, or None past `limit`; lines printed; lines said left out)."""
    runs = d / f"runs-{how}"
    pb = playbook(d, nodes, lines, free_port())
    settle()
    argv = [sys.executable, "-m", "ddptui", "run", str(pb), "--headless", "--runs-dir", str(runs)]
    got: list[bytes] = []
    if how == "file":
        with open(d / "printed.txt", "wb") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    else:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    reader = None
    if how == "slow":
        def read_slowly() -> None:
            while data := p.stdout.read1(65536):
                got.append(data)
                time.sleep(len(data) / rate)
        reader = threading.Thread(target=read_slowly, daemon=True)
        reader.start()
    t0 = time.time()
    logs: list[Path] = []
    while time.time() - t0 < limit and not done(logs) and p.poll() is None:
        time.sleep(0.1)
        logs = sorted(runs.glob("*/n*.log"))
    finished = done(logs)
    if not finished:
        p.terminate()  # ddptui stops the nodes' jobs on its way out
    if how == "stopped":
        got.append(p.stdout.read())  # the terminal reads again
    if reader is not None:
        reader.join()
    p.wait()
    printed = b"".join(got) if how != "file" else (d / "printed.txt").read_bytes()
    said = sum(int(m.group(1).replace(b",", b"")) for m in LEFT_OUT.finditer(printed))
    shown = sum(1 for x in printed.splitlines() if b" NCCL INFO " in x or b"nccl_flood" in x)
    took = None
    if finished:
        took = max(end_of(x) for x in logs) - min(start_of(x) for x in logs)
    return took, shown, said


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.slow_output")
    ap.add_argument("--quick", action="store_true", help="2 nodes x 60k lines (~5 MB each), a 1 MB/s terminal")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--lines", type=int, default=None, help="a node's lines (default 500,000: ~40 MB)")
    ap.add_argument("--rate", type=float, default=None, help="the slow terminal's bytes a second (default 2 MB/s)")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds a run may take before it is stopped")
    args = ap.parse_args(argv)
    lines = args.lines or (60_000 if args.quick else 500_000)
    rate = args.rate or (1e6 if args.quick else 2e6)
    print(f"{args.nodes} local nodes x {lines:,} NCCL lines, `ddptui run --headless` into:")
    with tempfile.TemporaryDirectory() as tmp:
        base = None
        for how, words in (("file", "a file (the baseline)"), ("slow", f"a pipe read at {rate / 1e6:g} MB/s"),
                           ("stopped", "a pipe read only at the end (Ctrl-S)")):
            took, shown, said = one(Path(tmp), args.nodes, lines, how, rate, args.limit)
            if took is None:
                print(f"  {words:<40} not on disk after {args.limit:.0f} s: the nodes waited for the terminal"
                      f" (stopped; {shown:,} lines printed)")
                continue
            base = took if how == "file" else base
            ratio = f"ratio {took / base:5.2f}x" if base else ""
            print(f"  {words:<40} first line -> last on disk {took:6.2f} s  {ratio}   "
                  f"printed {shown:,} lines, {said:,} said not printed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
