"""While the job runs: can every worker still reach the master's rendezvous port?

A firewall that starts dropping TCP mid-run (or a link that loses TCP but not SSH) leaves torchrun
and the ranks silent until torch's own timeouts, minutes later: no line says anything. The master's
TCPStore listens on the master port for the whole job, so once a node has been quiet for QUIET
seconds ddptui asks each quiet worker, over its own connection, to open a TCP connection to it.
A worker that no longer gets through is named at once, with what it waits for
(firewall-or-unreachable). A healthy quiet job answers, so it raises nothing; a node that prints
is not asked (a Slurm step or an SSH session per probe costs little, but not nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..checks.probe import CONNECT
from .keepalive import Watcher
from .nodes import NodeRun

QUIET = 20.0  # seconds without a line from a node before its path to the master is tried
BUDGET = 4.0  # seconds one try may take (connect attempts repeat within it)


class ReachWatch(Watcher):
    thread_name = "ddptui-reach"

    def __init__(self, master: str, addr: Callable[[], str], port: int, running: Callable[[], list[NodeRun]],
                 last_output: Callable[[str], float], on_blocked: Callable[[NodeRun, str, str], None]) -> None:
        self._master = master
        self._addr = addr
        self._port = port
        self._running = running
        self._last_output = last_output
        self._on_blocked = on_blocked
        self._tried: dict[str, float] = {}
        self.blocked: set[str] = set()
        super().__init__()

    def _loop(self) -> None:
        while not self.closed:
            nodes = self._running()
            if not nodes:
                return
            if any(nr.name == self._master for nr in nodes):  # without the master there is nothing to reach
                now = time.monotonic()
                for nr in nodes:
                    if self.closed:
                        return
                    quiet = now - self._last_output(nr.name) >= QUIET
                    due = now - self._tried.get(nr.name, 0.0) >= QUIET
                    if nr.name != self._master and nr.name not in self.blocked and quiet and due:
                        self._tried[nr.name] = now
                        self._try(nr)
            time.sleep(1.0)

    def _try(self, nr: NodeRun) -> None:
        addr = self._addr()
        argv = [nr.python, "-c", CONNECT, addr, str(self._port), f"{BUDGET:g}"]
        try:
            r = nr.transport.run(argv, timeout=BUDGET + 10)
        except Exception:  # noqa: BLE001 - the connection itself is the keepalive's to judge
            return
        if r.rc is None or r.ok or self.closed or not nr.running:
            return  # no answer at all is for the keepalive (lost node); a stopping job is not blocked
        self.blocked.add(nr.name)
        why = (r.stdout.strip() or r.stderr.strip() or f"exit {r.rc}").splitlines()[-1]
        self._on_blocked(nr, f"{nr.python} -c <connect {addr}:{self._port}>", why)
