"""Diagnosis speed.

1. Latency: from the moment the second node's transport line is fed to the moment the
   ib-socket-mismatch finding is raised (the engine's own callback), over many repetitions.
2. Offline throughput: `ddptui diagnose`'s engine over a large generated log against
   `grep -E` with the same signatures (every rule pattern) on the same file.
3. A run's 4 node logs: `ddptui diagnose` by cores (sieve.py) against one process and `grep -E`.

    .venv/bin/python -m bench.diagnosis [--quick] [--lines N] [--reps R]

`--quick`: 100k lines, one repetition (the test suite runs it so it does not rot). Each repetition
times the engine and grep one after the other (interleaved); the medians are printed. To time grep
under hyperfine instead, give it `--output=pipe` (hyperfine's default null output lets grep stop
at the first match).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ddptui.core.diagnosis.child import default_processes
from ddptui.core.diagnosis.engine import Engine
from ddptui.core.diagnosis.live import LiveDiagnosis
from ddptui.core.diagnosis.process import COALESCE_SECONDS
from ddptui.core.logs.rundir import RunDir
from ddptui.core.diagnosis.offline import diagnose_paths
from ddptui.core.diagnosis.rules import RULES

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "corpus" / "nccl"


def body(name: str) -> list[str]:
    return [l for l in (CORPUS / name).read_text().splitlines() if not l.startswith("# ")]


def latency(reps: int = 200) -> list[float]:
    ib, sock = body("92-healthy-ib-two-nodes-node0.log"), body("94-healthy-socket-after-ib-disable.log")
    cut = next(i for i, l in enumerate(sock) if "NET/Socket : Using" in l)
    out = []
    for _ in range(reps):
        got: list[float] = []
        e = Engine(on_change=lambda f, got=got: got.append(time.perf_counter()) if f.id == "ib-socket-mismatch" else None)
        e.feed("node02", ib)
        e.feed("node03", sock[:cut])
        t0 = time.perf_counter()
        e.feed("node03", sock[cut:cut + 1])
        out.append(got[0] - t0)
    return out


def live_latency(reps: int = 50) -> list[float]:
    """The same, end to end in a run: the reader's `deliver` of the line (disk, screen, word to the
    diagnosis process) to the finding's `on_change` in ddptui's process, back from the child."""
    ib, sock = body("92-healthy-ib-two-nodes-node0.log"), body("94-healthy-socket-after-ib-disable.log")
    cut = next(i for i, l in enumerate(sock) if "NET/Socket : Using" in l)
    out = []
    import threading

    raised = threading.Event()
    live = LiveDiagnosis(2, "node02", lambda: True,
                         lambda f: raised.set() if f.id == "ib-socket-mismatch" and f.active else None)
    with tempfile.TemporaryDirectory() as d:
        rd = RunDir(Path(d), "latency", "name: latency\n")
        try:
            for _ in range(reps):
                live.reset()  # a fresh launch each time: the same log goes on
                live.deliver(rd, lambda e: None, "node02", ib)
                live.deliver(rd, lambda e: None, "node03", sock[:cut])
                live.flush()
                time.sleep(2 * COALESCE_SECONDS)  # a line after a quiet spell: one within the parent's window
                raised.clear()                    # after its last word waits for the window's end (process.py)
                t0 = time.perf_counter()
                live.deliver(rd, lambda e: None, "node03", sock[cut:cut + 1])
                if not raised.wait(10):
                    raise RuntimeError("no ib-socket-mismatch from the diagnosis process within 10 s")
                out.append(time.perf_counter() - t0)
        finally:
            live.close()
            rd.close()
    return out


def make_log(path: Path, n_lines: int, training_share: float) -> None:
    """A big log: NCCL init lines (the healthy 64-rank AWS log) and training output, one failure at the end.

    training_share=0 is the worst case for the engine: every line is NCCL init chatter."""
    base = body("90-healthy-socket-aws-64ranks.log")
    with open(path, "w") as f:
        i = 0
        while i < n_lines:
            for line in base:
                f.write(line + "\n")
                i += 1
                for _ in range(int(training_share / (1 - training_share))):
                    f.write(f"[default0]:epoch 3 step {i} loss=0.{i % 997:03d} lr=3.0e-4 tokens/s=81234\n")
                    i += 1
        f.write("node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> "
                "returned 113(No route to host) errno 115(Operation now in progress)\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.diagnosis")
    ap.add_argument("--quick", action="store_true", help="100k lines, one repetition")
    ap.add_argument("--lines", type=int, default=None)
    ap.add_argument("--reps", type=int, default=None)
    args = ap.parse_args(argv)
    n_lines = args.lines or (100_000 if args.quick else 1_000_000)
    reps = args.reps or (1 if args.quick else 3)
    lat = latency(20 if args.quick else 200)
    print(f"latency second node's transport line -> ib-socket-mismatch, {len(lat)} runs: "
          f"median {statistics.median(lat) * 1e6:.0f} µs, max {max(lat) * 1e6:.0f} µs (the bar: under 1 s)")
    lat = live_latency(10 if args.quick else 50)
    print(f"  end to end in a run (deliver -> on_change, through the diagnosis process), {len(lat)} runs: "
          f"median {statistics.median(lat) * 1e3:.2f} ms, max {max(lat) * 1e3:.2f} ms")
    if not shutil.which("grep"):
        return 0
    for share in (0.0, 0.95):
        offline(share, n_lines, reps)
    offline_nodes(4, n_lines, reps, quick=args.quick)
    return 0


def grep_args(files: list[Path]) -> list[str]:
    """`grep -E -c` with the rules' signatures, as POSIX ERE, over `files`."""
    args = ["grep", "-E", "-c"]
    for p in (p for r in RULES for p in r.patterns):  # Python's (?:...) is not POSIX ERE: the same signatures grep reads
        p = re.sub(r"\(\?<?[!=][^)]*\)", "", p)  # a lookaround: grep matches a little more, never less
        args += ["-e", p.replace("(?:", "(").replace(r"\d", "[0-9]").replace(r"\s", "[[:space:]]")
                 .replace(r"\S", "[^[:space:]]").replace(r"\w", "[[:alnum:]_]").replace(r"\b", "")]
    return args + [str(f) for f in files]


