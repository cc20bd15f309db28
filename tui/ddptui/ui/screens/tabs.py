"""The playbook screen's tabs, switched by the keys 1-5 and by the run itself."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import TabbedContent, TabPane

from ..widgets.checks import ChecksTab
from ..widgets.steps import StepTable


class TabActions:
    """Mixed in before the playbook screen (a Screen)."""

    def action_show_tab(self, tab: str) -> None:
        """1-5: the tab, and its table focused where it has one, so that the arrows and enter move
        in the checks grid or the findings list (they moved the step list, out of sight)."""
        self.action_tab(tab)
        target = {"tab-checks": "#matrix", "tab-findings": "#findings"}.get(tab)
        if target is not None:
            self.query_one(target).focus()
        elif self.focused is None:
            self.query_one(StepTable).focus()

    def action_tab(self, tab: str) -> None:
        leaving = next((w for w in (self.focused.ancestors_with_self if self.focused else ())
                        if isinstance(w, TabPane)), None)
        if leaving is not None and leaving.id != tab:
            self.set_focus(None)  # focus left inside the tab being hidden would switch straight back to it
        self.query_one(TabbedContent).active = tab
        self.refresh_bindings()

    def jump_to_check(self, f) -> bool:
        """A finding a check raised (its evidence is a command's answer, no log line): the Checks
        tab, its cursor on that check's cell on the finding's first node, its output below."""
        matrix = self.query_one(ChecksTab).matrix
        for e in f.evidence:
            cell = matrix.locate(e.node, f)
            if cell is not None:
                self.action_show_tab("tab-checks")
                matrix.move_cursor(row=cell[0], column=cell[1])
                self._status(Text(f"{e.node} · {matrix.checks[cell[0]]}: the check behind {f.id}"))
                return True
        return False
