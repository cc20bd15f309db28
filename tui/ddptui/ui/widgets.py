"""The widgets ddptui is made of: step list, node panes."""

from __future__ import annotations

import collections

import time

from rich.highlighter import Highlighter
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Log, Static

from ..core.logs.classify import line_kind, line_matches

STATE_STYLE = {
    "pending": ("○", "dim"), "running": ("▶", "bold yellow"), "passed": ("✓", "bold green"),
    "failed": ("✗", "bold red"), "skipped": ("·", "dim italic"),
}
NODE_STYLE = {
    "pending": "dim", "connecting": "yellow", "connected": "cyan", "unreachable": "bold red",
    "launching": "yellow", "running": "bold yellow", "exited": "bold green", "failed": "bold red",
    "lost": "bold magenta", "stopped": "dim", "detached": "bold cyan",
}


class StepTable(DataTable):
    """The playbook's steps with their state; the cursor row is the selected step."""

    DEFAULT_CSS = """
    StepTable { height: auto; max-height: 60%; }
    """

    def __init__(self, steps, **kw) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self._steps = steps

    def on_mount(self) -> None:
        self.add_column(" ", key="icon", width=2)
        self.add_column("step", key="step")
        self.add_column("state", key="state", width=8)
        self.add_column("", key="message")
        for s in self._steps:
            icon, style = STATE_STYLE["pending"]
            self.add_row(Text(icon, style=style), s.id, Text("pending", style=style), Text(s.title, style="dim"),
                         key=s.id)

    def set_state(self, step_id: str, state: str, message: str = "") -> None:
        icon, style = STATE_STYLE.get(state, ("?", ""))
        self.update_cell(step_id, "icon", Text(icon, style=style))
        self.update_cell(step_id, "state", Text(state, style=style))
        if message:
            first = message.splitlines()[0]
            self.update_cell(step_id, "message", Text(first, style="red" if state == "failed" else ""))

    @property
    def selected(self) -> str | None:
        if not self._steps or self.cursor_row < 0:
            return None
        return self._steps[min(self.cursor_row, len(self._steps) - 1)].id

    def select(self, step_id: str) -> None:
        for i, s in enumerate(self._steps):
            if s.id == step_id:
                self.move_cursor(row=i)


KIND_STYLE = {"warn": "yellow", "error": "bold red", "result": "bold green", "command": "cyan", "info": "dim"}


class SeverityHighlighter(Highlighter):
    """Whole-line colours by severity: NCCL WARN and warnings, errors and tracebacks, results.

    Applied by Log only to the lines on screen, so a flood costs nothing here."""

    def highlight(self, text: Text) -> None:
        style = KIND_STYLE.get(line_kind(text.plain))
        if style:
            text.stylize(style)


class NodePane(Vertical):
    """One node: a header (name, role, ranks, state, elapsed) over its log.

    The log keeps at most `max_lines`; the full log is on disk in the run directory. It follows
    the tail only while the user is at the bottom.
    """

    DEFAULT_CSS = """
    NodePane { border: round $panel-lighten-2; height: 1fr; min-height: 6; }
    NodePane:focus-within { border: round $accent; }
    NodePane > .pane-header { height: 1; padding: 0 1; background: $panel; }
    NodePane > Log { height: 1fr; }
    NodePane.-collapsed { height: 3; min-height: 3; }
    NodePane.-collapsed > Log { display: none; }
    """

    def __init__(self, node: str, role: str, max_lines: int, **kw) -> None:
        super().__init__(**kw)
        self.node = node
        self.role = role
        self.ranks = ""
        self.state = "pending"
        self.started: float | None = None
        self.ended: float | None = None
        self.max_lines = max_lines
        self.total_lines = 0
        self.filter = "all"
        # the pane's bounded store: what a filter is applied to (the full log is on disk)
        self.buffer: collections.deque[str] = collections.deque(maxlen=max_lines)
        self.border_title = node

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="pane-header")
        log = Log(max_lines=self.max_lines, auto_scroll=True, highlight=True)
        log.highlighter = SeverityHighlighter()
        yield log

    @property
    def log(self) -> Log:
        return self.query_one(Log)

    def _header(self) -> Text:
        parts: list[tuple[str, str]] = [(self.node, "bold"), (self.role, "cyan" if self.role == "master" else "")]
        if self.ranks:
            parts.append((f"ranks {self.ranks}", ""))
        parts.append((self.state, NODE_STYLE.get(self.state, "")))
        if self.started:
            parts.append((f"{(self.ended or time.time()) - self.started:.1f}s", "dim"))
        parts.append((f"{self.total_lines} lines", "dim"))
        t = Text()
        for i, (text, style) in enumerate(parts):
            if i:
                t.append(" · ", style="dim")
            t.append(text, style=style)
        return t

    def refresh_header(self) -> None:
        self.query_one(".pane-header", Static).update(self._header())

    def set_state(self, state: str) -> None:
        self.state = state
        if state == "running" and self.started is None:
            self.started = time.time()
            self.ended = None
        if state in ("exited", "failed", "lost", "stopped"):
            self.ended = time.time()
        if state == "launching":
            self.started, self.ended = None, None
        self.refresh_header()

    def write(self, lines: list[str], received: int) -> None:
        self.buffer.extend(lines)
        self.total_lines += received
        if self.filter != "all":
            lines = [x for x in lines if line_matches(x, self.filter)]
            if not lines:
                return
        log = self.log
        at_bottom = log.scroll_offset.y >= log.max_scroll_y - 1
        log.write_lines(lines, scroll_end=at_bottom)

    def set_filter(self, flt: str) -> None:
        """Show only the lines that match, from what the pane holds; new lines are filtered too."""
        self.filter = flt
        log = self.log
        log.clear()
        log.write_lines([x for x in self.buffer if line_matches(x, flt)], scroll_end=True)
        self.border_subtitle = "" if flt == "all" else f"filter: {flt}"

    def find(self, needle: str, after: int = -1) -> int | None:
        """Scroll to the next line (after `after`) that contains `needle`; its index, or None."""
        lines = self.log.lines
        for i in list(range(after + 1, len(lines))) + list(range(0, after + 1)):
            if needle in lines[i]:
                self.log.scroll_to(y=max(0, i - 2), animate=False)
                return i
        return None


