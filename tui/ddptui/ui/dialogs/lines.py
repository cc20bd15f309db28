"""A pane's lines in full: what the pane shows, unfolded and wrapped (a Log cannot wrap)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class LinesDialog(ModalScreen[None]):
    """The lines a pane shows now (`first` is the 1-based number of the first one in the pane)."""

    BINDINGS = [Binding("escape,enter,q", "close", "Close")]

    def __init__(self, node: str, first: int, lines: list[str]) -> None:
        super().__init__()
        self.node, self.first, self.lines = node, first, lines

    def compose(self) -> ComposeResult:
        last = self.first + len(self.lines) - 1
        with Vertical(id="dialog", classes="wide"):
            yield Static(f"{self.node}: lines {self.first}–{last} of the pane, whole", id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield Static(lines_text(self.first, self.lines), id="lines")
            yield Static("escape closes · the node's full log is in the run directory", classes="dim")

    def action_close(self) -> None:
        self.dismiss(None)


def lines_text(first: int, lines: list[str]) -> Text:
    t = Text()
    for i, line in enumerate(lines):
        t.append(f"{first + i:>5} ", style="dim")
        t.append(line + "\n")
    return t
