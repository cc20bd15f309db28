"""An unknown host key: accept (and save) it, or refuse."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ..widgets.buttons import DialogButtons


class HostKeyDialog(ModalScreen[bool]):
    """An unknown host key: show the fingerprint, save it only when the user says so (True)."""

    def __init__(self, node: str, hostname: str, key_type: str, fingerprint: str) -> None:
        super().__init__()
        self.info = (node, hostname, key_type, fingerprint)

    def compose(self) -> ComposeResult:
        node, host, typ, fp = self.info
        with Vertical(id="dialog"):
            yield Static(f"The authenticity of host '{host}' ({node}) can't be established.", id="dialog-title")
            yield Static(f"{typ} key fingerprint is:")
            yield Static(fp, id="fingerprint")  # whole, on its own line: the user compares all of it
            yield Static("Compare it with the one the node's admin gave you. Accept it and save it to known_hosts?")
            with DialogButtons(id="dialog-buttons"):
                yield Button("Accept and save", variant="warning", id="yes")
                yield Button("Refuse", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, ev: Button.Pressed) -> None:
        self.dismiss(ev.button.id == "yes")
