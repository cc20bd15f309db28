"""Steps a playbook: which step runs next, each step's state, start-at, rerun, skip.

One Runbook is one run: it owns the run directory, one transport per node (`launch.nodes`) and,
through the orchestrator (`launch.orchestrator`), the job's processes. Its methods block; the TUI
calls them from worker threads, the CLI from its main thread. Everything it learns goes out
through `sink` as events; consumers read those and the small public API below, nothing else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .checks.preflight import PreflightResult
from .checks.stage import check_report
from .diagnosis.live import LiveDiagnosis
from .diagnosis.model import Finding
from .errors import StepFailed
from .events import (
    Event, FindingRaised, NodeOutput, NodeState, Notice, PlaybookRevised, RunFinished, RunStarted, Sink,
    StepChanged,
)
from .fixes import Proposal, write_revision
from .launch.nodes import NodeRun
from .launch.orchestrator import Orchestrator
from .launch.plan import NodePlan
from .launch.summary import record_revisions, run_summary
from .logs.rundir import RunDir
from .playbook.model import Playbook, Step
from .redact import Redactor
from .runbook_steps import StepHandlers
from .states import NodeStatus, StepState
from .transport.base import Transport

TransportFactory = Callable[[Playbook, str], Transport]
STEP_END_GRACE = 10.0  # s close() waits for the running step to say how it ended


@dataclass(frozen=True)
class FixOutcome:
    runbook: Runbook  # the run of the revision
    revision: Path
    ok: bool  # every step of the rerun passed
    resolved: bool  # ...and none of the fixed findings is active in it


class Runbook(StepHandlers):
    def __init__(self, playbook: Playbook, sink: Sink, runs_dir: Path, transport_factory: TransportFactory) -> None:
        self._sink = sink
        self._runs_dir = Path(runs_dir)
        self._factory = transport_factory
        self.states: dict[str, StepState] = {s.id: StepState.PENDING for s in playbook.steps}
        self.allocation = None  # the Slurm allocation (slurm.alloc.Allocation) of a `transport: slurm` run
        self.run_dir: RunDir | None = None
        self.preflight: PreflightResult | None = None
        self._lock = threading.RLock()
        self._idle = threading.Event()
        self._idle.set()
        self._step_thread: threading.Thread | None = None  # the thread of the step that runs
        self._started = time.time()
        self.closed = False
        self._noted: set[str] = set()
        self._bind(playbook)
        self._steps: dict[str, Callable[[Step], str]] = {
            "connect": self._connect, "allocate": self._allocate, "check": self._check, "shell": self._shell,
            "launch-master": self._launch_master, "wait-master": self._wait_master,
            "launch-workers": lambda step: self.launch.launch_workers(),
            "watch": lambda step: self.launch.watch(step.timeout),
        }

    def _bind(self, playbook: Playbook) -> None:
        """The run's nodes, their diagnosis and launcher; again once a Slurm allocation names the nodes."""
        if getattr(self, "launch", None) is not None:
            self.launch.diagnosis.close()  # the diagnosis process of the nodes before (if it ever started)
        self.pb = playbook
        self._nodes: dict[str, NodeRun] = {n.name: NodeRun(n) for n in playbook.ordered_nodes()}
        diagnosis = LiveDiagnosis(len(playbook.nodes), playbook.master, lambda: self._nodes[playbook.master].running,
                                  lambda f: self.emit(FindingRaised.of(f)), playbook.job.rdzv_timeout,
                                  playbook.bandwidth.min_busbw_gbps)
        self.launch = Orchestrator(playbook, self._nodes, self.emit, self._sink, self._ensure_run_dir,
                                   self._set_node, diagnosis)

    # ---- public API: what the TUI and the CLI may read ----------------------------------------
    @property
    def steps(self) -> tuple[Step, ...]:
        return self.pb.steps

    def step(self, step_id: str) -> Step:
        return self.pb.step(step_id)

    def next_step(self) -> Step | None:
        """The first step that is neither passed nor skipped."""
        return next((s for s in self.pb.steps if not self.states[s.id].done), None)

    @property
    def node_names(self) -> list[str]:
        """Master first, then the workers in playbook order."""
        return list(self._nodes)

    def node_state(self, node: str) -> NodeStatus:
        return self._nodes[node].state

    def plan_of(self, node: str) -> NodePlan | None:
        return self._nodes[node].plan

    @property
    def running_nodes(self) -> list[str]:
        return [n for n, nr in self._nodes.items() if nr.running]

    @property
    def job_running(self) -> bool:
        return self.launch.job_running

    @property
    def run_path(self) -> Path | None:
        return self.run_dir.path if self.run_dir else None

    def log_path(self, node: str) -> Path | None:
        return self.run_dir.log_path(node) if self.run_dir else None

    def findings(self) -> list[Finding]:
        return (list(self.preflight.findings) if self.preflight else []) + self.launch.diagnosis.findings

    def active(self, finding_id: str) -> bool:
        return any(f.id == finding_id and f.active for f in self.findings())

    def check_report(self) -> dict:
        return check_report(self.pb, str(self.pb.path or self.pb.name), self._nodes, self.preflight)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Until no step runs (a stopped job's watch step returns soon after the stop). The running
        step's own thread (one that closes or relaunches its run) does not wait for itself: False."""
        if threading.current_thread() is self._step_thread:
            return False
        return self._idle.wait(timeout)

    # ---- events ---------------------------------------------------------------------------------
    def emit(self, ev: Event) -> None:
        if self.run_dir is not None and not isinstance(ev, NodeOutput):
            self.run_dir.event(ev.to_json())
            if isinstance(ev, FindingRaised):  # its evidence quotes lines: shown as the logs show them
                ev = FindingRaised(masked_finding(ev.finding, self.run_dir.redactor), ev.t)
        self._sink(ev)

    def _ensure_run_dir(self) -> RunDir:
        with self._lock:
            if self.run_dir is None:
                self.run_dir = RunDir(self._runs_dir, self.pb.name, self.pb.source, Redactor.for_playbook(self.pb))
                self.run_dir.on_write_error = self._write_failed
                self.emit(RunStarted(self.run_dir.run_id, str(self.run_dir.path), self.pb.name, tuple(self._nodes)))
            return self.run_dir

    def _write_failed(self, what: str, path: Path, why: str) -> None:
        """A full disk mid-run: said once per file; the job and its output on screen go on."""
        if what in self._nodes:
            self.emit(Notice("error", f"{what}: log writing stopped: {path}: {why}; its output is still shown, "
                                      "the log on disk ends there", what))
        else:
            self.emit(Notice("error", f"writing {path} stopped: {why}; the run goes on"))

    def new_run(self) -> RunDir:
        """A fresh launch after a finished job is a run of its own: this folder is finished, the next begins."""
        with self._lock:
            _finish_run_dir(self)
            self.run_dir, self._started = None, time.time()
            return self._ensure_run_dir()

    def _set_node(self, nr: NodeRun, state: NodeStatus, message: str = "", **kw) -> None:
        nr.state = state
        self.emit(NodeState(nr.name, state, message, **kw))
        if state in (NodeStatus.EXITED, NodeStatus.FAILED, NodeStatus.LOST, NodeStatus.STOPPED, NodeStatus.DETACHED):
            self._write_summary()

    # ---- stepping ---------------------------------------------------------------------------------
    def _set(self, step: Step, state: StepState, message: str = "") -> None:
        self.states[step.id] = state
        self.emit(StepChanged(step.id, state, message))

    def skip(self, step_id: str) -> None:
        step = self.step(step_id)
        if self.states[step_id] == StepState.RUNNING:
            return
        self._ensure_run_dir()
        self._set(step, StepState.SKIPPED)

    def run_step(self, step_id: str) -> bool:
        """Run one step (again, if it ran before). True when it passed."""
        step = self.step(step_id)
        self._ensure_run_dir()
        self._idle.clear()
        self._step_thread = threading.current_thread()
        self._set(step, StepState.RUNNING, step.title)
        try:
            message = self._steps[step.kind](step) or ""
            self._set(step, StepState.PASSED, message)
            return True
        except StepFailed as e:  # a step the user's stop ended (torchrun's 143 in wait-master) says so
            self._set(step, StepState.FAILED, "stopped by the user" if self.launch.stopped_by_user else str(e))
            return False
        except KeyboardInterrupt:  # the summary must not say "running" after Ctrl-C
            self._set(step, StepState.FAILED, "interrupted by the user")
            raise
        except Exception as e:  # a bug in ddptui must not leave the step "running" forever
            self._set(step, StepState.FAILED, f"internal error: {type(e).__name__}: {e}")
            raise
        finally:
            self._write_summary()
            self._step_thread = None
            self._idle.set()

    def run_all(self, start: str | None = None) -> bool:
        """Run from `start` (default: the next step) to the end, stopping at the first failure."""
        ids = [s.id for s in self.pb.steps]
        nxt = self.next_step()
        first = start or (nxt.id if nxt else None)
        if first is None:
            return all(self.states[i].done for i in ids)
        for sid in ids[ids.index(first):]:
            if self.launch.stopped_by_user or self.closed:
                return False
            if self.states[sid] == StepState.SKIPPED and sid != first:
                continue
            if not self.run_step(sid):
                return False
        return True

    # ---- lifecycle ----------------------------------------------------------------------------------
    def stop_job(self, wait: bool = True) -> None:
        self.launch.stop_job(wait)

    def detach_job(self) -> dict[str, dict]:
        """Leave the job running on every node (the user's choice when quitting)."""
        return self.launch.detach()

    def first_failure(self) -> dict | None:
        return self.launch.first_failure()

    def relaunch(self, proposal: Proposal) -> Runbook:
        """Apply a fix: stop this run, write the revision, and return a new Runbook on it (not yet
        started) that reports to the same sink. The caller runs it (`run_all`) and judges it (`active`)."""
        from .playbook.loader import load_playbook

        self.close()
        self.wait_idle(60)  # the stopped job's watch step returns once its processes are gone
        path = write_revision(proposal)
        new = Runbook(load_playbook(path), self._sink, self._runs_dir, self._factory)
        record_revisions(new._ensure_run_dir(), self.run_dir, self.pb)
        new.emit(PlaybookRevised(str(path), ",".join(dict.fromkeys(proposal.ids)), proposal.diff))
        return new

    def summary(self) -> dict:
        return run_summary(self.pb, self._nodes, self.states, self.run_dir, self._started, self.launch,
                           self.findings())

    def _write_summary(self) -> None:
        if self.run_dir is not None:
            with self._lock:
                self.run_dir.write_summary(self.summary())

    def close(self) -> None:
        """Stop what runs, close every connection, write the summary. Safe to call twice."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self.launch.close()
        # the step that ran (a stopped or left job's watch) ends within a slice of its wait: its last
        # state goes into the final summary, which said "watch": "running" after the TUI's quit
        self.wait_idle(STEP_END_GRACE)
        for nr in self._nodes.values():
            if nr.transport is not None:
                nr.transport.close()
        if self.allocation is not None and self.allocation.release():
            self.emit(Notice("info", f"released Slurm allocation {self.allocation.job_id}"))
        _finish_run_dir(self)
        self.launch.diagnosis.close()


def masked_finding(f: Finding, r: Redactor) -> Finding:
    """A finding snapshot whose evidence and summary hide this run's secret values."""
    from dataclasses import replace

    ev = [replace(e, text=r.text(e.text, "output")) for e in f.evidence]
    return replace(f, summary=r.text(f.summary, "output"), evidence=ev)


def _finish_run_dir(rb: Runbook) -> None:
    """The run's last summary, RunFinished, and its folder's files closed (the folder stays rb.run_dir)."""
    if rb.run_dir is not None:
        s = rb.summary()
        rb.run_dir.write_summary(s)
        rb.emit(RunFinished(s["ok"], s))
        rb.run_dir.close(rb.node_names)


def apply_and_rerun(rb: Runbook, proposal: Proposal, switched: Callable[[Runbook], None] = lambda rb: None) -> FixOutcome:
    """A fix, end to end: stop `rb`'s job, write the revision, run it from the start, judge it.
    `switched(new)` is told of the new run before it starts (the TUI swaps its panes then)."""
    new = rb.relaunch(proposal)
    switched(new)
    ok = new.run_all()
    return FixOutcome(new, Path(new.pb.path), ok, ok and not any(new.active(i) for i in proposal.ids))
