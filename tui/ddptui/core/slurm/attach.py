"""`ddptui attach JOBID`: follow a Slurm batch job's output as it grows, per node, diagnosed live.

Read-only: nothing here cancels, signals or changes the job. Slurm is asked only through
commands.py (`scontrol show job`, `scontrol show hostnames`); the job's state comes from a
`status(job_id) -> JobStatus` callable (commands.status in production; a caller may pass another
source of the same answers). The output file(s) (StdOut, and StdErr when it is another file) are
read where scontrol says they are, so ddptui must run where that path is visible (the login node
and the nodes share it).

What it emits are the core events a run emits (RunStarted, NodeState, NodeOutput, FindingRaised,
Notice, RunFinished): `run --headless`'s printer and the TUI's panes consume them unchanged. What
it reads is recorded as a run directory (per-node `<node>.log`, events.jsonl, summary.json), so
`ddptui diagnose` and `ddptui bundle` work on it afterwards.

It follows until the job is in a terminal state and the files are drained (DRAIN_READS empty reads
in a row after that, so lines the nodes wrote last still arrive over a shared filesystem); while
the job is PENDING it keeps waiting, saying its state and Slurm's reason when they change.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import events as E
from ..diagnosis.live import LiveDiagnosis
from ..logs.rundir import RunDir
from ..states import NodeStatus
from . import commands
from .commands import JobStatus, SlurmError
from .output import OutputSplitter

POLL = 0.2  # seconds between reads of the output
STATUS_EVERY = 2.0  # seconds between `scontrol show job` calls while the job runs
DRAIN_READS = 3  # empty reads in a row, once the job has ended, before the output is called drained
MISSING_GRACE = 10.0  # seconds a started job's output may take to appear here before it is an error
READ_MAX = 4 << 20
_EXITED = re.compile(r"^srun: error: ([\w.-]+): tasks? ([\d,-]+): Exited with exit code (\d+)")


class OutputUnreadable(SlurmError):
    """The job's output file cannot be read from here (bad input: exit 2); the message says which and why."""


def _path(rec: dict[str, str], key: str) -> Path | None:
    v = rec.get(key, "")
    return Path(v) if v and v not in ("(null)", "None") else None


@dataclass
class _Source:
    """One output file followed from where it was read up to."""

    path: Path
    stream: str
    splitter: OutputSplitter
    offset: int = 0
    fh: object = None

    def read(self) -> bytes | None:
        """New bytes (b"" when none), None while the file does not exist; raises OutputUnreadable."""
        if self.fh is None:
            try:
                self.fh = open(self.path, "rb")  # noqa: SIM115 (kept open while the job runs)
            except FileNotFoundError:
                return None
            except OSError as e:
                raise OutputUnreadable(f"{self.path}: cannot read the job's {self.stream}: {e.strerror}") from None
        try:
            data = self.fh.read(READ_MAX)
            if not data and os.stat(self.path).st_size < self.offset:  # truncated (a requeued job starts over)
                self.fh.seek(0)
                self.offset = 0
                data = self.fh.read(READ_MAX)
        except OSError as e:
            raise OutputUnreadable(f"{self.path}: cannot read the job's {self.stream}: {e.strerror}") from None
        self.offset += len(data)
        return data

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


