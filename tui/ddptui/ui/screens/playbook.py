"""Step through a playbook; each node's output streams into its own pane.

The screen composes the widgets (steps, pane grid, all-nodes log, checks, findings), routes core
events to them once per frame, and owns the actions; every action calls core in a worker thread.
"""

from __future__ import annotations

import gc
import textwrap
import time
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.widgets import Header, Input, Static, TabbedContent, TabPane

from ...core import events as E
from ...core.diagnosis.model import Finding
from ...core.logs.classify import CHATTER, filter_cycle
from ...core.paths import tilde
from ...core.playbook.model import Playbook
from ...core.states import NodeStatus, StepState
from ..bridge import Drained
from ..widgets.checks import ChecksTab
from ..widgets.findings import FindingsTab
from ..widgets.footer import KeysFooter
from ..widgets.pane_grid import PaneGrid
from ..widgets.panes import MergedLog, NodePane, enclosing_pane
from ..widgets.results import ResultsTab
from ..widgets.steps import StepsPanel, StepTable
from .allocation import AllocationView
from .frames import Frames
from .fixing import FixActions
from .step_through import StepThroughScreen
from .tabs import TabActions

TABS = Binding.Group("Tabs", compact=True)
FILTERS = Binding.Group("Filter", compact=True)  # v and h: one footer entry, so the footer keeps `?` at 100 columns
TAB_IDS = ("tab-logs", "tab-merged", "tab-checks", "tab-findings", "tab-results")  # in the order they are drawn
LOGS_ONLY = {"cycle_filter", "hide_chatter", "find"}  # what acts on the panes of the Logs tab

KEYS = [  # the screen's keys: the footer, `?` and the palette are made from them
    Binding("f", "fix", "Fix", tooltip="Fix: the selected finding's change to the playbook, as a diff"),
    Binding("j", "jump_to_evidence", "Jump", tooltip="Jump to evidence: the selected finding's line in its pane, or its check's cell"),
    Binding("v", "cycle_filter", "Filter", group=FILTERS,
            tooltip="Filter: the panes show all, all but launcher INFO, NCCL, warnings+errors, each local rank"),
    Binding("h", "hide_chatter", "Chatter", group=FILTERS, tooltip="Chatter: hide (or show) the launcher's chatter, torchrun's "
            "own INFO lines (the log on disk keeps every line)"),
    Binding("slash", "find", "Find", tooltip="Find: a text in the focused pane"),
    Binding("o", "open_next_pane", "Open next", tooltip="Open next pane: the next node's (more than 4 nodes)"),
    Binding("1", "show_tab('tab-logs')", "Logs", group=TABS, tooltip="Logs: one pane per node"),
    Binding("2", "show_tab('tab-merged')", "All nodes", group=TABS, tooltip="All nodes: every line, merged"),
    Binding("3", "show_tab('tab-checks')", "Checks", group=TABS, tooltip="Checks: nodes × checks"),
    Binding("4", "show_tab('tab-findings')", "Findings", group=TABS, tooltip="Findings: what the diagnosis found"),
    Binding("5", "show_tab('tab-results')", "Results", group=TABS, tooltip="Results: each rank's result, the bandwidth"),
    Binding("tab", "cycle_pane(1)", "Pane", priority=True, tooltip="Next pane: focus the next node's pane"),
    Binding("shift+tab", "cycle_pane(-1)", "Previous pane", show=False, priority=True,
            tooltip="Previous pane: focus the previous node's pane"),
    Binding("q", "app.quit", "Quit", tooltip="Quit: asks first while the job runs"),
]


