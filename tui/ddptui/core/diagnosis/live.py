"""Diagnosis during a run: the line engine, plus what only the runner can see.

The runner knows things no log says: torch's rendezvous client waits in silence for the whole
rdzv_timeout (900 s by default) when the master's store is not there (recorded on the test
cluster), so "a worker waits in rendezvous while torchrun is not running on the master" is an
observation of ddptui's, raised the moment the worker's line arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..events import Event, NodeOutput

from .engine import Engine
from .worker import SerialWorker
from .catalog import CATALOG, finding
from .model import Evidence, Finding

if TYPE_CHECKING:
    from ..logs.rundir import RunDir

WAITING = "Rendezvous'ing worker group"
JOINED = ("Rendezvous complete for workers", "init_process_group done")


ReadBack = Callable[[int], Iterator[str]]  # count -> that many lines from disk, as texts of whole lines


@dataclass
class Spill:
    """A node's lines that went to disk while the diagnosis queue was full, read back later."""

    first: int  # the number of the first
    count: int
    read_back: ReadBack


class LiveDiagnosis:
    """Thread-safe: every node's reader feeds it; `on_change(finding)` gets each new or changed one.

    After `run_in_background()` (the orchestrator's), `feed` and `node_exited` only queue their
    work for one worker thread (worker.py) and return: the readers never wait for the engine, and
    only that thread touches it. `finish()` and `findings` wait for what was queued first.
    """

    def __init__(self, expected_nnodes: int, master: str, master_running: Callable[[], bool],
                 on_change: Callable[[Finding], None], rdzv_timeout: int = 900,
                 min_busbw_gbps: float | None = None) -> None:
        self._expected = expected_nnodes
        self._master = master
        self._master_running = master_running
        self._on_change = on_change
        self._rdzv_timeout = rdzv_timeout
        self._min_busbw = min_busbw_gbps  # the playbook's bandwidth.min_busbw_gbps: slow-interconnect below it
        self._lock = threading.Lock()
        self._worker: SerialWorker | None = None
        self.reset()

    def run_in_background(self) -> None:
        self._worker = SerialWorker()
        self._worker.on_idle = self._catch_up
        self._spills: dict[str, Spill] = {}  # node -> its lines owed to the diagnosis, on disk
        self._spill_lock = threading.Lock()  # never held across a blocking put

    def flush(self) -> None:
        """Until every batch fed so far has been diagnosed."""
        if self._worker is not None:
            for node in list(self._spills):
                self._settle(node)
            self._worker.join()

    def reset(self) -> None:
        """A fresh launch: what the last one said no longer stands."""
        self.flush()
        with self._lock:
            self._engine = Engine(expected_nnodes=self._expected, on_change=self._on_change,
                                  min_busbw_gbps=self._min_busbw)
            self._own: dict[str, Finding] = {}
            self._joined: set[str] = set()

    def deliver(self, run_dir: RunDir, sink: Callable[[Event], None], node: str, lines: list[str],
                stream: str = "stdout") -> int:
        """A batch of a node's output, the hot path of every reader (the launch's and attach's):
        masked to its log, then to the screen (`sink`), then to the diagnosis, which may fall behind
        a flood and never holds the reader back (`feed`). Returns the number of its first line."""
        shown = run_dir.redactor.lines(lines)  # the screen gets what the disk gets: no secret in clear
        at = run_dir.log_size(node)
        first = run_dir.append(node, shown, masked=True)
        sink(NodeOutput(node, tuple(shown), first, stream))
        written = at is not None and run_dir.log_size(node) is not None
        self.feed(node, lines, first, read_back=(lambda count: run_dir.read_back(node, at, count)) if written else None)
        return first

    def feed(self, node: str, lines: list[str], first: int, read_back: ReadBack | None = None) -> None:
        """Diagnose a batch (on the worker thread once `run_in_background` was called).
        `read_back(count)`: the node's lines from this batch's first on, from disk; with it, a batch
        that finds the diagnosis queue full is not held: the diagnosis reads it back once it has
        caught up (findings then come after the lines on screen, never later than needed to read them)."""
        w = self._worker
        if w is None:
            return self._feed(node, lines, first)
        with self._spill_lock:  # non-blocking offers only: the worker takes this lock to catch up
            sp = self._spills.get(node)
            if sp is not None and read_back is not None and sp.first + sp.count == first:
                if not w.offer(self._feed_back, node, sp):
                    sp.count += len(lines)  # still behind: this batch is owed too
                    return
                del self._spills[node]
                sp = None
            if sp is None and w.offer(self._feed, node, lines, first):
                return
            if sp is None and read_back is not None:
                self._spills[node] = Spill(first, len(lines), read_back)
                return
        self._settle(node)  # what is owed first (its lines could be read back), then this batch, waiting
        w.put(self._feed, node, lines, first)

    def _settle(self, node: str) -> None:
        """Queue the node's owed lines, waiting for room (the node's own reader, or the end of the run)."""
        with self._spill_lock:
            sp = self._spills.pop(node, None)
        if sp is not None:
            self._worker.put(self._feed_back, node, sp)  # type: ignore[union-attr]

    def _catch_up(self) -> None:
        """On the worker, its queue empty: queue the lines owed (a node that went quiet after a
        flood is diagnosed to its last line without waiting for another)."""
        with self._spill_lock:
            for node, sp in list(self._spills.items()):
                if not self._worker.offer(self._feed_back, node, sp):  # type: ignore[union-attr]
                    break
                del self._spills[node]

    def _feed_back(self, node: str, sp: Spill) -> None:
        """The owed lines, as the log's text: to the engine in bulk, never a list of them."""
        n = sp.first
        for text in sp.read_back(sp.count):
            count = text.count("\n") + 1
            with self._lock:
                st = self._engine.nodes.get(node)
                if st is not None and st.lines == n - 1:  # in order, as always on this worker
                    self._engine.feed_text(node, text)
                else:
                    self._engine.feed(node, text.split("\n"), n)
                if node != self._master and (WAITING in text or self._own.get("master-not-started")):
                    self._watch_rendezvous(node, text.split("\n"), n)
            n += count

    def _feed(self, node: str, lines: list[str], first: int) -> None:
        with self._lock:
            self._engine.feed(node, lines, first)
            if node != self._master:
                self._watch_rendezvous(node, lines, first)

    def node_exited(self, node: str, rc: int) -> None:
        """A node's job failed with `rc`: a known signal is its cause now; any other code makes
        `finish()` say `unrecognized-failure` if no rule explains that node."""
        if self._worker is not None:  # after the node's lines queued before it
            self._settle(node)
            self._worker.put(self._node_exited, node, rc)
        else:
            self._node_exited(node, rc)

    def _node_exited(self, node: str, rc: int) -> None:
        with self._lock:
            self._engine.node_exited(node, rc)

    def finish(self) -> None:
        self.flush()
        with self._lock:
            self._engine.finish()

    @property
    def findings(self) -> list[Finding]:
        self.flush()
        with self._lock:
            live = self._engine.findings
            ids = {f.id for f in live}
            return live + [f for f in self._own.values() if f.id not in ids]

    def _watch_rendezvous(self, node: str, lines: list[str], first: int) -> None:
        f = self._own.get("master-not-started")
        for i, line in enumerate(lines):
            if WAITING in line:
                if self._master_running():
                    continue
                ev = Evidence(node, first + i, line.strip())
                if f is None:
                    f = self._own["master-not-started"] = self._master_not_started(node, ev)
                elif node not in f.nodes:
                    f.nodes.append(node)
                    f.evidence.append(ev)
                    f.state = "active"
                self._on_change(f)
            elif f is not None and node in f.nodes and f.state == "active" and any(j in line for j in JOINED):
                self._joined.add(node)
                if set(f.nodes) <= self._joined:
                    f.state = "resolved"
                    self._on_change(f)

    def raise_own(self, f: Finding) -> None:
        """A finding one of ddptui's own watchers made (not read from a line): one per id, its nodes
        merged, told as any finding is."""
        with self._lock:
            old = self._own.get(f.id)
            if old is not None:
                for n in f.nodes:
                    if n not in old.nodes:
                        old.nodes.append(n)
                old.evidence.extend(f.evidence)
                old.summary = f"{old.summary}; {f.summary}"
                f = old
            self._own[f.id] = f
        self._on_change(f)

    def _master_not_started(self, node: str, ev: Evidence) -> Finding:
        # the catalog's words, with this playbook's timeout instead of torch's default
        words = CATALOG["master-not-started"].explanation.replace(
            "(rdzv_timeout, 900 s by default)", f"after rdzv_timeout ({self._rdzv_timeout} s in this playbook)")
        return finding("master-not-started", [node],
                       f"{node} waits in rendezvous, but torchrun is not running on the master {self._master}", [ev],
                       explanation=words)
