"""Step through a playbook; each node's output streams into its own pane.

The screen composes the widgets (steps, pane grid, all-nodes log, checks, findings), routes core
events to them once per frame, and owns the actions; every action calls core in a worker thread.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Header, Input, Static, TabbedContent, TabPane

from ...core import events as E
from ...core.diagnosis.model import Fix
from ...core.fixes import apply_fix, diff, save_revision
from ...core.logs.classify import filter_cycle
from ...core.playbook.loader import load_playbook
from ...core.playbook.model import Playbook
from ...core.runbook import Runbook
from ..dialogs.fix import FixChoice, FixDialog
from ..widgets.checks import ChecksTab
from ..widgets.findings import FindingsTab
from ..widgets.pane_grid import PaneGrid
from ..widgets.panes import MergedLog, NodePane, enclosing_pane
from ..widgets.steps import StepsPanel, StepTable
from .step_through import StepThroughScreen


class PlaybookScreen(StepThroughScreen):
    """Step through a playbook; each node's output streams into its own pane."""

    BINDINGS = [
        Binding("f", "fix", "Fix…"),
        Binding("j", "jump_to_evidence", "Jump to evidence", show=False),
        Binding("v", "cycle_filter", "Filter"),
        Binding("o", "open_next_pane", "Open next pane", show=False),
        Binding("slash", "find", "Find"),
        Binding("1", "tab('tab-logs')", "Logs", show=False),
        Binding("2", "tab('tab-checks')", "Checks", show=False),
        Binding("3", "tab('tab-findings')", "Findings", show=False),
        Binding("4", "tab('tab-merged')", "All nodes", show=False),
        Binding("tab", "focus_next", "Focus", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, playbook: Playbook, runs_dir: Path, factory, start_step: str | None = None,
                 run_all: bool = False) -> None:
        super().__init__(playbook, runs_dir, factory)
        self.start_step = start_step
        self.run_all_at_start = run_all
        self.saved_revisions: list[Path] = []
        self.fixed: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            yield StepsPanel(self.pb, id="left")
            with TabbedContent(id="right", initial="tab-logs"):
                yield PaneGrid("Logs", self.pb, id="tab-logs")
                with TabPane("All nodes", id="tab-merged"):
                    yield MergedLog(id="merged")
                yield ChecksTab("Checks", [n.name for n in self.pb.ordered_nodes()], id="tab-checks")
                yield FindingsTab("Findings", id="tab-findings")
        yield Input(placeholder="find in the focused pane (enter: next match, escape: close)", id="find")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.app.sub_title = self.pb.name
        self.query_one("#find", Input).display = False
        self.query_one(StepTable).focus()
        self.set_interval(1 / 30, self._drain)
        self.set_interval(1.0, self._tick)
        if self.start_step:
            self.query_one(StepTable).select(self.start_step)
        if self.run_all_at_start:
            self.action_run_all()

    # ---- the parts ----------------------------------------------------------------------------------
    @property
    def pane_grid(self) -> PaneGrid:
        return self.query_one(PaneGrid)

    @property
    def findings(self) -> list[dict]:
        return self.query_one(FindingsTab).findings

    @property
    def open_pane(self) -> str:
        return self.pane_grid.open_pane

    def _status(self, text: Text) -> None:
        self.query_one("#status", Static).update(text)

    def _tick(self) -> None:
        self.pane_grid.tick()

    # ---- the bridge: core events -> widgets, once per frame --------------------------------
    def _drain(self) -> None:
        d = self.bridge.drain()
        self.pane_grid.write(d.lines, d.counts)
        if d.merged:
            self.query_one(MergedLog).append(d.merged)
        for ev in d.events:
            self._apply(ev)

    def _apply(self, ev: E.Event) -> None:
        if isinstance(ev, E.StepChanged):
            self.query_one(StepsPanel).show_step(ev)
            self.history.append((ev.step, ev.state))
            kind = self.runbook.step(ev.step).kind
            if ev.state == "running" and kind == "check":
                self.query_one(ChecksTab).matrix.reset()
                self.action_tab("tab-checks")
            elif ev.state in ("passed", "failed") and kind == "check":
                self.query_one(ChecksTab).matrix.finish()
                if any(f["severity"] == "error" for f in self.findings):
                    self.action_tab("tab-findings")
            elif ev.state == "running" and kind.startswith("launch"):
                self.action_tab("tab-logs")
        elif isinstance(ev, E.NodeState):
            grid = self.pane_grid
            grid.pane(ev.node).set_state(ev.state)
            if grid.many_nodes and ev.state in ("failed", "lost") and grid.open_pane == self.pb.master:
                grid.open(ev.node)  # show the first node that went wrong
            if ev.state in ("unreachable", "failed", "lost"):
                self.notify(f"{ev.node}: {ev.state} — {ev.message}", severity="error", timeout=8)
        elif isinstance(ev, E.CommandPlanned):
            self.commands[ev.node] = ev.command
            pane = self.pane_grid.pane(ev.node)
            pl = self.runbook.nodes[ev.node].plan
            if pl:
                pane.ranks = f"{pl.ranks.start}-{pl.ranks.stop - 1}"
            pane.write([f"$ {ev.command}"], 0)
            pane.refresh_header()
        elif isinstance(ev, E.CheckResult):
            self.query_one(ChecksTab).matrix.set_result(ev)
        elif isinstance(ev, E.FindingRaised):
            self.query_one(FindingsTab).add(ev.finding)
        elif isinstance(ev, E.RunStarted):
            self._status(Text(f"run {ev.run_id} → {ev.run_dir}", style="dim"))
        elif isinstance(ev, E.Notice):
            self.notify(ev.text, severity="warning" if ev.level != "error" else "error")

    # ---- panes: open, filter, find, jump -------------------------------------------------------------
    def _focused_pane(self) -> NodePane:
        return enclosing_pane(self.focused) or self.pane_grid.pane(self.pb.master)

    def action_open_next_pane(self) -> None:
        self.pane_grid.open_next()

    def action_cycle_filter(self) -> None:
        """all → NCCL → warnings+errors → each local rank → all, on every pane."""
        nxt = self.pane_grid.cycle_filter(filter_cycle(max(self.pb.nproc_of(n) for n in self.pb.nodes)))
        self.notify(f"showing: {nxt}" + ("" if nxt == "all" else " (v for the next filter)"), timeout=3)

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
            self.pane_grid.end_find()
            self.query_one(StepTable).focus()
            event.stop()

    def action_jump_to_evidence(self) -> None:
        """The selected finding's first line evidence, in its node's pane."""
        f = self.query_one(FindingsTab).selected()
        evs = [e for e in (f or {}).get("evidence", []) if e.get("line")]
        if not evs:
            self.notify("this finding has no log line to jump to")
            return
        e = evs[0]
        if not self.pane_grid.has_pane(e["node"]):
            self.notify(f"{e['node']} has no pane here", severity="warning")
            return
        self.action_tab("tab-logs")
        pane, hit = self.pane_grid.reveal(e["node"], e["text"])
        if hit is None:
            where = f"{self.runbook.run_dir.log_path(pane.node)}" if self.runbook.run_dir else "the run's log"
            self.notify(f"line {e['line']} is no longer in the pane; it is in {where}", timeout=8)
        else:
            pane.log.focus()
            self._status(Text(f"{pane.node}: line {e['line']} of its log"))

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    # ---- fixes: preview, save, apply and relaunch ----------------------------------------------------
    def action_fix(self) -> None:
        f = self.query_one(FindingsTab).selected()
        if f is None:
            self.notify("no findings to fix")
            return
        fx = f.get("fix")
        if not fx or fx.get("scope") == "manual":
            self.notify(f"{f['id']}: {fx.get('explain') if fx else 'no fix known'}", timeout=10)
            return
        try:
            new, patch = propose_fix(self.pb, fx)
        except Exception as e:  # the YAML could not be edited: say so, change nothing
            self.notify(f"cannot apply the fix to the playbook: {e}", severity="error")
            return

        def answered(choice: FixChoice | None) -> None:
            if self.pb.path is None:
                return
            if choice is FixChoice.SAVE_ONLY:
                self._save_fixed(new)
            elif choice is FixChoice.APPLY_AND_RELAUNCH:
                if self.busy.is_set() and not self.runbook.job_running:
                    self.notify("a step is running; wait for it first", severity="warning")
                    return
                self._apply_and_relaunch(new, f["id"])

        self.app.push_screen(FixDialog(f, patch, self.pb.path), answered)

    @work(thread=True, group="save", exit_on_error=False)
    def _save_fixed(self, text: str) -> None:
        path = save_revision(self.pb.path, text)  # file I/O: off the UI thread
        self.app.call_from_thread(self.notify, f"saved {path} (the original is kept)", timeout=8)
        self.saved_revisions.append(path)

    @work(thread=True, group="fix", exit_on_error=False)
    def _apply_and_relaunch(self, text: str, finding_id: str) -> None:
        """Stop the job everywhere, save the fixed playbook as a new revision, run it again in order."""
        self.app.call_from_thread(self.notify, f"applying the fix for {finding_id}: stopping the job on every node…")
        self.runbook.close()  # TERM to every node's process group, then KILL; summary written
        deadline = time.monotonic() + 60  # the old run's step worker ends once its job is stopped
        while self.busy.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
        path = save_revision(self.pb.path, text)
        self.saved_revisions.append(path)
        pb = load_playbook(path)
        self.app.call_from_thread(self._switch_playbook, pb, finding_id)
        self.busy.set()
        try:
            ok = self.runbook.run_all()
        finally:
            self.busy.clear()
        self.app.call_from_thread(self._after_work)
        still = [f for f in self.runbook.findings() if f.id == finding_id and f.state == "active"]
        if ok and not still:
            self.fixed.append(finding_id)
            self.app.call_from_thread(self.notify, f"{finding_id} is gone: the relaunched run ({path.name}) is healthy",
                                      timeout=10)
        else:
            self.app.call_from_thread(self.notify, f"the relaunched run ({path.name}) did not pass; see its findings",
                                      severity="warning", timeout=10)

    def _switch_playbook(self, pb: Playbook, finding_id: str) -> None:
        self._drain()  # the old run's last events first
        self.pb = pb
        self.runbook = Runbook(pb, self.bridge.push, self.runs_dir, self.factory)
        self.query_one(StepsPanel).show_playbook(pb)
        self.pane_grid.reset()
        self.query_one(MergedLog).clear()
        self.query_one(FindingsTab).clear(f"{finding_id}: fix applied, relaunching…")
        self.action_tab("tab-logs")


def propose_fix(pb: Playbook, fx: dict) -> tuple[str, str]:
    """The playbook's text with a finding's fix applied, and the diff; raises if the YAML cannot be edited."""
    fix = Fix(env=fx.get("env") or {}, scope=fx["scope"], per_node=fx.get("per_node") or {},
              explain=fx.get("explain", ""))
    new = apply_fix(pb.source, fix)
    return new, diff(pb.source, new, pb.path.name if pb.path else "playbook.yaml")
