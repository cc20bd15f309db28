"""Textual's Footer, recomposed only when the keys it shows change.

Textual's Footer recomposes itself (every FooterKey removed, as many made, mounted and styled) on
each `bindings_updated_signal`: a focus move, a `refresh_bindings()`, a screen resumed, whether or
not any key changed. The playbook screen shows about fifteen keys and gets four of those signals
before it settles at start-up, and one for every job or finding event after (frames.py). This one
remembers what it last composed (each shown key, its words, whether it is enabled) and lets a
signal through only when that differs.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

PINNED = ("app.quit", "help")  # Quit and Keys: at the right end, seen at any width


class KeysFooter(Footer):
    _shown: tuple[Any, ...] | None = None

    def _keys(self) -> tuple[Any, ...]:
        """What the footer draws: the shown keys in order, and the command palette's."""
        shown = tuple((b.key, b.key_display, b.description, b.action, b.group, enabled, tooltip)
                      for _, b, enabled, tooltip in self.screen.active_bindings.values() if b.show)
        palette = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        return shown, palette[1:] if palette is not None and self.show_command_palette else None

    def bindings_changed(self, screen: Screen) -> None:
        if self._shown is not None and self.is_attached and screen is self.screen and self._keys() == self._shown:
            return
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        """Textual's keys, with Quit and Keys docked at the right end (KeysFooter .pinned in
        ddptui.tcss): the keys overflow on the right, so below ~110 columns they were the ones cut."""
        if self._bindings_ready:
            self._shown = self._keys()
        pinned = []
        for widget in super().compose():
            if isinstance(widget, FooterKey) and widget.action in PINNED:
                pinned.append(widget)
            else:
                yield widget
        if pinned:
            yield HorizontalGroup(*pinned, classes="pinned")
