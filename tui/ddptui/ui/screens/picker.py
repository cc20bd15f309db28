"""Every playbook found, to pick one from."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from ...core.paths import tilde
from ...core.playbook.loader import PlaybookEntry
from ..widgets.footer import KeysFooter


class PlaybookTable(DataTable):
    """The picker's table: enter opens the highlighted playbook, in the order the keys came.

    Not a priority binding on the screen: one of those runs as the app reads its key, while the
    keys before it still wait on their way to the table, so a down and an enter read together
    (typed ahead, or bundled by a slow ssh link) opened the row the cursor was on before the down.
    As the table's own key, enter comes after them and selects the row (`RowSelected` opens it)."""

    BINDINGS = [Binding("enter", "select_cursor", "Open")]


class PickerScreen(Screen):
    """Every playbook found: this folder's playbooks/, the user's config folder, the examples."""

    BINDINGS = [Binding("q", "app.quit", "Quit")]

    def __init__(self, entries: list[PlaybookEntry]) -> None:
        super().__init__()
        self.entries = entries

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Pick a playbook  [dim](enter opens it)[/]", id="picker-title")
        yield PlaybookTable(cursor_type="row", id="picker")
        yield Static("", id="picker-detail")  # the highlighted playbook's description (or problem), whole
        yield KeysFooter()

    def on_screen_resume(self) -> None:
        self.app.sub_title = "pick a playbook"  # also when back from a playbook's problems

    def on_mount(self) -> None:
        t = self.query_one("#picker", DataTable)
        t.add_columns("playbook", "file", "from", "description")
        for e in self.entries:
            t.add_row(Text(("✗ " if e.error else "") + e.name, style="bold red" if e.error else "bold"),
                      _short(e.path, e.origin), e.origin, _about(e, where=False), key=str(e.path))
        if not self.entries:
            self.query_one("#picker-title", Static).update(
                "No playbooks found. Put one in ./playbooks/ or pass a file: ddptui PLAYBOOK")
        t.focus()

    def action_open(self) -> None:
        t = self.query_one("#picker", DataTable)
        if not self.entries:
            return
        self.app.open_playbook(self.entries[t.cursor_row].path)

    @on(DataTable.RowHighlighted, "#picker")
    def _highlighted(self, ev: DataTable.RowHighlighted) -> None:
        if 0 <= ev.cursor_row < len(self.entries):
            e = self.entries[ev.cursor_row]
            self.query_one("#picker-detail", Static).update(
                Text.assemble((e.name, "bold"), "  ", _about(e) if e.error else (_short(e.path), "dim"),
                              *(() if e.error else ("  ", _about(e)))))

    @on(DataTable.RowSelected, "#picker")
    def _selected(self) -> None:
        self.action_open()


def _about(e: PlaybookEntry, where: bool = True) -> Text:
    """Its description, or its problem: with the file named as in the file column, or (`where`
    False, in the table, whose row names the file) from its line:col on."""
    if not e.error:
        return Text(e.description)
    if where:
        return Text(e.error.replace(str(e.path), _short(e.path)), style="red")
    what = e.error.removeprefix(f"{e.path}:")
    return Text(f"does not load: {what}", style="red")


def _short(p: Path, origin: str = "") -> str:
    """The path from here, or from ~; in the table (`origin` given) an example by its name (the
    row's `from` says where, the line under the table gives the whole path)."""
    if origin == "examples":
        return p.name
    try:
        return str(p.resolve().relative_to(Path.cwd()))
    except ValueError:
        return tilde(p)
