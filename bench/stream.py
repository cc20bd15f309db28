"""Headless streaming: `ddptui run --headless` of a playbook of N `transport: local` nodes, each
running torchrun with a workload that replays recorded NCCL lines fast (bench/nccl_flood.py);
from the workload's first line to the last line on disk in the run's node logs (torchrun's own
start-up is left out, and shown apart as launch -> exit).

Baselines, run beside it: N parallel `cat FILE > out` of the same lines, and N parallel copies
of the workload itself writing to a file (what producing the lines costs, no ddptui at all).

    .venv/bin/python -m bench.stream [--quick] [--lines N] [--nodes 1,4] [--reps R]
"""

from __future__ import annotations

import argparse
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "bench" / "nccl_flood.py"


def playbook(d: Path, nodes: int, lines: int, port: int) -> Path:
    pb = d / f"stream{nodes}.yaml"
    names = ", ".join(f"n{i}" for i in range(nodes))
    pb.write_text(f"""\
name: stream{nodes}
transport: local
nodes: [{names}]
job:
  script: {WORKLOAD}
  args: ["{lines}"]
  nproc_per_node: 1
  master_port: {port}
  tee: false
  rdzv_timeout: 120
  python: {sys.executable}
steps: [launch-master, wait-master, launch-workers, watch]
""")
    return pb


def start_of(log: Path) -> float:
    with open(log) as f:
        for line in f:
            if "nccl_flood start " in line:
                return float(line.split("nccl_flood start ")[1].split()[0])
    raise RuntimeError(f"{log}: no start line")


def ddptui_stream(d: Path, nodes: int, lines: int, port: int, attempts: int = 2) -> tuple[float, float]:
    """(first line -> last line on disk, launch -> exit) in seconds. A failed run is tried once more
    (torch 2.13's torchrun can abort at exit after a good run, as tests/test_local_run.py allows)."""
    for attempt in range(attempts):
        runs = d / f"runs{port}-{attempt}"
        printed = d / f"printed{port}.txt"  # what --headless prints (every line): to a file, not into memory
        t0 = time.time()
        with open(printed, "w") as out:
            r = subprocess.run([sys.executable, "-m", "ddptui", "run", str(playbook(d, nodes, lines, port)),
                                "--headless", "--runs-dir", str(runs)], stdout=out, stderr=subprocess.STDOUT)
        wall = time.time() - t0
        logs = [p for p in runs.glob("*/*.log") if p.stem.startswith("n")]
        if r.returncode == 0 and len(logs) == nodes:
            printed.unlink()
            return max(p.stat().st_mtime for p in logs) - min(start_of(p) for p in logs), wall
    tail = "\n".join(x for x in printed.read_text().splitlines() if " NCCL " not in x)[-3000:]
    raise RuntimeError(f"ddptui run failed (rc {r.returncode}): {tail}")


def free_port() -> int:
    """A port free now, below the ephemeral range (an ephemeral one can be taken by any outgoing
    connection before torchrun binds it); others may run torchrun here too: never a fixed one."""
    while True:
        port = random.randrange(20000, 30000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


def parallel(cmds: list[list[str]], outs: list[Path]) -> float:
    t0 = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=open(o, "w")) for c, o in zip(cmds, outs)]
    for p in procs:
        p.wait()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.stream")
    ap.add_argument("--quick", action="store_true", help="20k lines, 1 and 2 nodes, one repetition")
    ap.add_argument("--lines", type=int, default=None)
    ap.add_argument("--nodes", default=None, help="comma-separated node counts (default 1,4)")
    ap.add_argument("--reps", type=int, default=None)
    args = ap.parse_args(argv)
    lines = args.lines or (20_000 if args.quick else 1_000_000)
    counts = [int(x) for x in (args.nodes or ("1,2" if args.quick else "1,4")).split(",")]
    reps = args.reps or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        src = d / "lines.txt"
        subprocess.run([sys.executable, str(WORKLOAD), str(lines)], stdout=open(src, "w"), check=True)
        for n in counts:
            ts, walls, cats, prods = [], [], [], []
            for _ in range(reps):  # interleaved: ddptui, then the baselines, each repetition
                t, wall = ddptui_stream(d, n, lines, free_port())
                ts.append(t)
                walls.append(wall)
                outs = [d / f"out{i}" for i in range(n)]
                cats.append(parallel([["cat", str(src)]] * n, outs))
                prods.append(parallel([[sys.executable, str(WORKLOAD), str(lines)]] * n, outs))
            t, c, p = statistics.median(ts), statistics.median(cats), statistics.median(prods)
            print(f"{n} node(s) x {lines:,} NCCL lines, median of {reps}:")
            print(f"  ddptui --headless   first line -> last on disk {t:6.2f} s  {n * lines / t / 1e6:5.2f} M lines/s"
                  f"  (launch -> exit {statistics.median(walls):.2f} s)")
            print(f"  {n} x cat FILE > out                              {c:6.2f} s   ratio {t / c:.1f}x")
            print(f"  {n} x the workload > out (the producer alone)     {p:6.2f} s   ratio {t / p:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
