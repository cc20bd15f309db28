"""The left column: the playbook's title, its steps with their state, and the selected step in full.

The table has no description column (it was always cut, and is in the 30-column rail): the step's
title and its last message are in the detail below, for the step the cursor is on or that last moved."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...core.states import StepState
from ...core import events as E
from ...core.playbook.model import Playbook

STATE_STYLE = {
    StepState.PENDING: ("○", "dim"), StepState.RUNNING: ("▶", "bold yellow"), StepState.PASSED: ("✓", "bold green"),
    StepState.FAILED: ("✗", "bold red"), StepState.SKIPPED: ("·", "dim italic"),
}


class StepTable(DataTable):
    """The playbook's steps with their state; the cursor row is the selected step."""

    DEFAULT_CSS = """
    StepTable { height: auto; max-height: 60%; }
    """

    def __init__(self, steps, **kw) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self._steps = steps

    def on_mount(self) -> None:
        # 1 + 14 + 7 cells and their padding: 28 columns, what the narrow rail has inside
        self.add_column(" ", key="icon", width=1)
        self.add_column("step", key="step")
        self.add_column("state", key="state", width=7)
        for s in self._steps:
            icon, style = STATE_STYLE[StepState.PENDING]
            self.add_row(Text(icon, style=style), s.id, Text(StepState.PENDING, style=style), key=s.id)

    def set_state(self, step_id: str, state: str) -> None:
        icon, style = STATE_STYLE.get(state, ("?", ""))
        self.update_cell(step_id, "icon", Text(icon, style=style))
        self.update_cell(step_id, "state", Text(state, style=style))

    @property
    def selected(self) -> str | None:
        if not self._steps or self.cursor_row < 0:
            return None
        return self._steps[min(self.cursor_row, len(self._steps) - 1)].id

    def select(self, step_id: str) -> None:
        for i, s in enumerate(self._steps):
            if s.id == step_id:
                self.move_cursor(row=i)


class StepsPanel(Vertical):
    """The playbook's name and shape, its steps, and the selected (or last moved) step in full."""

    def __init__(self, playbook: Playbook, **kw) -> None:
        super().__init__(**kw)
        self.pb = playbook
        self.said: dict[str, tuple[str, str]] = {}  # step -> (state, its last message)

    def compose(self) -> ComposeResult:
        yield Static(playbook_title(self.pb), id="pb-title")
        yield StepTable(self.pb.steps, id="steps")
        yield Static("", id="step-detail")

    @property
    def table(self) -> StepTable:
        return self.query_one(StepTable)

    def show_title(self, pb: Playbook) -> None:
        """The same run on a resolved playbook (a Slurm allocation named its nodes)."""
        self.pb = pb
        self.query_one("#pb-title", Static).update(playbook_title(pb))

    def show_playbook(self, pb: Playbook) -> None:
        """A new revision of the playbook (same steps): its title, every step pending again."""
        self.pb = pb
        self.said.clear()
        for st in pb.steps:
            self.table.set_state(st.id, StepState.PENDING)
        self.query_one("#pb-title", Static).update(playbook_title(pb))
        self.query_one("#step-detail", Static).update("")

    def show_step(self, ev: E.StepChanged) -> None:
        self.table.set_state(ev.step, ev.state)
        self.said[ev.step] = (ev.state, ev.message)
        self.show_detail(ev.step)

    def show_detail(self, step_id: str) -> None:
        """The step's title, state and last message, wrapped to the column's width."""
        step = next((s for s in self.pb.steps if s.id == step_id), None)
        if step is None:
            return
        state, message = self.said.get(step_id, (StepState.PENDING, ""))
        icon, style = STATE_STYLE.get(state, ("?", ""))
        t = Text.assemble((f"{icon} {step.id}", style), "  ", (step.title, "dim"))
        if message and message != step.title:
            t.append("\n" + message, style="red" if state == StepState.FAILED else "")
        self.query_one("#step-detail", Static).update(t)

    @on(DataTable.RowHighlighted, "#steps")
    def _highlighted(self, ev: DataTable.RowHighlighted) -> None:
        if ev.row_key.value is not None:
            self.show_detail(ev.row_key.value)


def playbook_title(pb: Playbook) -> Text:
    t = Text.assemble((pb.name, "bold"), "  ", (pb.description, "dim"))
    if pb.path is not None and ".rev" in pb.path.name:
        t.append(f"  [{pb.path.name}]", style="yellow")
    n = len(pb.nodes)
    if n:
        where = f"{n} node{'s' if n != 1 else ''} · master {pb.master}"
        if pb.on_slurm and pb.slurm is not None and pb.slurm.job:
            where += f" · slurm job {pb.slurm.job}"
    else:
        from ...core.slurm.alloc import describe_request

        where = describe_request(pb)
    t.append(f"\n{where} · {pb.job.nproc_per_node} proc/node · {pb.job.backend} · {pb.job.script}", style="dim")
    return t
