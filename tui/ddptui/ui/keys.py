"""A screen's keys, from its bindings: what `?` lists and what the command palette offers.

Nothing here is written by hand: a binding added to a screen shows up in both."""

from __future__ import annotations

import re

from collections.abc import Iterator
from dataclasses import dataclass

from textual.actions import parse
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen


@dataclass(frozen=True)
class Key:
    key: str  # as the footer shows it
    action: str
    description: str  # the long form: the binding's tooltip, else its description
    owner: DOMNode  # where the action runs
    now: bool  # whether it does something at the moment (check_action)
    advertised: bool = True  # shown in the footer, or described at length: the palette offers it


def merged_bindings(node: DOMNode) -> list[Binding]:
    """The node's class bindings, base classes first, a subclass's binding replacing its base's for a key."""
    by_key: dict[str, Binding] = {}
    for cls in reversed(type(node).__mro__):
        for b in cls.__dict__.get("BINDINGS", []):
            b = b if isinstance(b, Binding) else Binding(*b)
            for key in b.key.split(","):
                by_key[key.strip()] = b
    return list(dict.fromkeys(by_key.values()))


def node_keys(node: DOMNode, only_shown: bool = False) -> Iterator[Key]:
    app = node.app
    seen: set[str] = set()
    for b in merged_bindings(node):
        if not b.description or b.system or (only_shown and not b.show) or b.action in seen:
            continue
        seen.add(b.action)
        where, name, params = parse(b.action)
        owner = app if where == "app" else node
        state = owner.check_action(name, params)
        shown = ", ".join(app.get_key_display(Binding(k.strip(), "")) for k in b.key.split(","))
        yield Key(shown, b.action, b.tooltip or b.description, owner, state is not False,
                  b.show or bool(b.tooltip))


def _words(class_name: str) -> str:
    """NodePane -> "node pane": what a user calls it, not the class."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", class_name).lower()


def screen_keys(screen: Screen) -> list[tuple[str, list[Key]]]:
    """Sections: the focused pane's keys (widgets' own advertised ones), the screen's, everywhere's."""
    out: list[tuple[str, list[Key]]] = []
    widget = screen.focused
    while widget is not None and widget is not screen:
        keys = list(node_keys(widget, only_shown=True))
        if keys:
            out.append((f"in the focused {_words(type(widget).__name__)}", keys))
        widget = widget.parent
    out.append(("this screen", list(node_keys(screen))))
    app = screen.app
    everywhere = list(node_keys(app))
    if app.ENABLE_COMMAND_PALETTE:
        everywhere.append(Key(app.COMMAND_PALETTE_DISPLAY or app.get_key_display(Binding(app.COMMAND_PALETTE_BINDING, "")),
                              "app.command_palette", "Command palette: every action by name", app, True))
    out.append(("everywhere", everywhere))
    return out
