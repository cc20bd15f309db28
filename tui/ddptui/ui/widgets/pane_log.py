"""A pane's log: Textual's Log, each line written as exactly one line of it, and written fast.

Apart from panes.py (the pane around it) because it leans on Log's internals: textual is pinned.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.cells import cell_len
from rich.style import Style
from textual.geometry import Size
from textual.reactive import Reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Log

MARKED = Style(reverse=True)

# what str.splitlines (and so Textual's Log.write_lines) breaks a line at, besides "\n"
_BREAK_CHARS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_BREAKS = re.compile(f"[{_BREAK_CHARS}]")


def one_line(line: str) -> str:
    """A held line as exactly one line of a Log: Log.write_lines splits what it is given with
    str.splitlines, so an empty line became none and one holding "\r" (a progress bar), a form
    feed or a Unicode line separator became several, and the pane no longer matched the lines it
    holds (the lines `enter` shows, the filter's count). Those characters are shown as spaces."""
    if _BREAKS.search(line) is not None:
        line = _BREAKS.sub(" ", line)
    return line or " "


def _cells(line: str) -> int:
    """The columns a Log draws `line` in (tabs expanded, each control code one replacement character)."""
    return len(line.expandtabs()) if line.isascii() else cell_len(Log._process_line(line))


def as_log_lines(lines: Iterable[str]) -> tuple[list[str], int]:
    """`lines` as a Log's lines (`one_line`), and the widest one's columns (`_cells`). A pane's
    5,000 lines at a filter change are joined once and looked at in C (a `str.__contains__` per
    break character, `isascii`): when none holds a line break, a tab or a wide character, as NCCL's
    and torch's do not, each line stays as it is and its width is its length (0.26 ms for 5,000
    lines, against 2.8 ms a line at a time)."""
    lines = lines if isinstance(lines, list) else list(lines)
    text = "\n".join(lines)
    if any(c in text for c in _BREAK_CHARS):
        lines = [one_line(x) for x in lines]
    elif "" in lines:
        lines = [x or " " for x in lines]
    if not lines:
        return lines, 0
    plain = text.isascii() and "\t" not in text
    return lines, max(map(len, lines)) if plain else max(map(_cells, lines))


class PaneLog(Log):
    """Textual's Log, each line written as exactly one line (`one_line`), its width measured as it
    is written.

    Log.write_lines starts a new thread (a `@work(thread=True)` worker) on every call to measure the
    new lines, which then sets the log's size again from the UI thread: under a flood that was a
    thread and a second layout of the screen per pane per frame, and a key pressed then waited for
    them. Here the measure is a pass over the lines (a C `len` for ASCII, as NCCL's and torch's
    lines are) in the same call, and the one layout the write needs anyway shows it. (Log's
    `_update_size` is private: textual is pinned, and if it went this would only be unused.)"""

    _widest = 0  # the columns of the widest line of the write in progress (as_log_lines)
    marked: int | None = None  # the line a find or a jump landed on (an index of `lines`): drawn reversed

    def mark(self, index: int | None) -> None:
        """Show which line `/` found or `j` jumped to: a status line naming "line 45" is no help in a
        pane that shows no line numbers."""
        if index != self.marked:
            self.marked = index
            self.refresh()

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        if self.marked is not None and self.scroll_offset.y + y == self.marked:
            strip = strip.apply_style(MARKED)
        return strip

    def clear(self) -> PaneLog:
        self.marked = None  # its lines are gone (a filter change refills the log)
        return super().clear()

    def _prune_max_lines(self) -> None:
        before = len(self._lines)
        super()._prune_max_lines()
        if self.marked is not None:  # the oldest lines left: the mark moves with its line, or goes with it
            self.marked -= before - len(self._lines)
            self.marked = self.marked if self.marked >= 0 else None

    # Textual lays the whole screen out again whenever a widget's virtual size changes (the
    # reactive is `layout=True`): every write that adds lines to a log not yet full, and every
    # filter change (cleared, then refilled), cost a layout of the screen. A log's virtual size
    # moves nothing else, only its scrollbars: they are updated here, and the screen is laid out
    # only when a scrollbar comes or goes (the log's content region changes then).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0))

    def watch_virtual_size(self, size: Size) -> None:
        shown = (self.show_vertical_scrollbar, self.show_horizontal_scrollbar)
        self._scroll_update(size)
        if (self.show_vertical_scrollbar, self.show_horizontal_scrollbar) != shown:
            self.refresh(layout=True)

    def write_lines(self, lines: Iterable[str], scroll_end: bool | None = None) -> PaneLog:
        lines, self._widest = as_log_lines(lines)
        if self._lines or not lines:
            return super().write_lines(lines, scroll_end)
        # An empty log refilled (a filter change, a catch-up: up to 5,000 lines): Log.write_lines less
        # two passes a line that these never need, `splitlines` (each is one line already) and dropping
        # its render from a cache that is empty: 2.5 -> 1.0 ms for 5,000 lines, a third of a `v` on 4 panes
        auto_scroll = self.auto_scroll if scroll_end is None else scroll_end
        self._lines.extend(lines)
        if self.max_lines is not None and len(self._lines) > self.max_lines:
            self._prune_max_lines()
        self._update_size(self._updates, lines)
        ScrollView.refresh_lines(self, 0, len(self._lines))
        if auto_scroll and not self.is_vertical_scrollbar_grabbed:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        else:
            self.refresh()
        return self

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        if lines and updates == self._updates:
            self._width = max(self._width, self._widest)
            self.virtual_size = Size(self._width, self.line_count)
