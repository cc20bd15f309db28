"""A playbook screen's fixes: preview a finding's fix as a diff, save it, or apply it and relaunch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work

from ...core.errors import DdptuiError
from ...core.fixes import Proposal, propose, write_revision
from ..dialogs.fix import FixChoice, FixDialog
from ..widgets.findings import FindingsTab
from ..widgets.panes import MergedLog
from ..widgets.results import ResultsTab
from ..widgets.steps import StepsPanel

if TYPE_CHECKING:
    from ...core.runbook import Runbook


class FixActions:
    """Mixed into PlaybookScreen: `f` and what its dialog answers. Core does the work in a thread."""

    def action_fix(self) -> None:
        f = self.query_one(FindingsTab).selected()
        if f is None:
            self.notify("no findings to fix")
            return
        if not f.fixable:
            self.notify(f"{f.id}: {f.fix.explain if f.fix else 'no fix known'}", timeout=10)
            return
        try:
            proposal = propose(self.pb, f)
        except (DdptuiError, KeyError, ValueError) as e:  # no file, or YAML it cannot edit: change nothing
            self.notify(f"cannot apply the fix to the playbook: {e}", severity="error")
            return

        def answered(choice: FixChoice | None) -> None:
            if choice is FixChoice.SAVE_ONLY:
                self._save_fixed(proposal)
            elif choice is FixChoice.APPLY_AND_RELAUNCH:
                if self.busy.is_set() and not self.job_running:
                    self.notify("a step is running; wait for it first", severity="warning")
                    return
                self._apply_and_relaunch(proposal)

        self.app.push_screen(FixDialog(f, proposal.diff, self.pb.path), answered)

    @work(thread=True, group="save", exit_on_error=False)
    def _save_fixed(self, proposal: Proposal) -> None:
        path = write_revision(proposal)  # file I/O: off the UI thread
        self.saved_revisions.append(path)
        self.app.call_from_thread(self.notify, f"saved {path} (the original is kept)", timeout=8)

    @work(thread=True, group="fix", exit_on_error=False)
    def _apply_and_relaunch(self, proposal: Proposal) -> None:
        """One core call: stop the job everywhere, write the revision, run it again in order, judge it."""
        from ...core.runbook import apply_and_rerun

        ids = ", ".join(dict.fromkeys(proposal.ids))
        self.app.call_from_thread(self.notify, f"applying the fix for {ids}: stopping the job on every node…")
        self.busy.set()
        try:
            out = apply_and_rerun(self.runbook, proposal,
                                  switched=lambda rb: self.app.call_from_thread(self._switch_runbook, rb, ids))
        finally:
            self.busy.clear()
        self.saved_revisions.append(out.revision)
        self.app.call_from_thread(self._after_work)
        if out.resolved:
            self.fixed.extend(dict.fromkeys(proposal.ids))
            self.app.call_from_thread(self.notify, f"{ids} is gone: the relaunched run ({out.revision.name}) is "
                                                   "healthy", timeout=10)
        else:
            self.app.call_from_thread(self.notify, f"the relaunched run ({out.revision.name}) did not pass; see its "
                                                   "findings", severity="warning", timeout=10)

    def _switch_runbook(self, rb: Runbook, ids: str) -> None:
        self._drain()  # the old run's last events first
        self.runbook = rb
        self.pb = rb.pb
        self.query_one(StepsPanel).show_playbook(rb.pb)
        self.pane_grid.reset()
        self.query_one(MergedLog).clear()
        self.query_one(ResultsTab).clear()
        self.query_one(FindingsTab).clear(f"{ids}: fix applied, relaunching…")
        self.action_tab("tab-logs")
