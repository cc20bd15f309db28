"""A dialog's buttons: in a row, right-aligned, or one under another where the row would not fit
(Textual's Horizontal does not wrap: at 60 columns the quit dialog's third button, the default,
read "Canc" at the screen's edge). Stacked, each is one line tall, without its border."""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.containers import Horizontal
from textual.widgets import Button


class DialogButtons(Horizontal):
    def on_resize(self, event: events.Resize) -> None:
        # each button: its label, padding and border (Textual's min-width is 16), and its left margin
        buttons = list(self.query(Button))
        need = sum(max(16, cell_len(str(b.label)) + 4) + 2 for b in buttons)
        stacked = need > event.size.width
        self.set_class(stacked, "-stacked")
        for b in buttons:  # stacked, a line each (no border): four of them still leave the dialog its text
            b.compact = stacked