def offline_nodes(n_logs: int, n_lines: int, reps: int, quick: bool = False) -> None:
    """`ddptui diagnose` of a run's N node logs of NCCL init chatter: by cores (the sieves beside it,
    sieve.py; `--quick` asks for them, its logs being too small to call them by default), against
    one process and `grep -E` over the same files."""
    with tempfile.TemporaryDirectory() as d:
        files = [Path(d) / f"node{i}.log" for i in range(n_logs)]
        for f in files:
            make_log(f, n_lines, 0.0)
        procs = max(2, default_processes()) if quick else None
        tp, t1, tg = [], [], []
        for _ in range(reps):  # interleaved
            t0 = time.perf_counter()
            found = diagnose_paths(files, processes=procs)
            tp.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            diagnose_paths(files, processes=1)
            t1.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run(grep_args(files), capture_output=True, text=True)
            tg.append(time.perf_counter() - t0)
        mp, m1, mg = statistics.median(tp), statistics.median(t1), statistics.median(tg)
        print(f"offline, {n_logs} node logs x {n_lines:,} lines of NCCL init chatter, median of {reps}, "
              f"{default_processes()} core(s) for the diagnosis:")
        print(f"  ddptui diagnose, by cores       {mp:6.2f} s  -> {[f.id for f in found]}")
        print(f"  ddptui diagnose, one process    {m1:6.2f} s   ratio {mp / m1:.2f}x")
        print(f"  grep -E, the same signatures    {mg:6.2f} s   ratio {mp / mg:.1f}x")


def offline(share: float, n_lines: int = 1_000_000, reps: int = 3) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "node.log"
        make_log(log, n_lines, share)
        size = log.stat().st_size / 1e6
        lines = sum(1 for _ in open(log))
        patterns = [p for r in RULES for p in r.patterns]
        args = grep_args([log])
        ts, tg = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            found = diagnose_paths([log])
            ts.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            r = subprocess.run(args, capture_output=True, text=True)
            tg.append(time.perf_counter() - t0)
        md, mg = statistics.median(ts), statistics.median(tg)
        print(f"offline, {lines:,} lines ({size:.0f} MB, {share:.0%} training output), median of {reps}:")
        print(f"  ddptui diagnose engine  {md:6.2f} s  {lines / md / 1e6:5.2f} M lines/s  -> {[f.id for f in found]}")
        print(f"  grep -E, {len(patterns)} signatures {mg:6.2f} s  {lines / mg / 1e6:5.2f} M lines/s  "
              f"-> {r.stdout.strip()} matching line(s)")
        print(f"  ratio engine / grep: {md / mg:.1f}x (grep only counts matches: no state, no cross-node rules)")


if __name__ == "__main__":
    sys.exit(main())
