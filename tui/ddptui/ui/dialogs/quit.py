"""Quitting while a job runs: stop it, leave it running, or stay."""

from __future__ import annotations

from enum import Enum

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ..widgets.buttons import DialogButtons


class QuitChoice(Enum):
    """The answer; each value is its button's id."""

    STOP = "stop"
    LEAVE_RUNNING = "leave"
    CANCEL = "cancel"


class QuitDialog(ModalScreen[QuitChoice]):
    """A job is running: stop it, or stay."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, running: list[str]) -> None:
        super().__init__()
        self.running = running

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(f"The job is running on {', '.join(self.running)}.", id="dialog-title")
            yield Static("Stop it on every node (TERM to its process group, then KILL), or leave it running: "
                        "each node then keeps the output in ~/.cache/ddptui/runs/<run>/<node>.log.")
            with DialogButtons(id="dialog-buttons"):
                yield Button("Stop the job and quit", variant="error", id=QuitChoice.STOP.value)
                yield Button("Leave it running", variant="warning", id=QuitChoice.LEAVE_RUNNING.value)
                yield Button("Cancel", variant="primary", id=QuitChoice.CANCEL.value)

    def on_mount(self) -> None:
        self.query_one(f"#{QuitChoice.CANCEL.value}", Button).focus()

    def action_cancel(self) -> None:
        self.dismiss(QuitChoice.CANCEL)

    @on(Button.Pressed)
    def _pressed(self, ev: Button.Pressed) -> None:
        self.dismiss(QuitChoice(ev.button.id))
