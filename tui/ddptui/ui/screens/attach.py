"""`ddptui attach JOBID` in the TUI: a Slurm batch job's nodes, each in its pane, and the live findings.

The attach core (core/slurm/attach.py) runs in a thread of its own and emits the events a run
emits into this screen's bridge; the playbook screen's widgets show them as they show a run's.
Read-only, like a recorded run: the steps that would reach a node are refused in words, and leaving
(q) stops reading only: the job goes on in Slurm.
"""

from __future__ import annotations

import threading
from pathlib import Path

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

from ...core import events as E
from ...core.errors import DdptuiError
from ...core.playbook.loader import parse_playbook
from ...core.slurm.attach import Attachment, stand_in_playbook
from ..bridge import Drained, EventBridge
from ..widgets.panes import PANE_MAX_LINES
from .playbook import PlaybookScreen
from .read_only import ReadOnlyActions


def _no_cluster(pb, node: str):
    raise DdptuiError("attach only reads the job's output: it reaches no node")


class _PanedBridge(EventBridge):
    """Lines of streams without a pane (srun's own `slurm` lines, a task beyond the node list) go to
    the All nodes log only."""

    def __init__(self, max_lines: int, nodes: set[str]) -> None:
        super().__init__(max_lines)
        self.nodes = nodes

    def drain(self) -> Drained:
        d = super().drain()
        for node in [n for n in d.lines if n not in self.nodes]:
            del d.lines[node]
            d.counts.pop(node, None)
        return d


class AttachScreen(ReadOnlyActions, PlaybookScreen):
    BINDINGS = [
        Binding("r", "run_step", "Run step", show=False),
        Binding("n", "next_step", "Next", show=False),
        Binding("s", "skip_step", "Skip", show=False),
        Binding("a", "run_all", "Run all from here", show=False),
        Binding("x", "stop_job", "Stop job", show=False),
        Binding("q", "app.quit", "Quit", tooltip="Quit: stop reading; the job goes on in Slurm"),
    ]

    def __init__(self, attachment: Attachment, nodes: list[str], runs_dir: Path) -> None:
        nodes = nodes or ["task0"]
        text = stand_in_playbook(attachment.job_id, nodes, Path("slurm.out"))
        super().__init__(parse_playbook(text, f"slurm-{attachment.job_id}.yaml", check_files=False), runs_dir, _no_cluster)
        self.bridge = _PanedBridge(PANE_MAX_LINES, set(nodes))
        self.attachment = attachment
        attachment.sink = self.bridge.push
        self._thread = threading.Thread(target=self._follow, name="ddptui-attach", daemon=True)

    def on_mount(self) -> None:  # Textual calls PlaybookScreen.on_mount after this one
        self.app.sub_title = self.sub_title = f"slurm job {self.attachment.job_id} — attached, read-only"
        banner = Text.assemble((" READ-ONLY ", "bold black on yellow"), " ",
                               (f"slurm job {self.attachment.job_id}", "bold"),
                               ": its output as it grows; quitting stops reading, the job goes on")
        self.mount(Static(banner, id="banner"), before=self.query_one("#main"))
        self._thread.start()

    def _follow(self) -> None:  # the attach thread: nothing here touches a widget
        try:
            self.attachment.run()
        except DdptuiError as e:
            self.attachment.error = str(e)
            self.bridge.push(E.Notice("error", str(e)))

    def on_unmount(self) -> None:
        self.attachment.stop()

    def _apply(self, ev: E.Event) -> None:
        if isinstance(ev, E.NodeState) and not self.pane_grid.has_pane(ev.node):
            return
        if isinstance(ev, E.RunFinished):
            verdict = "ok" if ev.ok else "FAILED"
            state = (ev.summary.get("slurm") or {}).get("state")
            self._status(Text(f"slurm job {self.attachment.job_id} {state}: {verdict} — logs in "
                              f"{self.attachment.run_dir.path if self.attachment.run_dir else '(none)'}",
                              style="bold" if ev.ok else "bold red"))
            return
        super()._apply(ev)

    @property
    def refusal(self) -> str:
        return ("attached read-only: ddptui does not run, stop or change a Slurm job it attached to "
                f"(scancel {self.attachment.job_id} stops it)")