class PlaybookScreen(TabActions, Frames, AllocationView, FixActions, StepThroughScreen):
    """Step through a playbook; each node's output streams into its own pane.

    The footer shows the keys that do something now (`check_action`); `?` lists them all."""

    BINDINGS = KEYS

    def __init__(self, playbook: Playbook, runs_dir: Path, factory, start_step: str | None = None,
                 run_all: bool = False) -> None:
        super().__init__(playbook, runs_dir, factory)
        self.start_step = start_step
        self.run_all_at_start = run_all
        self.saved_revisions: list[Path] = []
        self.clock = time.time  # "now" for the panes (a replay's moment, for a recorded run)
        self.fixed: list[str] = []
        self.run_id: str | None = None  # the run (directory) the panes show
        self.run_line = Text("")  # the status line's rest state: where the run is on disk
        self._held: Drained | None = None  # what came after a Slurm allocation, until its panes are mounted
        self._next_drain = 0.0  # when the next frame may drain, while lines keep coming (monotonic)

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            yield StepsPanel(self.pb, id="left")
            with TabbedContent(id="right", initial="tab-logs"):
                yield PaneGrid("Logs", self.pb, clock=lambda: self.clock(), id="tab-logs")
                with TabPane("All nodes", id="tab-merged"):
                    yield MergedLog(id="merged")
                yield ChecksTab("Checks", [n.name for n in self.pb.ordered_nodes()], id="tab-checks")
                yield FindingsTab("Findings", id="tab-findings")
                yield ResultsTab("Results", id="tab-results")
        yield Input(placeholder="find in the focused pane (enter: next match, escape: close)", id="find")
        yield Static("", id="status")
        yield KeysFooter(show_command_palette=False)  # ctrl+p is in `?`: the keys get the width

    def on_mount(self) -> None:
        """Textual calls this for a subclass' screen too, after the subclass' own `on_mount` (which
        must not call it again: that made a second 30-a-second frame timer and a second tick)."""
        self.app.sub_title = self.sub_title or self.pb.name  # a read-only screen's own words
        self.query_one("#find", Input).display = False
        self.bridge.gate = self.app.input_first  # the readers wait while a key is answered
        self.query_one(StepTable).focus()
        self.set_interval(1 / 30, self._frame)
        self.set_interval(1.0, self._tick)
        if self.start_step:
            self.query_one(StepTable).select(self.start_step)
        if self.run_all_at_start:
            self.action_run_all()
        # gc.freeze, once the screen is drawn: Python's full (generation 2) collection walks every
        # object that lives in a cycle, and Textual, Rich and the screen's widgets are ~120,000 of them;
        # under a flood the frames' strips and segments filled the younger generations fast enough for a
        # full collection every few seconds, each 60-200 ms of the UI thread that a key pressed then
        # waited out (measured with gc.callbacks in bench.tui_flood's TUI, 4 x 1M lines). Frozen, those
        # objects are skipped (a full collection took 5-15 ms); what is made later is collected as
        # before, and reference counting frees a frozen object as ever: only a frozen cycle that turns
        # to garbage waits, until `on_unmount` thaws them all.
        self.call_after_refresh(gc.freeze)

    def on_unmount(self) -> None:
        gc.unfreeze()

    # ---- the parts ----------------------------------------------------------------------------------
    @property
    def pane_grid(self) -> PaneGrid:
        return self.query_one(PaneGrid)

    @property
    def findings(self) -> list[Finding]:
        return self.query_one(FindingsTab).findings

    @property
    def open_pane(self) -> str:
        return self.pane_grid.open_pane

    def _status(self, text: Text | None = None) -> None:
        """One line (CSS), cut with an ellipsis, never wrapped out of sight; no text: the run's line."""
        text = (text or self.run_line).copy()
        text.no_wrap, text.overflow = True, "ellipsis"
        self.query_one("#status", Static).update(text, layout=False)

    def _tick(self) -> None:
        self.pane_grid.tick()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide (and disable) the keys that would do nothing now, so the footer shows what matters."""
        try:
            if action == "open_next_pane":
                return self.pane_grid.many_nodes
            if action == "stop_job":
                return self.job_running
            if action == "copy_command":
                return bool(self.commands)
            tab = self.query_one(TabbedContent).active
            if action in ("fix", "jump_to_evidence"):  # they act on the selected finding
                return bool(self.findings) and tab == "tab-findings"
            if action in LOGS_ONLY:
                return tab == "tab-logs"
        except NoMatches:  # asked while the screen is still being built
            return True
        return True

    def _apply(self, ev: E.Event) -> None:
        if isinstance(ev, E.StepChanged):
            self.query_one(StepsPanel).show_step(ev)
            self.history.append((ev.step, ev.state))
            kind = self.pb.step(ev.step).kind  # the screen's playbook is its runbook's (an allocation sets both)
            if ev.state is StepState.RUNNING and kind == "check":
                self.query_one(ChecksTab).matrix.reset()
                self.action_tab("tab-checks")
            elif ev.state in (StepState.PASSED, StepState.FAILED) and kind == "check":
                self.query_one(ChecksTab).matrix.finish()
                if any(f.severity == "error" and f.active for f in self.findings):
                    self.action_tab("tab-findings")
            elif ev.state is StepState.RUNNING and kind.startswith("launch"):
                if kind == "launch-master":
                    self.query_one(ResultsTab).clear()  # a new launch: the last one's results no longer stand
                self.action_tab("tab-logs")
            elif ev.state in (StepState.PASSED, StepState.FAILED) and kind == "watch":
                self._job_ended()
        elif isinstance(ev, E.NodeState):
            grid = self.pane_grid
            grid.pane(ev.node).set_state(ev.state, ev.t)
            if grid.many_nodes and ev.state in (NodeStatus.FAILED, NodeStatus.LOST) and grid.open_pane == self.pb.master:
                grid.open(ev.node)  # show the first node that went wrong
            if ev.state.bad and self.app.screen is self:  # not over a dialog (a host key's): the pane says it
                self.notify(f"{ev.node}: {ev.state} — {ev.message}", severity="error", timeout=8)
            if ev.state == NodeStatus.UNREACHABLE and ev.message:  # its pane would be empty: why, wrapped
                pane = grid.pane(ev.node)  # (a log's lines do not); not "unreachable": a refused host key answered
                pane.write(textwrap.wrap(f"ddptui: no connection to {ev.node}: {ev.message}",
                                         max(16, pane.log.scrollable_content_region.width - 1 or 80)), 0)
        elif isinstance(ev, E.CommandPlanned):
            self.commands[ev.node] = ev.command
            pane = self.pane_grid.pane(ev.node)
            pane.ranks = f"{ev.ranks.start}-{ev.ranks.stop - 1}"
            pane.write([f"$ {ev.command}"], 0)
            pane.refresh_header()
        elif isinstance(ev, E.CheckResult):
            self.query_one(ChecksTab).matrix.set_result(ev)
        elif isinstance(ev, E.FindingRaised):
            self.query_one(FindingsTab).add(ev.finding)
        elif isinstance(ev, E.Allocated):
            self._allocated(ev)
        elif isinstance(ev, E.RunStarted):
            if self.run_id is not None and ev.run_id != self.run_id:  # a fresh launch: a run of its own
                self._new_run_view()
            self.run_id = ev.run_id
            self.run_line = Text(f"run {tilde(ev.run_dir)}", style="dim")  # its id ends the path
            self._status()
        elif isinstance(ev, E.RunFinished):
            self.query_one(ResultsTab).from_summary(ev.summary)
        elif isinstance(ev, E.Notice):
            self.notify(ev.text, severity="warning" if ev.level != "error" else "error")

    @on(TabbedContent.TabActivated)
    def _tab_clicked(self) -> None:
        self.refresh_bindings()  # a tab chosen with the mouse changes the keys that apply too

    def _new_run_view(self) -> None:
        """Panes, merged log and results empty for the next run (the last one's are in its directory)."""
        self.pane_grid.reset()
        self.query_one(MergedLog).clear()
        self.query_one(ResultsTab).clear()

    def _job_ended(self) -> None:
        """The job is over: its results, unless an error finding is what to read first."""
        if self.query_one(ResultsTab).results and not any(f.severity == "error" and f.active for f in self.findings):
            self.action_tab("tab-results")

    # ---- panes: open, filter, find, jump -------------------------------------------------------------
    def _focused_pane(self) -> NodePane:
        return enclosing_pane(self.focused) or self.pane_grid.pane(self.pb.master)

    def action_cycle_pane(self, step: int) -> None:
        """tab / shift+tab: focus the next (previous) node's pane; `c`, `/` and the arrows then act on
        it. From outside the panes (step list, tabs), tab enters the master's pane."""
        if self.query_one(TabbedContent).active != "tab-logs":
            self.action_tab("tab-logs")
        panes = self.pane_grid.panes
        current = enclosing_pane(self.focused)
        i = panes.index(current) + step if current in panes else (0 if step > 0 else -1)
        pane = panes[i % len(panes)]
        if self.pane_grid.many_nodes:
            self.pane_grid.open(pane.node)
        pane.log.focus()
        self._status(Text(f"{pane.node}: c copies its command, / finds in it", style="dim"))

    def action_open_next_pane(self) -> None:
        self.pane_grid.open_next()

    def action_cycle_filter(self) -> None:
        """all → NCCL → warnings+errors → each local rank → all, on every pane."""
        nxt = self.pane_grid.cycle_filter(filter_cycle(max(self.pb.nproc_of(n) for n in self.pb.nodes)))
        # on the status line, not a toast: a toast mounted and sized is two more layouts of the screen
        # before the key's answer settles, on every press
        self._status(Text(f"showing: {nxt}" + ("" if nxt == "all" else " (v for the next filter)"), style="dim"))

    def action_hide_chatter(self) -> None:
        """The panes without torchrun's INFO lines, or (when so already) all again: a filter like v's."""
        nxt = "all" if all(p.filter == CHATTER for p in self.pane_grid.panes) else CHATTER
        self.pane_grid.set_filter(nxt)
        self._status(Text("launcher INFO lines hidden (h shows them; the log on disk has them)" if nxt == CHATTER
                          else "showing: all", style="dim"))

    def action_find(self) -> None:
        box = self.query_one("#find", Input)
        box.display = True
        box.focus()

    @on(Input.Submitted, "#find")
    def _find_next(self, ev: Input.Submitted) -> None:
        needle = ev.value
        if not needle:
            return
        found = self.pane_grid.find_next(needle, self._focused_pane())
        if found is not None:
            self._status(found)

    def on_key(self, event) -> None:
        box = self.query_one("#find", Input)
        if event.key == "escape" and box.display:
            box.display = False
            self._status()  # not the last match's line, left over
            self.pane_grid.end_find()
            self.query_one(StepTable).focus()
            event.stop()

    def action_jump_to_evidence(self) -> None:
        """The selected finding's first line evidence, in its node's pane."""
        f = self.query_one(FindingsTab).selected()
        evs = [e for e in (f.evidence if f else []) if e.line]
        if not evs:
            if f is None or not self.jump_to_check(f):  # a check's finding: to its cell
                self.notify("this finding has no log line to jump to")
            return
        e = evs[0]
        if not self.pane_grid.has_pane(e.node):
            self.notify(f"{e.node} has no pane here", severity="warning")
            return
        self.action_tab("tab-logs")
        pane, hit = self.pane_grid.reveal(e.node, e.text)
        if hit is None:
            rb = self.made_runbook  # a recorded or attached run has none: nothing is made for this
            where = (rb.log_path(pane.node) if rb is not None else None) or "the run's log"
            self.notify(f"line {e.line} is no longer in the pane; it is in {where}", timeout=8)
        else:
            pane.log.focus()
            self._status(Text(f"{pane.node}: line {e.line} of its log"))

