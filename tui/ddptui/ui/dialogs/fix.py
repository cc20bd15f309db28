"""A finding's fix, shown as a diff of the playbook: apply and relaunch, save only, copy, or dismiss."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ..widgets.buttons import DialogButtons
from ...core.diagnosis.model import Finding
from ..clipboard import copy_out


class FixChoice(Enum):
    """The answer; each value is its button's id (Copy does not close the dialog)."""

    APPLY_AND_RELAUNCH = "apply"
    SAVE_ONLY = "save"
    DISMISS = "cancel"


class FixDialog(ModalScreen[FixChoice]):
    """A finding's fix as a diff of the playbook; saved (as a new revision) only if the user says so."""

    BINDINGS = [Binding("escape", "dismiss_fix", "Cancel")]

    def __init__(self, finding: Finding, patch: str, path: Path | None) -> None:
        super().__init__()
        self.finding, self.patch, self.path = finding, patch, path

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            f = self.finding
            yield Static(f"Fix {f.id}: {f.summary}", id="dialog-title")
            with VerticalScroll(id="dialog-body"):  # scrolls; the buttons below stay on screen
                yield from self._body(f)
            with DialogButtons(id="dialog-buttons"):
                yield Button("Apply and relaunch", variant="warning", id=FixChoice.APPLY_AND_RELAUNCH.value,
                             disabled=self.path is None)
                yield Button("Save only", variant="success", id=FixChoice.SAVE_ONLY.value, disabled=self.path is None)
                yield Button("Copy", id="copy")
                yield Button("Dismiss", variant="primary", id=FixChoice.DISMISS.value)

    def on_mount(self) -> None:
        """Enter applies (Tab, the arrows or a click for the others): the user pressed f to fix.
        Without a playbook file to revise, Enter dismisses."""
        apply = self.query_one(f"#{FixChoice.APPLY_AND_RELAUNCH.value}", Button)
        (apply if not apply.disabled else self.query_one(f"#{FixChoice.DISMISS.value}", Button)).focus()

    def _body(self, f: Finding) -> ComposeResult:
        """The change first (what Apply does, seen without scrolling at 80x24), then why."""
        yield Static(f.fix.explain if f.fix else "")
        yield Static(diff_text(self.patch), id="diff")
        yield Static("Apply stops the job on every node, saves the change as a new revision of the playbook "
                     "(the original is kept) and runs it again, master first.", classes="dim")
        if f.explanation:
            yield Static(f.explanation, classes="dim why")
        by_node: dict[str, list] = {}
        for e in f.evidence:
            by_node.setdefault(e.node, []).append(e)
        with Horizontal(id="evidence-columns"):  # each node's evidence side by side
            for node, evs in by_node.items():
                col = Text(node + "\n", style="bold cyan")
                for e in evs:
                    col.append((f"{e.line}: " if e.line else "") + e.text[:300] + "\n")
                yield Static(col, classes="evidence-column")

    def copy_text(self) -> str:
        """What Copy puts on the clipboard: the env change as shell lines, or the diff."""
        fix = self.finding.fix
        if fix is None:
            return self.patch
        lines = [f"export {k}={v}" for k, v in fix.env.items() if fix.scope == "all-nodes"]
        for node, env in fix.per_node.items():
            lines += [f"# on {node}: export {k}={v}" for k, v in env.items()]
        return "\n".join(lines) if lines else self.patch

    def action_dismiss_fix(self) -> None:
        self.dismiss(FixChoice.DISMISS)

    @on(Button.Pressed)
    def _pressed(self, ev: Button.Pressed) -> None:
        if ev.button.id == "copy":
            copy_out(self.app, self.copy_text(), "the fix")
            return
        self.dismiss(FixChoice(ev.button.id))


def diff_text(patch: str) -> Text:
    """A unified diff, coloured: additions green, removals red, hunk headers dim."""
    t = Text()
    for line in patch.splitlines():
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim" if line.startswith("@") else ""
        t.append(line + "\n", style=style)
    return t
