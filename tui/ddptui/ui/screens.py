"""The screens: picker, problems, playbook (step-through with node panes)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Log, Static, TabbedContent, TabPane

from ..core import events as E
from ..core.errors import PlaybookError
from ..core.playbook.loader import PlaybookEntry, load_playbook
from ..core.playbook.model import Playbook
from ..core.runbook import Runbook
from .bridge import EventBridge
from ..core.diagnosis.model import Fix
from ..core.fixes import apply_fix, diff, save_revision
from ..core.logs.classify import filter_cycle
from .dialogs.fix import FixChoice, FixDialog
from .widgets import (
    SEVERITY_STYLE, CheckMatrix, NodePane, SeverityHighlighter, StepTable, evidence_text, finding_text,
)

PANE_MAX_LINES = 5000


class PickerScreen(Screen):
    """Every playbook found: this folder's playbooks/, the user's config folder, the examples."""

    BINDINGS = [Binding("enter", "open", "Open", priority=True), Binding("q", "app.quit", "Quit")]

    def __init__(self, entries: list[PlaybookEntry]) -> None:
        super().__init__()
        self.entries = entries

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Pick a playbook  [dim](enter opens it)[/]", id="picker-title")
        yield DataTable(cursor_type="row", id="picker")
        yield Footer()

    def on_mount(self) -> None:
        self.app.sub_title = "pick a playbook"
        t = self.query_one("#picker", DataTable)
        t.add_columns("playbook", "file", "from", "description")
        for e in self.entries:
            desc = Text(e.error, style="red") if e.error else Text(e.description)
            t.add_row(Text(e.name, style="bold"), _short(e.path), e.origin, desc, key=str(e.path))
        if not self.entries:
            self.query_one("#picker-title", Static).update(
                "No playbooks found. Put one in ./playbooks/ or pass a file: ddptui PLAYBOOK")
        t.focus()

    def action_open(self) -> None:
        t = self.query_one("#picker", DataTable)
        if not self.entries:
            return
        self.app.open_playbook(self.entries[t.cursor_row].path)

    @on(DataTable.RowSelected, "#picker")
    def _selected(self) -> None:
        self.action_open()


class ProblemsScreen(Screen):
    """The playbook cannot be used: every problem in a table, instead of starting."""

    BINDINGS = [Binding("q", "app.quit", "Quit"), Binding("escape", "back", "Back")]

    def __init__(self, error: PlaybookError) -> None:
        super().__init__()
        self.error = error

    def compose(self) -> ComposeResult:
        yield Header()
        n = len(self.error.problems)
        yield Static(Text.assemble((f"{self.error.path}", "bold"), f": {n} problem{'s' if n != 1 else ''} — "
                                   "fix them and open it again", style="red"), id="problems-title")
        yield DataTable(cursor_type="row", id="problems")
        yield Static("", id="problem-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.app.sub_title = "playbook problems"
        t = self.query_one("#problems", DataTable)
        t.add_columns("where", "problem", "hint")
        for p in self.error.problems:
            t.add_row(p.location(), p.message, Text(p.hint, style="dim"))
        t.focus()
        self._show(0)

    def _show(self, row: int) -> None:
        if self.error.problems:
            p = self.error.problems[row]
            self.query_one("#problem-detail", Static).update(Text(p.render()))

    @on(DataTable.RowHighlighted, "#problems")
    def _hl(self, ev: DataTable.RowHighlighted) -> None:
        self._show(ev.cursor_row)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()


class PlaybookScreen(Screen):
    """Step through a playbook; each node's output streams into its own pane."""

    BINDINGS = [
        Binding("r", "run_step", "Run step"),
        Binding("n", "next_step", "Next"),
        Binding("s", "skip_step", "Skip"),
        Binding("a", "run_all", "Run all from here"),
        Binding("x", "stop_job", "Stop job"),
        Binding("c", "copy_command", "Copy command"),
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
        super().__init__()
        self.pb = playbook
        self.bridge = EventBridge(PANE_MAX_LINES)
        self.runs_dir, self.factory = runs_dir, factory
        self.runbook = Runbook(playbook, self.bridge.push, runs_dir, factory)
        self.start_step = start_step
        self.run_all_at_start = run_all
        self.commands: dict[str, str] = {}
        self.busy = threading.Event()
        self.history: list[tuple[str, str]] = []  # (step, state) as the UI saw them: tests read it
        self.findings: list[dict] = []
        self.saved_revisions: list[Path] = []
        self.filter = "all"
        self.open_pane = playbook.master
        self._find_pane: NodePane | None = None
        self._find_at = -1
        self.fixed: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Static(self._title(), id="pb-title")
                yield StepTable(self.pb.steps, id="steps")
                yield Static("", id="step-detail")
            with TabbedContent(id="right", initial="tab-logs"):
                with TabPane("Logs", id="tab-logs"):
                    panes = Grid(id="panes") if len(self.pb.nodes) <= 4 else VerticalScroll(id="panes")
                    with panes:
                        for n in self.pb.ordered_nodes():
                            role = "master" if n.name == self.pb.master else "worker"
                            yield NodePane(n.name, role, PANE_MAX_LINES, id=f"pane-{_css_id(n.name)}")
                with TabPane("All nodes", id="tab-merged"):
                    yield _merged_log()
                with TabPane("Checks", id="tab-checks"):
                    yield CheckMatrix([n.name for n in self.pb.ordered_nodes()], id="matrix")
                    with VerticalScroll(id="evidence-box"):
                        yield Static("select a cell to see the command and its output", id="evidence")
                with TabPane("Findings", id="tab-findings"):
                    yield DataTable(cursor_type="row", id="findings")
                    with VerticalScroll(id="finding-box"):
                        yield Static("no findings", id="finding-detail")
        yield Input(placeholder="find in the focused pane (enter: next match, escape: close)", id="find")
        yield Static("", id="status")
        yield Footer()

    def _title(self) -> Text:
        pb = self.pb
        t = Text.assemble((pb.name, "bold"), "  ", (pb.description, "dim"))
        if pb.path is not None and ".rev" in pb.path.name:
            t.append(f"  [{pb.path.name}]", style="yellow")
        t.append(f"\n{len(pb.nodes)} node{'s' if len(pb.nodes) != 1 else ''} · master {pb.master} · "
                 f"{pb.job.nproc_per_node} proc/node · {pb.job.backend} · {pb.job.script}", style="dim")
        return t

    def on_mount(self) -> None:
        self.app.sub_title = self.pb.name
        self.query_one("#find", Input).display = False
        n = len(self.pb.nodes)
        grid = self.query_one("#panes")
        if isinstance(grid, Grid):
            grid.styles.grid_size_columns = 1 if n == 1 else 2
        else:  # many nodes: a list of one-line headers with one open pane (o opens the next)
            self._open_pane(self.pb.master)
        self.query_one(StepTable).focus()
        ft = self.query_one("#findings", DataTable)
        ft.add_column("severity", key="severity")
        ft.add_column("id", key="id")
        ft.add_column("nodes", key="nodes")
        ft.add_column("summary", key="summary")
        self.set_interval(1 / 30, self._drain)
        self.set_interval(1.0, self._tick)
        if self.start_step:
            self.query_one(StepTable).select(self.start_step)
        if self.run_all_at_start:
            self.action_run_all()

    # ---- the bridge: core events -> widgets, once per frame --------------------------------
    def _pane(self, node: str) -> NodePane:
        return self.query_one(f"#pane-{_css_id(node)}", NodePane)

    def _drain(self) -> None:
        d = self.bridge.drain()
        for node, lines in d.lines.items():
            self._pane(node).write(lines, d.counts[node])
        if d.merged:
            merged = self.query_one("#merged", Log)
            merged.write_lines(d.merged, scroll_end=merged.scroll_offset.y >= merged.max_scroll_y - 1)
        for ev in d.events:
            self._apply(ev)
        if d.lines:
            for node in d.lines:
                self._pane(node).refresh_header()

    def _apply(self, ev: E.Event) -> None:
        steps = self.query_one(StepTable)
        if isinstance(ev, E.StepChanged):
            steps.set_state(ev.step, ev.state, ev.message)
            self.history.append((ev.step, ev.state))
            kind = self.runbook.step(ev.step).kind
            if ev.state == "running" and kind == "check":
                self.query_one(CheckMatrix).reset()
                self.action_tab("tab-checks")
            elif ev.state in ("passed", "failed") and kind == "check":
                self.query_one(CheckMatrix).finish()
                if any(f["severity"] == "error" for f in self.findings):
                    self.action_tab("tab-findings")
            elif ev.state == "running" and kind.startswith("launch"):
                self.action_tab("tab-logs")
            if ev.state == "failed":
                self.query_one("#step-detail", Static).update(Text(f"{ev.step} failed:\n{ev.message}", style="red"))
            elif ev.state in ("passed", "running"):
                self.query_one("#step-detail", Static).update(Text(f"{ev.step}: {ev.message}"))
        elif isinstance(ev, E.NodeState):
            self._pane(ev.node).set_state(ev.state)
            if self.many_nodes and ev.state in ("failed", "lost") and self.open_pane == self.pb.master:
                self._open_pane(ev.node)  # show the first node that went wrong
            if ev.state in ("unreachable", "failed", "lost"):
                self.notify(f"{ev.node}: {ev.state} — {ev.message}", severity="error", timeout=8)
        elif isinstance(ev, E.CommandPlanned):
            self.commands[ev.node] = ev.command
            pane = self._pane(ev.node)
            pl = self.runbook.nodes[ev.node].plan
            if pl:
                pane.ranks = f"{pl.ranks.start}-{pl.ranks.stop - 1}"
            pane.write([f"$ {ev.command}"], 0)
            pane.refresh_header()
        elif isinstance(ev, E.CheckResult):
            self.query_one(CheckMatrix).set_result(ev)
        elif isinstance(ev, E.FindingRaised):
            self._add_finding(ev.finding)
        elif isinstance(ev, E.RunStarted):
            self.query_one("#status", Static).update(Text(f"run {ev.run_id} → {ev.run_dir}", style="dim"))
        elif isinstance(ev, E.Notice):
            self.notify(ev.text, severity="warning" if ev.level != "error" else "error")

    def _add_finding(self, f: dict) -> None:
        old = next((i for i, x in enumerate(self.findings) if x["id"] == f["id"]), None)
        if old is not None:  # an update (more nodes, or resolved): replace it in place
            self.findings.pop(old)
        self.findings.insert(0, f)  # newest first
        t = self.query_one("#findings", DataTable)
        t.clear()
        for x in self.findings:
            style = SEVERITY_STYLE.get(x["severity"], "") if x["state"] == "active" else "dim strike"
            t.add_row(Text(x["severity"] if x["state"] == "active" else "resolved", style=style), x["id"],
                      ", ".join(x["nodes"]), x["summary"])
        counts = {s: sum(1 for x in self.findings if x["severity"] == s and x["state"] == "active")
                  for s in ("error", "warning", "info")}
        label = "Findings " + " ".join(f"{n}{s[0].upper()}" for s, n in counts.items() if n)
        self.query_one(TabbedContent).get_tab("tab-findings").label = label
        self._show_finding(0)

    def _show_finding(self, i: int) -> None:
        if 0 <= i < len(self.findings):
            self.query_one("#finding-detail", Static).update(finding_text(self.findings[i]))

    @on(DataTable.RowHighlighted, "#findings")
    def _finding_hl(self, ev: DataTable.RowHighlighted) -> None:
        self._show_finding(ev.cursor_row)

    @on(DataTable.CellHighlighted, "#matrix")
    def _cell_hl(self, ev: DataTable.CellHighlighted) -> None:
        r = self.query_one(CheckMatrix).selected()
        if r is not None:
            self.query_one("#evidence", Static).update(evidence_text(r))

    @property
    def many_nodes(self) -> bool:
        return len(self.pb.nodes) > 4

    def _open_pane(self, node: str) -> None:
        for p in self.query(NodePane):
            p.set_class(p.node != node, "-collapsed")
        self.open_pane = node

    def action_open_next_pane(self) -> None:
        if not self.many_nodes:
            return
        names = [n.name for n in self.pb.ordered_nodes()]
        self._open_pane(names[(names.index(self.open_pane) + 1) % len(names)])

    def _focused_pane(self) -> NodePane:
        w = self.focused
        while w is not None:
            if isinstance(w, NodePane):
                return w
            w = w.parent
        return self._pane(self.pb.master)

    def action_cycle_filter(self) -> None:
        """all → NCCL → warnings+errors → each local rank → all, on every pane."""
        order = filter_cycle(max(self.pb.nproc_of(n) for n in self.pb.nodes))
        panes = list(self.query(NodePane))
        current = panes[0].filter if panes else "all"
        nxt = order[(order.index(current) + 1) % len(order)] if current in order else "all"
        for p in panes:
            p.set_filter(nxt)
        self.filter = nxt
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
        pane = self._find_pane or self._focused_pane()
        self._find_pane = pane
        hit = pane.find(needle, self._find_at)
        if hit is None:
            self.notify(f"{needle!r} is not in {pane.node}'s pane", severity="warning")
        else:
            self._find_at = hit
            self.query_one("#status", Static).update(Text(f"{pane.node}: line {hit + 1} of the pane has {needle!r}"))

    def on_key(self, event) -> None:
        box = self.query_one("#find", Input)
        if event.key == "escape" and box.display:
            box.display = False
            self._find_pane, self._find_at = None, -1
            self.query_one(StepTable).focus()
            event.stop()

    def _selected_finding(self) -> dict | None:
        if not self.findings:
            return None
        t = self.query_one("#findings", DataTable)
        return self.findings[min(max(t.cursor_row, 0), len(self.findings) - 1)]

    def action_jump_to_evidence(self) -> None:
        """The selected finding's first line evidence, in its node's pane."""
        f = self._selected_finding()
        evs = [e for e in (f or {}).get("evidence", []) if e.get("line")]
        if not evs:
            self.notify("this finding has no log line to jump to")
            return
        e = evs[0]
        pane = self._pane(e["node"]) if e["node"] in {p.node for p in self.query(NodePane)} else None
        if pane is None:
            self.notify(f"{e['node']} has no pane here", severity="warning")
            return
        if pane.filter != "all":
            pane.set_filter("all")
        if self.many_nodes:
            self._open_pane(pane.node)
        self.action_tab("tab-logs")
        hit = pane.find(e["text"])
        if hit is None:
            where = f"{self.runbook.run_dir.log_path(pane.node)}" if self.runbook.run_dir else "the run's log"
            self.notify(f"line {e['line']} is no longer in the pane; it is in {where}", timeout=8)
        else:
            pane.log.focus()
            self.query_one("#status", Static).update(Text(f"{pane.node}: line {e['line']} of its log"))

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_fix(self) -> None:
        if not self.findings:
            self.notify("no findings to fix")
            return
        f = self._selected_finding()
        fx = f.get("fix")
        if not fx or fx.get("scope") == "manual":
            self.notify(f"{f['id']}: {fx.get('explain') if fx else 'no fix known'}", timeout=10)
            return
        fix = Fix(env=fx.get("env") or {}, scope=fx["scope"], per_node=fx.get("per_node") or {},
                  explain=fx.get("explain", ""))
        old = self.pb.source
        try:
            new = apply_fix(old, fix)
        except Exception as e:  # the YAML could not be edited: say so, change nothing
            self.notify(f"cannot apply the fix to the playbook: {e}", severity="error")
            return
        name = self.pb.path.name if self.pb.path else "playbook.yaml"

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

        self.app.push_screen(FixDialog(f, diff(old, new, name), self.pb.path), answered)

    @work(thread=True, group="save")
    def _save_fixed(self, text: str) -> None:
        path = save_revision(self.pb.path, text)  # file I/O: off the UI thread
        self.app.call_from_thread(self.notify, f"saved {path} (the original is kept)", timeout=8)
        self.saved_revisions.append(path)

    @work(thread=True, group="fix")
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
        table = self.query_one(StepTable)
        for st in pb.steps:
            table.set_state(st.id, "pending", st.title)
        for pane in self.query(NodePane):
            pane.log.clear()
            pane.buffer.clear()
            pane.total_lines = 0
            pane.set_state("pending")
        self.findings = []
        self.query_one("#merged", Log).clear()
        self.query_one("#findings", DataTable).clear()
        self.query_one("#finding-detail", Static).update(f"{finding_id}: fix applied, relaunching…")
        self.query_one("#pb-title", Static).update(self._title())
        self.action_tab("tab-logs")

    def _tick(self) -> None:
        for pane in self.query(NodePane):
            if pane.state == "running":
                pane.refresh_header()

    # ---- actions: each calls one core function in a worker thread ---------------------------
    def _selected(self) -> str | None:
        return self.query_one(StepTable).selected

    @work(thread=True, exclusive=True, group="runbook")
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
        nxt = self.runbook.next_step()
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
        nxt = self.runbook.next_step()
        if nxt is None:
            self.notify("every step has run; select one and press r to rerun it")
            return
        self.query_one(StepTable).select(nxt.id)
        self._work("run", nxt.id)

    def action_skip_step(self) -> None:
        if self._guard_busy():
            return
        sid = self._selected()
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
        if not self.runbook.job_running:
            self.notify("no job is running")
            return
        threading.Thread(target=self.runbook.stop_job, daemon=True).start()

    def action_copy_command(self) -> None:
        focused = self.focused
        node = None
        while focused is not None and node is None:
            if isinstance(focused, NodePane):
                node = focused.node
            focused = focused.parent
        node = node or self.pb.master
        cmd = self.commands.get(node)
        if not cmd:
            self.notify("no command yet: run the launch steps first")
            return
        self.app.copy_to_clipboard(cmd)
        self.notify(f"copied {node}'s command")


def _merged_log() -> Log:
    log = Log(max_lines=PANE_MAX_LINES, highlight=True, id="merged")
    log.highlighter = SeverityHighlighter()
    return log


def _short(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(p)


def _css_id(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
