"""A screen that steps through a playbook: every core call in a worker thread, one at a time.

It owns the runbook and the event bridge; the subclass lays the screen out and shows the events
(`_drain`). Worker errors become notifications here, in words; the app never closes because of one.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from ...core.playbook.model import Playbook, Step
from ...core.states import StepState
from ..bridge import EventBridge
from ..clipboard import copy_out
from ..errors import error_words
from ..widgets.panes import PANE_MAX_LINES, enclosing_pane
from ..widgets.steps import StepTable

if TYPE_CHECKING:
    from ...core.runbook import Runbook


class StepThroughScreen(Screen):
    """Run, skip, run-all and stop steps of `self.runbook`; the step table's cursor is the selected step."""

    BINDINGS = [
        Binding("r", "run_step", "Run", tooltip="Run step: the selected one (again)"),
        Binding("n", "next_step", "Next", tooltip="Next step: run the next pending one"),
        Binding("s", "skip_step", "Skip", tooltip="Skip step: mark the selected one skipped"),
        Binding("a", "run_all", "Run all", tooltip="Run all from here: the selected step to the end"),
        Binding("x", "stop_job", "Stop", tooltip="Stop job: on every node (TERM, then KILL)"),
        Binding("c", "copy_command", "Copy", tooltip="Copy command: the focused node's command line"),
    ]

    def __init__(self, playbook: Playbook, runs_dir: Path, factory) -> None:
        super().__init__()
        self.pb = playbook
        self.bridge = EventBridge(PANE_MAX_LINES)
        self.runs_dir, self.factory = runs_dir, factory
        self._runbook: Runbook | None = None
        self._runbook_lock = threading.Lock()
        self.commands: dict[str, str] = {}
        self.busy = threading.Event()
        self.history: list[tuple[str, str]] = []  # (step, state) as the UI saw them: tests read it

    @property
    def runbook(self) -> Runbook:
        """The run, made on first use rather than with the screen: importing it (the launch, the
        checks, the diagnosis) was a fifth of the playbook screen's first frame. A step's worker asks for
        it first from a worker thread (the first step run), so the UI thread never waits for it; a
        test, the fix dialog or the UI thread may be first: one is made, whoever asks."""
        with self._runbook_lock:
            if self._runbook is None:
                from ...core.runbook import Runbook

                self._runbook = Runbook(self.pb, self.bridge.push, self.runs_dir, self.factory)
            return self._runbook

    @runbook.setter
    def runbook(self, rb: Runbook) -> None:
        with self._runbook_lock:
            self._runbook = rb

    @property
    def made_runbook(self) -> Runbook | None:
        """The run if it was made (a screen that never ran anything has none to stop or close)."""
        return self._runbook

    @property
    def job_running(self) -> bool:
        rb = self._runbook
        return rb is not None and rb.job_running

    def next_pending(self) -> Step | None:
        """The step `n` runs: the runbook's next, or the first before anything ran."""
        rb = self._runbook
        return rb.next_step() if rb is not None else next(iter(self.pb.steps), None)

    def _drain(self) -> bool:
        """Show what the runbook reported since the last frame (the subclass knows where)."""
        raise NotImplementedError

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that raised: the error in words, as a notification; the app keeps running."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            text, severity = error_words(event.worker.error)
            self.notify(text, severity=severity, timeout=15)

    # ---- actions: each calls one core function in a worker thread ---------------------------
    def _selected(self) -> str | None:
        return self.query_one(StepTable).selected

    @work(thread=True, exclusive=True, group="runbook", exit_on_error=False)
    def _work(self, what: str, step_id: str | None) -> None:
        self.busy.set()
        try:
            rb = self.runbook
            if what == "run" and step_id:
                rb.run_step(step_id)
            elif what == "all":
                rb.run_all(step_id)
            elif what == "skip" and step_id:
                rb.skip(step_id)
            elif what == "stop":
                rb.stop_job()
        finally:
            self.busy.clear()
            self.app.call_from_thread(self._after_work)

    def _after_work(self) -> None:
        self._drain()
        nxt = self.next_pending()
        if nxt is not None:
            self.query_one(StepTable).select(nxt.id)

    def _guard_busy(self) -> bool:
        if self.busy.is_set():
            self.notify("a step is running; wait for it, or stop the job (x)", severity="warning")
            return True
        return False

    def action_run_step(self) -> None:
        if not self._guard_busy():
            self._work("run", self._selected())

    def action_next_step(self) -> None:
        if self._guard_busy():
            return
        nxt = self.next_pending()
        if nxt is None:
            self.notify("every step has run; select one and press r to rerun it")
            return
        self.query_one(StepTable).select(nxt.id)
        self._work("run", nxt.id)

    def action_skip_step(self) -> None:
        if self._guard_busy():
            return
        sid = self._selected()
        if sid and self.runbook.states.get(sid) == StepState.PASSED:  # skipping it would only forget its result
            self.notify(f"{sid} passed already: nothing to skip (r runs it again)", timeout=5)
            return
        if sid:
            self._work("skip", sid)
            steps = [s.id for s in self.pb.steps]
            i = steps.index(sid)
            if i + 1 < len(steps):
                self.query_one(StepTable).select(steps[i + 1])

    def action_run_all(self) -> None:
        if not self._guard_busy():
            self._work("all", self._selected())

    def action_stop_job(self) -> None:
        if not self.job_running:
            self.notify("no job is running")
            return
        threading.Thread(target=self.runbook.stop_job, daemon=True).start()

    def action_copy_command(self) -> None:
        pane = enclosing_pane(self.focused)
        node = pane.node if pane else self.pb.master
        cmd = self.commands.get(node)
        if not cmd:
            self.notify("no command yet: run the launch steps first")
            return
        copy_out(self.app, cmd, f"{node}'s command")
