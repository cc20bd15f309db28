"""The TUI under a flood: `ddptui run PLAYBOOK` (the TUI, in a pseudo-terminal that this script
reads as a terminal would) on N `transport: local` nodes, each a torchrun replaying recorded NCCL
lines fast (bench/nccl_flood.py, as bench/stream.py). While the lines stream, `v` (the filter
cycle) is pressed again and again; key -> screen is the time from writing the key to the pty until
the new filter's name is in what the TUI writes back (the panes' bottom border says
`filter: NAME`). Also the TUI process's peak RSS (VmHWM), and first line -> last on disk.

Baselines, run beside it: the same key on the same app once the flood is over and its diagnosis
process has read it too (idle); a minimal
Textual app's peak RSS; `ddptui run --headless` of the same playbook (first line -> last on disk).

`--rate LPS`: no flood but a running job's output, each node's workload paced at LPS lines a second,
written every 10 ms (prints, progress bars); what the TUI process costs meanwhile, its CPU a second of
the stream, against `ddptui run --headless` of the same run (what reading, logging and printing the
lines cost without a screen).

    .venv/bin/python -m bench.tui_flood [--quick] [--runs 4x1000000,8x200000] [--reps R] [--size 160x45] [--rate LPS]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import random
import select
import shutil
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.startup import MINIMAL
from bench.stream import (cpu_at, cpu_seconds, ddptui_stream, diagnosis_pids, end_of, free_port, playbook, settle,
                          start_of, tail_of)

FILTERS = ["no launcher INFO", "NCCL", "warnings+errors", "rank 0", "all"]  # v's cycle, from "all" (1 proc/node)


class Term:
    """A process in a pseudo-terminal of `cols` x `rows`, its output read (and kept only since `mark`)."""

    def __init__(self, argv: list[str], cols: int, rows: int, env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ.update(env, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
            os.execv(argv[0], argv)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.buf = bytearray()
        self.total = 0
        self.presses = 0  # of `v`: where the filter cycle is

    def pump(self, timeout: float) -> None:
        r, _, _ = select.select([self.fd], [], [], timeout)
        while r:
            try:
                b = os.read(self.fd, 1 << 20)
            except OSError:
                return
            self.buf += b
            self.total += len(b)
            r, _, _ = select.select([self.fd], [], [], 0)

    def mark(self) -> None:
        self.buf.clear()

    def wait_for(self, marker: bytes, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        seen = 0
        while time.perf_counter() < deadline:
            if marker in self.buf[max(0, seen - len(marker)):]:
                return True
            seen = len(self.buf)
            self.pump(0.002)
        return False

    def idle(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self.pump(min(0.02, max(0.0, end - time.perf_counter())))
        self.mark()

    def hwm_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def diagnosis_hwm_mb(self) -> float:
        """The peak RSS of the TUI's diagnosis processes (core/diagnosis/child.py and its sieves),
        each's peak, summed; 0 if none runs."""
        total = 0.0
        for c in diagnosis_pids(self.pid):
            try:
                status = Path(f"/proc/{c}/status").read_text()
            except OSError:
                continue
            total += next(int(x.split()[1]) / 1024 for x in status.splitlines() if x.startswith("VmHWM:"))
        return total

    def diagnosis_cpu(self) -> float:
        """CPU seconds of the TUI's diagnosis processes so far (0 if none runs)."""
        return sum(cpu_seconds(c) or 0.0 for c in diagnosis_pids(self.pid))

    def close(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                break
            end = time.time() + 3
            while time.time() < end:
                if os.waitpid(self.pid, os.WNOHANG) != (0, 0):
                    os.close(self.fd)
                    return
                self.pump(0.05)
        os.close(self.fd)


def press_until(t: Term, done, timeout: float = 10.0, at_least: int = 0) -> list[float]:
    """Press `v` until `done()` (and at least `at_least` times); ms from each key to its filter on screen."""
    got: list[float] = []
    while not done() or len(got) < at_least:
        name = FILTERS[t.presses % len(FILTERS)]
        t.presses += 1
        t.mark()
        t0 = time.perf_counter()
        os.write(t.fd, b"v")
        if name == "all":  # nothing names it on screen: let it land
            t.idle(0.6)
            continue
        if not t.wait_for(f"filter: {name[:3]}".encode(), timeout):  # a toast may hide the rest
            raise RuntimeError(f"the TUI did not show filter {name!r} within {timeout} s")
        got.append((time.perf_counter() - t0) * 1e3)
        t.idle(random.uniform(0.1, 0.3))
    return got


@contextmanager
def tui_run(d: Path, nodes: int, lines: int, size: tuple[int, int], rate: float = 0.0) -> Iterator[tuple[Term, Path]]:
    """`ddptui run` of the bench's playbook in a pty, and the folder its run goes to; closed after,
    and its logs deleted (bench.stream.settle says why)."""
    runs = d / f"tui-runs-{time.time_ns()}"
    pb = playbook(d, nodes, lines, free_port(), rate=rate)
    env = {"DDPTUI_CONFIG_DIR": str(d / "cfg"), "DDPTUI_DATA_DIR": str(d / "data")}
    settle()
    t = Term([sys.executable, "-m", "ddptui", "run", str(pb), "--runs-dir", str(runs)], *size, env)
    try:
        yield t, runs
    finally:
        t.close()
        shutil.rmtree(runs, ignore_errors=True)


def tui_flood(d: Path, nodes: int, lines: int, size: tuple[int, int], idle_keys: int) -> dict:
    with tui_run(d, nodes, lines, size) as (t, runs):
        deadline = time.time() + 180
        logs: list[Path] = []
        while len(logs) < nodes or not all(b"nccl_flood start" in tail_of(p, 1 << 16) or p.stat().st_size > 1 << 16
                                           for p in logs):  # the flood is on every node
            if time.time() > deadline:
                raise RuntimeError(f"no flood within 180 s: {bytes(t.buf[-800:])!r}")
            t.idle(0.05)
            logs = [p for p in runs.glob("*/*.log") if p.stem.startswith("n")]
        rss_start = t.hwm_mb()

        def flood_over() -> bool:
            return all(b"nccl_flood done" in tail_of(p) for p in logs)

        flood = press_until(t, flood_over)
        # then wait for the logs to stop growing (torchrun's exit lines), and for the diagnosis process
        # to have read the flood too: it takes a core while it catches up, and the idle keys are the
        # app's alone (its CPU is sampled every 0.1 s; more than its wake-ups is work)
        quiet_since, last, cpu, busy = time.time(), 0.0, t.diagnosis_cpu(), time.time()
        while (time.time() - quiet_since < 1.5 or time.time() - busy < 1.0) and time.time() < deadline + 900:
            m = max(p.stat().st_mtime for p in logs)
            if m != last:
                last, quiet_since = m, time.time()
            t.idle(0.1)
            if (now := t.diagnosis_cpu()) > cpu + 0.01:
                cpu, busy = now, time.time()
        last_line = max(end_of(p) for p in logs)
        disk = last_line - min(start_of(p) for p in logs)
        idle = press_until(t, lambda: True, at_least=idle_keys)
        return {"flood": flood, "idle": idle, "rss": t.hwm_mb(), "rss_start": rss_start, "disk": disk,
                "rss_diagnosis": t.diagnosis_hwm_mb(), "diagnosis_lag": max(0.0, busy - 0.1 - last_line)}


def tui_paced(d: Path, nodes: int, lines: int, size: tuple[int, int], rate: float) -> float:
    """The TUI on a paced run: its CPU seconds a second of the stream, from a second after the first
    line to half a second before the last on disk (the screen's start-up and the run's end left out)."""
    with tui_run(d, nodes, lines, size, rate) as (t, runs):
        deadline = time.time() + 180 + lines / rate
        samples: list[tuple[float, float]] = []
        logs: list[Path] = []
        while len(logs) < nodes or not all(b"nccl_flood done" in tail_of(p) for p in logs):
            if time.time() > deadline:
                raise RuntimeError(f"the paced run did not end in time: {bytes(t.buf[-800:])!r}")
            t.idle(0.1)
            samples.append((time.time(), cpu_seconds(t.pid) or 0.0))
            logs = [p for p in runs.glob("*/*.log") if p.stem.startswith("n")]
        a, b = min(start_of(p) for p in logs) + 1.0, max(end_of(p) for p in logs) - 0.5
        return (cpu_at(samples, b) - cpu_at(samples, a)) / (b - a)


def paced(d: Path, runs: list[tuple[int, int]], reps: int, size: tuple[int, int], rate: float) -> None:
    for nodes, lines in runs:
        tui, head = [], []
        for _ in range(reps):  # interleaved: the TUI, then --headless
            tui.append(tui_paced(d, nodes, lines, size, rate))
            r = ddptui_stream(d, nodes, lines, free_port(), rate=rate)
            head.append(r.cpu_stream / r.disk)
        t, h = statistics.median(tui), statistics.median(head)
        print(f"TUI while lines keep coming: {nodes} node(s) x {rate:,.0f} lines/s each (a write every 10 ms, "
              f"{lines / rate:.0f} s), {size[0]}x{size[1]} pty, median of {reps}:")
        print(f"  the TUI process {t * 100:5.1f}% of a core   ddptui --headless {h * 100:5.1f}%   ratio {t / h:.1f}x")


def minimal_rss(d: Path, size: tuple[int, int]) -> float:
    src = d / "minimal.py"
    src.write_text(MINIMAL)
    t = Term([sys.executable, str(src)], *size, {})
    try:
        if not t.wait_for(b"minimal-ready", 60):
            raise RuntimeError("the minimal app drew nothing")
        t.idle(0.5)
        return t.hwm_mb()
    finally:
        t.close()


def pct(xs: list[float], p: float) -> float:
    """Nearest-rank percentile (with few samples, p99 is the largest)."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.tui_flood")
    ap.add_argument("--quick", action="store_true", help="2 nodes x 20k lines, one repetition")
    ap.add_argument("--runs", default=None, help="NODESxLINES, comma-separated (default 4x1000000,8x200000)")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--size", default="160x45", help="the terminal, COLSxROWS")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="lines a second a node, written every 10 ms: a running job's output, not a flood; the TUI's CPU "
                         "(default runs: 4 nodes x 20 s)")
    args = ap.parse_args(argv)
    if args.rate < 0:
        ap.error(f"--rate: lines a second, more than 0, not {args.rate:g}")
    runs = [tuple(int(x) for x in r.split("x")) for r in (args.runs or ("2x20000" if args.quick else
                                                                          "4x1000000,8x200000")).split(",")]
    reps = args.reps or (1 if args.quick else 3)
    size = tuple(int(x) for x in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        if args.rate:
            seconds = 3 if args.quick else 20
            paced(d, [(n, round(args.rate * seconds)) for n, _ in (runs if args.runs else [(2 if args.quick else 4, 0)])],
                  reps, size, args.rate)
            return 0
        for nodes, lines in runs:
            res, heads, mins = [], [], []
            for _ in range(reps):  # interleaved: the TUI, then its baselines, each repetition
                res.append(tui_flood(d, nodes, lines, size, idle_keys=4 if args.quick else 20))
                heads.append(ddptui_stream(d, nodes, lines, free_port())[0])
                mins.append(minimal_rss(d, size))
            flood = [x for r in res for x in r["flood"]]
            idle = [x for r in res for x in r["idle"]]
            rss, mrss = max(r["rss"] for r in res), statistics.median(mins)
            disk, head = statistics.median(r["disk"] for r in res), statistics.median(heads)
            print(f"TUI under a flood: {nodes} node(s) x {lines:,} NCCL lines, {size[0]}x{size[1]} pty, {reps} run(s):")
            print(f"  key -> screen, flood    p50 {pct(flood, 50):6.0f} ms  p99 {pct(flood, 99):6.0f} ms  ({len(flood)} keys)"
                  f"   idle app p50 {pct(idle, 50):4.0f} ms  p99 {pct(idle, 99):4.0f} ms ({len(idle)} keys)"
                  f"   ratio p99 {pct(flood, 99) / pct(idle, 99):.1f}x")
            print(f"  TUI peak RSS (VmHWM)   {rss:6.0f} MB (at the flood's start {max(r['rss_start'] for r in res):.0f} MB)"
                  f"   minimal Textual app {mrss:4.0f} MB   ratio {rss / mrss:.1f}x")
            print(f"  its diagnosis processes {max(r['rss_diagnosis'] for r in res):5.0f} MB peak RSS (VmHWM, each's, "
                  f"summed; the login node gives this and the TUI's)")
            print(f"  first line -> last on disk, TUI {disk:6.2f} s   ddptui --headless {head:6.2f} s"
                  f"   ratio {disk / head:.2f}x")
            print(f"  last line on disk -> its diagnosis processes idle {statistics.median(r['diagnosis_lag'] for r in res):6.2f} s"
                  f" (the idle keys are timed after it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
