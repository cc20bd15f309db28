"""A node's pane (header over its log), and the all-nodes log, both coloured by line severity."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from rich.highlighter import Highlighter
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Log, Static

from ...core.states import NodeStatus
from ...core.logs.classify import fold, line_kind, matching, newest_matching
from .pane_log import PaneLog

PANE_MAX_LINES = 5000  # lines a pane (and the all-nodes log) keeps; the full log is on disk
FOLLOW_LINES = 200  # at most this many new lines a frame reach a log that follows its tail (more than a
# screen); under a flood the rest wait in the pane's buffer, and the log is rebuilt from it once the flood calms

NODE_STYLE = {
    NodeStatus.PENDING: "dim", NodeStatus.CONNECTING: "yellow", NodeStatus.CONNECTED: "cyan",
    NodeStatus.UNREACHABLE: "bold red", NodeStatus.LAUNCHING: "yellow", NodeStatus.RUNNING: "bold yellow",
    NodeStatus.EXITED: "bold green", NodeStatus.FAILED: "bold red", NodeStatus.LOST: "bold magenta",
    NodeStatus.STOPPED: "dim", NodeStatus.DETACHED: "bold cyan",
}

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
    the tail only while the user is at the bottom. A click anywhere on it focuses it; `enter` shows
    the lines it shows whole (a Log cuts long lines at its width).
    """

    BINDINGS = [Binding("enter", "read_lines", "Whole lines", tooltip="Read the lines this pane shows, whole and wrapped")]

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
        self.state = NodeStatus.PENDING
        self.started: float | None = None
        self.ended: float | None = None
        self.max_lines = max_lines
        self.total_lines = 0
        self.filter = "all"
        self.note = ""  # said in the header: a filter that matches nothing
        # the pane's bounded store: what a filter is applied to (the full log is on disk)
        self.buffer: collections.deque[str] = collections.deque(maxlen=max_lines)
        self.stale = False  # the log skipped lines that the buffer has (see write)
        self.tail_due = False  # a flood's newest lines wait for this pane's turn to be drawn (draw_tail)
        self.undrawn = 0  # lines that came since, the newest in the buffer
        self.fed = False  # lines came since the last tick
        self.border_title = f"{node} · {role}"
        self.clock: Callable[[], float] = time.time  # a recorded run's replay sets its own

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="pane-header")
        log = PaneLog(max_lines=self.max_lines, auto_scroll=True, highlight=True)
        log.highlighter = SeverityHighlighter()
        yield log

    @property
    def log(self) -> PaneLog:
        return self.query_one(PaneLog)

    def _header(self) -> Text:
        # the node and its role are the border's title: the state comes first, what a narrow pane must show
        state = self.state + (f" {max(0.0, (self.ended or self.clock()) - self.started):.1f}s" if self.started else "")
        parts: list[tuple[str, str]] = [(state, NODE_STYLE.get(self.state, ""))]
        if self.ranks:
            parts.append((f"ranks {self.ranks}", ""))
        if self.note:
            parts.append((self.note, "dim italic"))
        t = Text()
        for i, (text, style) in enumerate(parts):
            if i:
                t.append(" · ", style="dim")
            t.append(text, style=style)
        return t

    def refresh_header(self) -> None:
        # one line high (CSS): no layout pass, which would cost a whole screen's (tens of ms)
        self.query_one(".pane-header", Static).update(self._header(), layout=False)
        self._subtitle()

    def _subtitle(self) -> None:
        """The bottom border: how many lines came (all of them, whatever the filter), and the filter when one is on."""
        shown = "" if self.stale else f" · {self.log.line_count} shown"  # stale: the log is not what it shows yet
        self.border_subtitle = f"{self.total_lines} lines" + ("" if self.filter == "all" else f"{shown} · filter: {self.filter}")

    def set_state(self, state: str, at: float | None = None) -> None:
        """The node's new state, reached at `at` (the event's time; default: now)."""
        self.state = state
        now = self.clock() if at is None else at
        if state == NodeStatus.RUNNING and self.started is None:
            self.started = now
            self.ended = None
        if state in (NodeStatus.EXITED, NodeStatus.FAILED, NodeStatus.LOST, NodeStatus.STOPPED):
            self.ended = now
        if state == "launching":
            self.started, self.ended = None, None
        self.refresh_header()

    def write(self, lines: list[str], received: int, shown: bool = True) -> bool:
        """A frame's lines (`received` came, these are the newest). A hidden pane only keeps them. One
        that follows its tail under a flood (more than FOLLOW_LINES) keeps them too, and its log skips
        lines until `catch_up`: the newest FOLLOW_LINES are drawn at the pane's turn (`draw_tail`),
        one pane a frame. Whether the pane waits for that turn (it did not draw)."""
        self.buffer.extend(lines)
        self.total_lines += received
        self.fed = True
        if not shown:
            self.stale = True
            return False
        following = self.following
        if following and len(lines) > FOLLOW_LINES:
            self.stale = True  # the log skips what is older than the newest lines
            self.undrawn = self.undrawn + len(lines) if self.tail_due else len(lines)
            self.tail_due = True
            return True
        elif self.stale:  # the flood calmed, or the user scrolled up: the whole buffer, once
            self.catch_up()
            return False
        elif self.filter != "all":
            lines = matching(lines, self.filter)
        if not lines:
            return False
        if self.filter != "all":
            self._note("")
        self.log.write_lines([fold(x) for x in lines], scroll_end=following)
        return False

    def draw_tail(self) -> None:
        """A flood's turn for this pane: its newest FOLLOW_LINES that the filter keeps, and its line count.
        All panes drawn in the frame that took a flood cost the whole screen (60-100 ms under 4 x 1M)."""
        if not self.tail_due:
            return
        self.tail_due = False
        if not self.stale or not self.following:  # rebuilt since (catch_up), or the user scrolled up
            self._subtitle()
            return
        # only the lines since its last turn: a filter that keeps few of a flood's would draw them again
        lines = newest_matching(self.buffer, self.filter, FOLLOW_LINES, within=self.undrawn)
        if lines:
            self.log.write_lines([fold(x) for x in lines], scroll_end=True)
        self._subtitle()

    @property
    def following(self) -> bool:
        log = self.log
        return log.scroll_offset.y >= log.max_scroll_y - 1

    def catch_up(self) -> None:
        """The log rebuilt from the buffer, if it skipped lines (a flood, or hidden)."""
        if self.stale:
            y, following = self.log.scroll_offset.y, self.following
            self.stale = False  # the whole buffer now, not a flood's tail
            self.set_filter(self.filter)
            if not following:
                self.log.scroll_to(y=y, animate=False)

    def set_filter(self, flt: str) -> None:
        """Show only the lines that match, from what the pane holds; new lines are filtered too.
        Under a flood (the pane follows its tail and skips lines) only the newest FOLLOW_LINES that
        match, as each frame draws them: the key answers now, and the whole buffer is filtered
        once the flood calms (`write` -> `catch_up`)."""
        self.filter = flt
        self.tail_due = False  # what follows draws the newest lines already
        log = self.log
        if self.stale and self.following:
            log.clear()
            log.write_lines([fold(x) for x in newest_matching(self.buffer, flt, FOLLOW_LINES)], scroll_end=True)
            to_end_after_refresh(log)
            self._subtitle()
            self._note("")
            return
        self.stale = False
        log.clear()
        shown = [fold(x) for x in matching(self.buffer, flt)]
        log.write_lines(shown, scroll_end=True)
        to_end_after_refresh(log)
        self._subtitle()
        self._note("" if shown or flt == "all" or not self.buffer else f"no line matches filter {flt} (v for the next one)")

    def _note(self, text: str) -> None:
        """A note at the end of the header (a filter that matches nothing), or none. In the header's one
        line, not a line of its own over the log: showing or hiding that laid the whole screen out
        again, 15-25 ms more for the key that changed the filter."""
        if text != self.note:
            self.note = text
            self.refresh_header()

    def shown_lines(self) -> tuple[int, list[str]]:
        """The lines the pane shows now, unfolded and whole: (1-based number of the first in the pane, lines)."""
        log = self.log
        held = matching(self.buffer, self.filter)
        held = held[-len(log.lines):] if log.lines else []
        top = int(log.scroll_offset.y)
        return top + 1, held[top:top + max(1, log.scrollable_content_region.height)]

    def action_read_lines(self) -> None:
        from ..dialogs.lines import LinesDialog

        first, lines = self.shown_lines()
        if not lines:
            self.notify(f"{self.node}'s pane shows no line yet")
            return
        self.app.push_screen(LinesDialog(self.node, first, lines))

    def on_click(self) -> None:
        """A click on the pane (its header too) focuses it: `c`, `/` and `enter` then act on it."""
        self.log.focus()

    def find(self, needle: str, after: int = -1) -> int | None:
        """Scroll to the next line (after `after`) that contains `needle`; its index, or None."""
        lines = self.log.lines
        shown = fold(needle)  # an evidence line is raw; the pane shows torch's prefix folded
        for i in list(range(after + 1, len(lines))) + list(range(0, after + 1)):
            if needle in lines[i] or shown in lines[i]:
                self.log.scroll_to(y=max(0, i - 2), animate=False)
                self.log.mark(i)
                return i
        return None


