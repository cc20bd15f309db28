"""The run screen's part for Slurm: once the allocation is granted, its nodes are the run's."""

from __future__ import annotations

from rich.text import Text

from ...core import events as E
from ..bridge import Drained
from ..widgets.checks import ChecksTab
from ..widgets.steps import StepsPanel


class AllocationView:
    """Mixed into PlaybookScreen: panes and checks columns for the nodes a Slurm allocation names.
    What came after the allocation waits in `_held` until the new panes are mounted."""

    def _allocated(self, ev: E.Allocated) -> None:
        """The Slurm allocation named the nodes: the run's nodes, panes and checks rows are its."""
        self.pb = self.runbook.pb
        self.query_one(StepsPanel).show_title(self.pb)
        how = "granted" if ev.owned else "joined"
        self._status(Text(f"slurm job {ev.job_id} {how}: {', '.join(ev.nodes)}", style="dim"))
        if list(self.pane_grid.roles) != list(ev.nodes):
            self.query_one(ChecksTab).matrix.set_nodes(list(ev.nodes))
            self._held = Drained()
            self.run_worker(self._mount_panes(), exclusive=False)

    async def _mount_panes(self) -> None:
        await self.pane_grid.set_nodes(self.pb)
        held, self._held = self._held, None
        if held is not None:
            self._drain_batch(held)
