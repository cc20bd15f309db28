"""`?`: every key of the screen it was opened on, made from that screen's bindings."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..keys import Key


class HelpDialog(ModalScreen[None]):
    """The keys, by section; the ones that do nothing at the moment are dimmed and say so."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, title: str, sections: list[tuple[str, list[Key]]]) -> None:
        super().__init__()
        self.title_text, self.sections = title, sections

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="help"):
            yield Static(f"Keys: {self.title_text}", id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                for name, keys in self.sections:
                    yield Static(keys_table(name, keys), classes="help-section")
            yield Static("escape closes · ctrl+p finds any action by name", classes="dim")

    def action_close(self) -> None:
        self.dismiss(None)


def keys_table(name: str, keys: list[Key]) -> Table:
    t = Table(title=Text(name, style="bold"), title_justify="left", show_header=False, box=None,
              padding=(0, 1), expand=True)
    t.add_column("key", style="bold cyan", no_wrap=True, width=12)
    t.add_column("what", ratio=1)
    for k in keys:
        t.add_row(k.key, k.description if k.now else Text(f"{k.description} (not now)", style="dim"))
    return t
