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
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

PINNED = ("app.quit", "help")  # Quit and Keys: at the right end, seen at any width


class KeysFooter(Footer):
    _shown: tuple[Any, ...] | None = None
    _waits = 0  # refreshes _drop_overflow has waited for a layout

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
        self.call_after_refresh(self._drop_overflow)

    def on_resize(self) -> None:
        """Every key back, measured at the new width, then what does not fit dropped again."""
        for w in self._units_flat():
            w.display = True
        self.call_after_refresh(self._drop_overflow)

    def _units(self) -> list[list[Widget]]:
        """The entries as one reads them: a key, or a group of keys with its label (`12345 Tabs`)."""
        units: list[list[Widget]] = []
        for w in self.children:
            if w.has_class("pinned"):
                continue
            if isinstance(w, FooterLabel) and units and isinstance(units[-1][0], KeyGroup):
                units[-1].append(w)
            else:
                units.append([w])
        return units

    def _units_flat(self) -> list[Widget]:
        return [w for unit in self._units() for w in unit]

    def _drop_overflow(self) -> None:
        """Entries that would run under Quit and Keys are dropped whole (the edge cut them mid-word:
        "1234" for "12345 Tabs", ". Nex" for ". Next finding"); `?` lists them all."""
        if not self.is_attached or not self.size.width:
            return
        pinned = [w for w in self.children if w.has_class("pinned")]
        if any(not w.region.width for w in (*pinned, *self._units_flat()) if w.display) and self._waits < 5:
            self._waits += 1
            self.call_after_refresh(self._drop_overflow)  # not laid out yet: measure once it is
            return
        self._waits = 0
        room = (pinned[0].region.x if pinned else self.region.right) - self.region.x
        cut = False
        for unit in self._units():
            cut = cut or max(w.region.right for w in unit) - self.region.x > room
            for w in unit:
                w.display = not cut
