"""How long each node's reader waits for the others: `ddptui run --headless` of N local nodes
flooding (bench/stream.py's playbook and workload), with every lock that a reader takes on its way
(the run folder's, the printer's, the live diagnosis') timed as it is acquired: how many times, the
seconds spent waiting for it, the longest wait, the seconds it was held; and, as "(full)", the
readers' waits on a Condition of those modules (the printer's backlog, full: its output here is
a file, which is waited for). The baseline beside it is
1 node, where nobody else holds them.

The 4-node flood's time is the machine's on 2 shared cores (bench/README.md), so a wall time cannot
say whether the nodes are read in parallel; the waits can: a reader that waits for another node's
write is a node that is not read in parallel, however many cores there are. The locks are timed by
giving those modules a `threading` whose Lock times itself (nothing in ddptui knows of it).

    .venv/bin/python -m bench.waits [--quick] [--nodes 1,4] [--lines N] [--reps R]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import defaultdict
from pathlib import Path

from bench.stream import free_port, playbook, settle

WATCHED = ("ddptui.core.logs.rundir", "ddptui.cli_printer", "ddptui.core.diagnosis.live")


class TimedLock:
    stats: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # n, waited, longest, held

    def __init__(self, where: str) -> None:
        self._lock, self.where, self._since = threading.Lock(), where, 0.0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        t = time.perf_counter()
        got = self._lock.acquire(blocking, timeout)
        if got:
            self._since = now = time.perf_counter()
            s = self.stats[self.where]
            s[0] += 1
            s[1] += now - t
            s[2] = max(s[2], now - t)
        return got

    def release(self) -> None:
        self.stats[self.where][3] += time.perf_counter() - self._since
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()


class TimedCondition(threading.Condition):
    """A Condition whose waits in the nodes' readers are timed as its lock's (the printer's backlog
    full, when its output is a file: a reader waits for the writer there, not for a lock). The
    writer's own waits for work and the main thread's for the writer's end are not the readers'."""

    def wait(self, timeout: float | None = None) -> bool:
        me = threading.current_thread()
        if me is threading.main_thread() or me.name.startswith("ddptui-printer"):
            return super().wait(timeout)
        t = time.perf_counter()
        try:
            return super().wait(timeout)
        finally:
            where = getattr(self._lock, "where", "?")  # type: ignore[attr-defined]
            s = TimedLock.stats[f"{where} (full)"]
            waited = time.perf_counter() - t
            s[0] += 1
            s[1] += waited
            s[2] = max(s[2], waited)


def child(pb: str, runs: str, out: str) -> int:
    """ddptui run, its readers' locks timed; the figures to `out` as JSON."""
    import importlib

    for name in WATCHED:
        mod = importlib.import_module(name)
        shim = types.ModuleType("threading")
        shim.__dict__.update(threading.__dict__)
        shim.Lock = lambda where=name.rsplit(".", 1)[1]: TimedLock(where)  # type: ignore[attr-defined]
        shim.Condition = TimedCondition  # type: ignore[attr-defined]
        mod.threading = shim  # type: ignore[attr-defined]
    from ddptui.cli import main

    rc = main(["run", pb, "--headless", "--runs-dir", runs])
    Path(out).write_text(json.dumps(dict(TimedLock.stats)))
    return rc


def measure(d: Path, nodes: int, lines: int) -> dict[str, list[float]]:
    port = free_port()
    pb = playbook(d, nodes, lines, port)
    out = d / f"waits{port}.json"
    settle()
    with open(d / "printed.txt", "w") as printed:
        r = subprocess.run([sys.executable, "-m", "bench.waits", "--child", str(pb), str(d / "runs"), str(out)],
                           stdout=printed, stderr=subprocess.STDOUT)
    if r.returncode != 0 or not out.exists():
        tail = (d / "printed.txt").read_text()[-2000:]
        raise RuntimeError(f"ddptui run failed (rc {r.returncode}): {tail}")
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(*argv[1:4])
    ap = argparse.ArgumentParser(prog="bench.waits")
    ap.add_argument("--quick", action="store_true", help="20k lines, 1 and 2 nodes, one repetition")
    ap.add_argument("--nodes", default=None, help="comma-separated node counts (default 1,4)")
    ap.add_argument("--lines", type=int, default=None)
    ap.add_argument("--reps", type=int, default=None)
    args = ap.parse_args(argv)
    lines = args.lines or (20_000 if args.quick else 1_000_000)
    counts = [int(x) for x in (args.nodes or ("1,2" if args.quick else "1,4")).split(",")]
    reps = args.reps or (1 if args.quick else 2)
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            for rep in range(reps):
                stats = measure(Path(tmp), n, lines)
                print(f"{n} node(s) x {lines:,} NCCL lines, local, run {rep + 1} of {reps}: the readers' locks")
                for where, (k, waited, longest, held) in sorted(stats.items()):
                    print(f"  {where:<11} taken {int(k):>6}   waited {waited:6.3f} s (longest {longest * 1000:6.1f} ms)"
                          f"   held {held:6.3f} s")
                total = sum(s[1] for s in stats.values())
                print(f"  in all: the readers waited {total:.3f} s for each other")
    return 0


if __name__ == "__main__":
    sys.exit(main())
