"""The playbook screen's tabs, switched by the keys 1-5 and by the run itself."""

from __future__ import annotations

from textual.widgets import TabbedContent, TabPane

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