class MergedLog(PaneLog):
    """Every node's lines as `node │ line`, in arrival order, coloured like the panes. Like a pane,
    it keeps what it is sent while hidden and draws only the newest lines of a flood while it follows
    its tail (`catch_up` rebuilds it)."""

    def __init__(self, **kw) -> None:
        super().__init__(max_lines=PANE_MAX_LINES, highlight=True, **kw)
        self.highlighter = SeverityHighlighter()
        self.buffer: collections.deque[str] = collections.deque(maxlen=PANE_MAX_LINES)
        self.stale = False

    def append(self, lines: list[str], shown: bool = True) -> None:
        """Add lines, following the tail only while the user is at the bottom."""
        self.buffer.extend(lines)
        following = self.scroll_offset.y >= self.max_scroll_y - 1
        if not shown or (following and len(lines) > FOLLOW_LINES):
            self.stale = True
            if not shown:
                return
            lines = lines[-FOLLOW_LINES:]
        elif self.stale:
            self.catch_up()
            return
        self.write_lines(lines, scroll_end=following)

    def on_show(self) -> None:
        self.catch_up()

    def catch_up(self) -> None:
        if self.stale:
            self.stale = False
            self.clear()
            self.write_lines(self.buffer, scroll_end=True)
            to_end_after_refresh(self)


def to_end_after_refresh(log: Log) -> None:
    """To the end of a log just cleared and refilled: the scroll `write_lines` makes then lands
    where the old content ended (Textual 8 scrolls before the new size is laid out), so a pane
    rebuilt after a flood stayed mid-log, its last lines (a crash's, torchrun's summary) out of view."""
    log.scroll_end(animate=False, immediate=False, x_axis=False)


def enclosing_pane(widget: Widget | None) -> NodePane | None:
    """The pane a widget (the focused one, say) is in, if any."""
    while widget is not None:
        if isinstance(widget, NodePane):
            return widget
        widget = widget.parent
    return None