@dataclass
class Attachment:
    """Follow one job. `run()` returns when the job has ended and its output is drained, or when
    `stop()` is called (any thread); KeyboardInterrupt passes through, the run directory closed."""

    job_id: str
    sink: E.Sink
    runs_dir: Path
    status: Callable[[str], JobStatus] = commands.status
    show_job: Callable[[str], dict[str, str]] = commands.show_job
    expand: Callable[[str], list[str]] = commands.hostnames
    poll: float = POLL
    missing_grace: float = MISSING_GRACE
    run_dir: RunDir | None = None
    final: JobStatus | None = None
    error: str | None = None  # what stopped a run in a thread (the TUI's), in words
    node_states: dict[str, dict] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def stop(self) -> None:
        self._stop.set()

    @property
    def findings(self):
        return self.diagnosis.findings if getattr(self, "diagnosis", None) else []

    @property
    def ok(self) -> bool:
        """The job COMPLETED and no error finding stands."""
        done = self.final is not None and self.final.state.startswith("COMPLETED")
        return done and not any(f.severity == "error" and f.active for f in self.findings)

    # ---- the loop ---------------------------------------------------------------------------------
    def run(self) -> bool:
        rec = self.show_job(self.job_id)  # NoSuchJob, NoSlurm: before anything is written
        st = JobStatus.of(self.job_id, rec)
        out, err = _path(rec, "StdOut"), _path(rec, "StdErr")
        if out is None:
            raise OutputUnreadable(f"slurm job {self.job_id} has no StdOut file (an interactive job? "
                                   "attach follows batch jobs)")
        given = self.expand(st.nodes) if st.nodes else []
        self.sources = [_Source(out, "stdout", OutputSplitter(given))]
        if err is not None and err != out:
            self.sources.append(_Source(err, "stderr", OutputSplitter(given)))
        self._counts: dict[str, int] = {}
        self.diagnosis: LiveDiagnosis | None = None
        try:
            self._follow(st)
        finally:
            self._close()
        return self.ok

    def _follow(self, st: JobStatus) -> None:
        said = None
        last_status = time.monotonic()
        quiet_after_end = 0
        missing_since = None
        while not self._stop.is_set():
            self.final = st
            if (st.state, st.reason) != said:
                said = (st.state, st.reason)
                self._emit(E.Notice("info", f"slurm job {self.job_id}: {st.state}"
                                    + (f" ({st.reason})" if st.reason else "")
                                    + (f" on {st.nodes}" if st.nodes else "")))
            if self.run_dir is None and (st.nodes or st.terminal):
                self._open_run(st)
            got = False
            for src in self.sources:
                data = src.read()
                if data is None and src.stream == "stdout" and not st.state.startswith("PENDING"):
                    missing_since = missing_since or time.monotonic()
                    if time.monotonic() - missing_since > self.missing_grace:
                        raise OutputUnreadable(f"{src.path}: the job's output is not there from here (slurm job "
                                               f"{self.job_id} is {st.state}): is it on a filesystem this "
                                               "machine shares with the nodes?")
                elif data:
                    got = True
                    if self.run_dir is None:
                        self._open_run(st)
                    self._route(src, src.splitter.feed(data))
            if st.terminal and self.sources[0].fh is not None:  # ended, and its output is here: drain it
                quiet_after_end = 0 if got else quiet_after_end + 1
                if quiet_after_end >= DRAIN_READS:
                    break
            if not got:
                self._stop.wait(self.poll)
            if not st.terminal and time.monotonic() - last_status >= (STATUS_EVERY if st.nodes else self.poll * 5):
                st = self.status(self.job_id)
                last_status = time.monotonic()
        for src in self.sources:
            if self.run_dir is not None:
                self._route(src, src.splitter.flush())

    # ---- what was read ----------------------------------------------------------------------------
    def _open_run(self, st: JobStatus) -> None:
        if st.nodes and not self.sources[0].splitter.header and self.sources[0].splitter.nodes[0] == "task0":
            names = self.expand(st.nodes)  # the job was pending when attached: its nodes are known now
            for src in self.sources:
                src.splitter.use_names(names)
        names = list(self.sources[0].splitter.nodes) or ["task0"]
        text = stand_in_playbook(self.job_id, names, self.sources[0].path)
        self.run_dir = RunDir(self.runs_dir, f"slurm-{self.job_id}", text)
        self.started = time.time()
        self.diagnosis = LiveDiagnosis(len(names), names[0], lambda: True,
                                       lambda f: self._emit(E.FindingRaised.of(f)))
        self._emit(E.RunStarted(self.run_dir.run_id, str(self.run_dir.path), f"slurm job {self.job_id}",
                                tuple(names)))

    def _route(self, src: _Source, batches: dict[str, list[str]]) -> None:
        header = src.splitter.header
        if header is not None:  # the other file's tasks get the header's names too
            for other in self.sources:
                if other.splitter.header is None:
                    other.splitter.use_names(header.nodes)
        rd, diag = self.run_dir, self.diagnosis
        for node, lines in batches.items():
            if node not in self.node_states:
                self.node_states[node] = {"state": NodeStatus.RUNNING, "exit_code": None, "log": str(rd.log_path(node))}
                self._emit(E.NodeState(node, NodeStatus.RUNNING, f"slurm job {self.job_id}"))
            diag.deliver(rd, self.sink, node, lines, src.stream)  # disk, screen, then the diagnosis
            for line in lines:
                if line.startswith("srun: error: ") and (m := _EXITED.match(line)) and m.group(1) == node:
                    rc = int(m.group(3))
                    self.node_states[node].update(state=NodeStatus.FAILED if rc else NodeStatus.EXITED, exit_code=rc)
                    if rc:
                        diag.node_exited(node, rc)

    def _emit(self, ev: E.Event) -> None:
        if self.run_dir is not None and not isinstance(ev, E.NodeOutput):
            self.run_dir.event(ev.to_json())
        self.sink(ev)

    def _close(self) -> None:
        for src in getattr(self, "sources", ()):
            src.close()
        if self.run_dir is None:
            return
        self.diagnosis.finish()
        st = self.final
        ended = st is not None and st.terminal
        for node, d in self.node_states.items():
            if d["state"] == NodeStatus.RUNNING and ended:
                failed = st.state.split()[0] != "COMPLETED"
                d["state"] = NodeStatus.FAILED if failed else NodeStatus.EXITED
            if ended or d["state"] != NodeStatus.RUNNING:
                self._emit(E.NodeState(node, d["state"], st.state if st else "", rc=d["exit_code"]))
        summary = self.summary()
        self.run_dir.write_summary(summary)
        self._emit(E.RunFinished(self.ok, summary))
        self.run_dir.close(summary["nodes"])
        self.diagnosis.close()

    def summary(self) -> dict:
        st = self.final
        names = list(self.sources[0].splitter.nodes)
        nodes = {n: {"role": "master" if i == 0 else "worker", "node_rank": i if n in names else None,
                     **{k: str(v) if k == "state" else v for k, v in d.items()}}
                 for i, (n, d) in enumerate(sorted(self.node_states.items(),
                                                   key=lambda kv: names.index(kv[0]) if kv[0] in names else 1 << 30))}
        return {"playbook": f"slurm-{self.job_id}", "run_id": self.run_dir.run_id, "started": self.started,
                "ended": time.time(), "ok": self.ok,
                "slurm": {"job_id": self.job_id, "state": st.state if st else None, "reason": st.reason if st else "",
                          "nodes": st.nodes if st else "", "stdout": str(self.sources[0].path),
                          "stderr": str(self.sources[1].path) if len(self.sources) > 1 else None,
                          "ended": bool(st and st.terminal)},
                "nodes": nodes, "findings": [f.to_json() for f in self.findings]}


def stand_in_playbook(job_id: str, nodes: list[str], out: Path) -> str:
    """The run directory's playbook.yaml: not a playbook that ran (Slurm ran the job), the nodes and
    their order for `diagnose`, `bundle` and `open` to read."""
    return (f"# ddptui attach: slurm job {job_id}, read from {out}\n"
            "# a stand-in that names the job's nodes (task i on the i-th): Slurm ran the job, not ddptui\n"
            f"name: slurm-{job_id}\n"
            f"nodes: [{', '.join(nodes)}]\n"
            f"master: {nodes[0]}\n"
            "job:\n"
            f"  script: slurm-batch-job-{job_id}\n"
            "steps:\n  - {id: watch, kind: watch}\n")