CHECK_COLUMNS = ("ping", "hostname", "interfaces", "route", "env", "ib", "shm", "gpus", "python", "torch",
                 "backend", "master-port", "master-reachable", "ping-master", "script", "probe")
CHECK_STYLE = {"pass": ("✓", "green"), "warn": ("!", "bold yellow"), "fail": ("✗", "bold red"),
               "skip": ("–", "dim"), "running": ("…", "yellow")}
SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}


class CheckMatrix(DataTable):
    """Nodes × checks, filled in live as each node's results arrive."""

    def __init__(self, nodes: list[str], **kw) -> None:
        super().__init__(cursor_type="cell", **kw)
        self.nodes = nodes
        self.results: dict[tuple[str, str], object] = {}

    def on_mount(self) -> None:
        self.add_column("node", key="node")
        for c in CHECK_COLUMNS:
            self.add_column(c, key=c)
        for n in self.nodes:
            self.add_row(Text(n, style="bold"), *[Text("·", style="dim") for _ in CHECK_COLUMNS], key=n)

    def reset(self) -> None:
        self.results.clear()
        for n in self.nodes:
            for c in CHECK_COLUMNS:
                self.update_cell(n, c, Text("…", style="yellow"))

    def set_result(self, ev) -> None:
        col = ev.check if ev.check in CHECK_COLUMNS else "probe"
        self.results[(ev.node, col)] = ev
        icon, style = CHECK_STYLE.get(ev.status, ("?", ""))
        self.update_cell(ev.node, col, Text(icon, style=style))

    def finish(self) -> None:
        """Checks that did not report for a node (not applicable there) show as blank."""
        for n in self.nodes:
            for c in CHECK_COLUMNS:
                if (n, c) not in self.results:
                    self.update_cell(n, c, Text(" "))

    def selected(self):
        row, col = self.cursor_coordinate
        if col == 0 or row >= len(self.nodes):
            return None
        return self.results.get((self.nodes[row], CHECK_COLUMNS[col - 1]))


def evidence_text(ev) -> Text:
    """A check's verdict, the command that produced it, and its output."""
    icon, style = CHECK_STYLE.get(ev.status, ("?", ""))
    t = Text()
    t.append(f"{ev.node} · {ev.check}: ", style="bold")
    t.append(f"{icon} {ev.status}", style=style)
    t.append(f"  {ev.summary}\n")
    if ev.command:
        t.append("$ " + ev.command + "\n", style="cyan")
    if ev.output:
        out = ev.output if len(ev.output) < 6000 else ev.output[:6000] + "\n…"
        t.append(out, style="")
    return t


def finding_text(f: dict) -> Text:
    t = Text()
    t.append(f"{f['id']}", style=SEVERITY_STYLE.get(f["severity"], "") + " underline")
    t.append(f"  {f['severity']} · {', '.join(f['nodes'])} · {f['state']}\n", style="dim")
    t.append(f["summary"] + "\n", style="bold")
    if f.get("explanation"):
        t.append(f["explanation"] + "\n")
    if f.get("evidence"):
        t.append("\nevidence\n", style="bold")
        for e in f["evidence"]:
            where = f"{e['node']}" + (f":{e['line']}" if e.get("line") else "")
            t.append(f"  {where}  ", style="cyan")
            t.append(f"{e['text']}\n")
    fix = f.get("fix")
    if fix:
        t.append("\nfix ", style="bold green")
        if fix.get("env"):
            t.append(" ".join(f"{k}={v}" for k, v in fix["env"].items()) + f" ({fix['scope']})", style="green")
        for node, env in (fix.get("per_node") or {}).items():
            t.append(f" {node}: " + " ".join(f"{k}={v}" for k, v in env.items()), style="green")
        t.append("\n" + fix.get("explain", "") + "\n")
        for alt in fix.get("alternatives") or ():
            t.append(f"  or: {alt}\n", style="dim")
        if fix.get("scope") != "manual":
            t.append("press f to preview this change to the playbook\n", style="dim italic")
    if any(e.get("line") for e in f.get("evidence") or ()):
        t.append("press j to see the evidence line in its pane\n", style="dim italic")
    return t
