"""The widgets ddptui is made of: step list, node panes."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Log, Static

STATE_STYLE = {
    "pending": ("○", "dim"), "running": ("▶", "bold yellow"), "passed": ("✓", "bold green"),
    "failed": ("✗", "bold red"), "skipped": ("·", "dim italic"),
}
NODE_STYLE = {
    "pending": "dim", "connecting": "yellow", "connected": "cyan", "unreachable": "bold red",
    "launching": "yellow", "running": "bold yellow", "exited": "bold green", "failed": "bold red",
    "lost": "bold magenta", "stopped": "dim",
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
        self.border_title = node

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="pane-header")
        yield Log(max_lines=self.max_lines, auto_scroll=True, highlight=False)

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
        log = self.log
        at_bottom = log.scroll_offset.y >= log.max_scroll_y - 1
        log.write_lines(lines, scroll_end=at_bottom)
        self.total_lines += received
