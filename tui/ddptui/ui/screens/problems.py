"""A playbook that cannot be used: every problem in it, instead of starting."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from ...core.errors import PlaybookError
from ..widgets.footer import KeysFooter
from .picker import PickerScreen


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
        yield KeysFooter()

    def on_mount(self) -> None:
        self.app.sub_title = "playbook problems"
        t = self.query_one("#problems", DataTable)
        t.add_columns("line:col", "problem", "hint")  # the file is in the title: the message gets the width
        for p in self.error.problems:
            where = p.location() if str(p.path) != str(self.error.path) else f"{p.line}:{p.col}"
            t.add_row(where, p.message, Text(p.hint, style="dim"))
        t.focus()
        self._show(0)

    def _show(self, row: int) -> None:
        if self.error.problems:
            p = self.error.problems[row]
            self.query_one("#problem-detail", Static).update(Text(p.render()))

    @on(DataTable.RowHighlighted, "#problems")
    def _hl(self, ev: DataTable.RowHighlighted) -> None:
        self._show(ev.cursor_row)

    def _from_picker(self) -> bool:
        return len(self.app.screen_stack) > 1 and isinstance(self.app.screen_stack[-2], PickerScreen)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`esc Back` only where there is a picker to go back to (`ddptui BAD.yaml` opens here first)."""
        return self._from_picker() if action == "back" else True

    def action_back(self) -> None:
        if self._from_picker():
            self.app.pop_screen()  # back to the picker it was opened from
