"""Diagnosis during a run: the line engine, plus what only the runner can see.

The runner knows things no log says: torch's rendezvous client waits in silence for the whole
rdzv_timeout (900 s by default) when the master's store is not there (recorded on the test
cluster), so "a worker waits in rendezvous while torchrun is not running on the master" is an
observation of ddptui's, raised the moment the worker's line arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..events import Event, NodeOutput
from ..logs.lines import Chunk

from .catalog import CATALOG, finding
from .model import Evidence, Finding
from .process import EngineProcess

if TYPE_CHECKING:
    from ..logs.rundir import RunDir

WAITING = "Rendezvous'ing worker group"
_WAITING = WAITING.encode()
JOINED = ("Rendezvous complete for workers", "init_process_group done")


class DiagnosisFailed(RuntimeError):
    """The engine met an error it could not go on from (said at the next flush, as it was met)."""


class LiveDiagnosis:
    """Thread-safe: every node's reader delivers to it; `on_change(finding)` gets each new or changed one.

    The engine runs in its own process (process.py, child.py) and reads each node's log as it
    grows: a reader's batch goes to disk and to the screen, and the diagnosis is told only where the
    log ends now, so the job and the screen never wait for it, and its scan runs beside them, not
    under their GIL. `finish()` and `findings` wait until it has read every line written so far.
    """

    def __init__(self, expected_nnodes: int, master: str, master_running: Callable[[], bool],
                 on_change: Callable[[Finding], None], rdzv_timeout: int = 900,
                 min_busbw_gbps: float | None = None, processes: int | None = None) -> None:
        self._master = master
        self._master_running = master_running
        self._on_change = on_change
        self._rdzv_timeout = rdzv_timeout
        self._lock = threading.Lock()
        self._engine = EngineProcess({"expected_nnodes": expected_nnodes, "min_busbw_gbps": min_busbw_gbps,
                                      "processes": processes}, on_change)
        self._own: dict[str, Finding] = {}
        self._joined: set[str] = set()
        self._last: list[Finding] = []  # the engine's findings at the last flush

    def flush(self) -> list[Finding]:
        """Until every line delivered so far has been diagnosed; the engine's findings then."""
        answer = self._engine.sync()
        if answer.get("error"):
            raise DiagnosisFailed(answer["error"])
        self._last = [Finding.from_json(d) for d in answer["findings"]]
        return self._last

    def reset(self) -> None:
        """A fresh launch: what the last one said no longer stands."""
        self._engine.reset()
        with self._lock:
            self._own = {}
            self._joined = set()
            self._last = []

    def close(self) -> None:
        """The run is over: the diagnosis process ends (it would at ddptui's own end anyway)."""
        self._engine.close()

    def deliver(self, run_dir: RunDir, sink: Callable[[Event], None], node: str, lines: Chunk | Sequence[str],
                stream: str = "stdout") -> Chunk:
        """A batch of a node's output, the hot path of every reader (the launch's and attach's):
        masked to its log, then to the screen (`sink`), then word to the diagnosis of where the log
        ends now (it reads the lines from there). Returns the batch as masked (the reader's own
        searches look in its bytes)."""
        chunk = lines if isinstance(lines, Chunk) else Chunk.of_lines(lines)
        shown = run_dir.redactor.chunk(chunk)  # the screen gets what the disk gets: no secret in clear
        at = run_dir.log_size(node)
        first = run_dir.append_chunk(node, shown)
        sink(NodeOutput(node, shown, first, stream))
        end = run_dir.log_size(node)
        engine = self._engine
        if at is not None and end is not None:
            if not engine.known(node):
                engine.open_node(node, run_dir.log_path(node), at, first)
            engine.grew(node, end)
        elif shown.count:  # the log could not be written: the lines themselves, in order
            engine.text(node, first, shown.text)
        if node != self._master:
            waiting = _WAITING in shown.data
            if waiting or self._own.get("master-not-started"):
                with self._lock:
                    self._watch_rendezvous(node, shown, first, waiting)
        return shown

    def node_exited(self, node: str, rc: int) -> None:
        """A node's job failed with `rc`: a known signal is its cause now; any other code makes
        `finish()` say `unrecognized-failure` if no rule explains that node."""
        self._engine.exited(node, rc)

    def finish(self) -> None:
        self._engine.finish()
        self.flush()

    @property
    def findings(self) -> list[Finding]:
        """Every finding so far (waits for the diagnosis to read every line written)."""
        try:
            live = self.flush()
        except DiagnosisFailed:  # said once, by finish(); the findings made before it still stand
            live = self._last
        ids = {f.id for f in live}
        with self._lock:
            return live + [f for f in self._own.values() if f.id not in ids]

    def _watch_rendezvous(self, node: str, lines: Chunk, first: int, waiting: bool) -> None:
        """`master-not-started`: raised by a worker's line that says it waits for the rendezvous
        while the master is not running; resolved when each node it names said it joined. A batch
        with no such line, from a node that is not waiting to join, can change nothing: its lines
        are not looked at (once raised, the finding stays, and a flood would be read line by line)."""
        f = self._own.get("master-not-started")
        if not waiting and (f is None or f.state != "active" or node not in f.nodes or node in self._joined):
            return
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
