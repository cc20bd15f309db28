"""What the orchestrator does when a node goes wrong while the job runs: a failed node stops the
others (fail fast), a node that stops answering is lost, a worker that can no longer reach the
master's port is named (reach.py)."""

from __future__ import annotations

import time

from ..diagnosis.catalog import finding
from ..diagnosis.model import Evidence
from ..events import Notice
from ..transport.base import silence_limit
from .nodes import NodeRun

FAIL_FAST_GRACE = 5.0  # seconds the others get to print their own errors before they are stopped


class Watchers:
    """Mixed into Orchestrator: the handlers its keepalive, reach watch and exit watchers call."""

    def _fail_fast(self, failed: NodeRun) -> None:
        """A node's torchrun failed: the job cannot finish (no elastic restarts), and the others would
        only notice at their next collective (or sit in torchrun's 300 s exit barrier)."""
        time.sleep(FAIL_FAST_GRACE)
        others = [o for o in self.nodes.values() if o is not failed and o.running]
        if others and not self.stopped_by_user and not self.closed:
            self._emit(Notice("warning", f"{failed.name} failed: stopping the job on "
                                         f"{', '.join(o.name for o in others)}"))
            self._stop_nodes(others)

    def _watched(self) -> list[NodeRun]:
        return [nr for nr in self.nodes.values() if nr.running and nr.name not in self.detached] \
            if not self.closed else []

    def _blocked(self, nr: NodeRun, cmd: str, why: str) -> None:
        """A running worker can no longer reach the master's port: say so now, not at torch's timeout."""
        addr, port = self.master_addr(), self.pb.job.master_port
        self.diagnosis.raise_own(finding(
            "firewall-or-unreachable", [nr.name],
            f"{nr.name} can no longer open a TCP connection to the master {addr}:{port} while the job runs: its "
            "ranks wait on the master's store, and the other ranks on them", [Evidence(nr.name, 0, why, cmd)]))

    def _lost(self, nr: NodeRun) -> None:
        if not nr.running:
            return
        nr.process.lost = True
        nr.error = "the node stopped answering (3 keepalives missed)"
        self._emit(Notice("error", f"{nr.name} stopped answering: marking it lost and stopping the job on the others; "
                                   f"its guard stops the job there after {silence_limit(self.pb.ssh.keepalive):g} s "
                                   "without a word from ddptui", nr.name))
        nr.transport.close()  # ends its readers: the process is done, lost
        self._stop_nodes([o for o in self.nodes.values() if o is not nr])

    def _closed(self, nr: NodeRun) -> None:
        """A node's connection ended without its job's exit (its sshd killed, the node rebooting): the
        job cannot finish without it, so the others are stopped now, as for a node that stopped
        answering. Its guard, its stdin closed, stops the job there itself."""
        others = [o for o in self.nodes.values() if o is not nr and o.running and o.name not in self._stopping]
        if others and not self.stopped_by_user and not self.closed:
            self._emit(Notice("error", f"{nr.name}: the connection closed before its job's exit: stopping the job "
                                       f"on {', '.join(o.name for o in others)}; its guard stops the job there",
                              nr.name))
            self._stop_nodes(others)

    # ---- stop and detach -------------------------------------------------------------------------
