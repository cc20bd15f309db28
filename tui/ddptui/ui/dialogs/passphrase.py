"""A key file's passphrase, asked for once per connection."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from ..widgets.buttons import DialogButtons


class PassphraseDialog(ModalScreen[str | None]):
    """A key file needs its passphrase: asked here, kept in memory for this connection only.

    Dismisses with the passphrase, or None to skip the key."""

    BINDINGS = [Binding("escape", "skip", "Cancel")]

    def __init__(self, node: str, path: str) -> None:
        super().__init__()
        self.node, self.path = node, path

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(f"{self.node}: the key {self.path} needs its passphrase.", id="dialog-title")
            yield Input(password=True, placeholder="passphrase", id="passphrase")
            with DialogButtons(id="dialog-buttons"):
                yield Button("Use it", variant="primary", id="ok")
                yield Button("Skip this key", id="skip")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def action_skip(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.dismiss(self.query_one(Input).value or None)

    @on(Button.Pressed)
    def _pressed(self, ev: Button.Pressed) -> None:
        self.dismiss(self.query_one(Input).value or None if ev.button.id == "ok" else None)
