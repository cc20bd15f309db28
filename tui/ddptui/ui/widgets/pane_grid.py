"""The Logs tab: one pane per node, with the filter, find and open-pane state they share."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, VerticalScroll
from textual.widgets import TabPane

from ...core.states import NodeStatus
from ...core.playbook.model import Playbook
from .panes import PANE_MAX_LINES, NodePane

GRID_MAX_NODES = 4  # more nodes than this: a list of one-line headers with one open pane
# Below 96 columns the narrow rail (31) leaves the panes under 65: two columns of them would be under
# 32 each, too narrow for a log line, so they stack, as long as each keeps MIN_STACKED_ROWS rows (3
# lines; else two narrow columns are the lesser evil). Decided on the terminal's width, not the
# grid's: that one passes through the wide rail's width while the breakpoint's class is applied.
STACK_BELOW = 96
MIN_STACKED_ROWS = 5


class PaneGrid(TabPane):
    """Up to four nodes in a grid; more as a list of collapsed panes with one open (`open_next`)."""

    def __init__(self, title: str, playbook: Playbook, clock: Callable[[], float] = time.time, **kw) -> None:
        super().__init__(title, **kw)
        self.clock = clock  # what "now" is for the panes' elapsed time
        self._take(playbook)
        self.filter = "all"
        self._find_pane: NodePane | None = None
        self._find_at = -1
        self.due: list[NodePane] = []  # the order of the panes' turns (draw_next); a pane's `tail_due` says it waits

    def _take(self, playbook: Playbook) -> None:
        self.master = playbook.master
        self.roles = {n.name: "master" if n.name == playbook.master else "worker"
                      for n in playbook.ordered_nodes()}
        self.open_pane = playbook.master

    def compose(self) -> ComposeResult:
        yield self._panes()

    def _panes(self) -> Grid | VerticalScroll:
        panes = [NodePane(node, role, PANE_MAX_LINES, id=f"pane-{css_id(node)}") for node, role in self.roles.items()]
        for pane in panes:
            pane.clock = self.clock
        return (VerticalScroll if self.many_nodes else Grid)(*panes, id="panes")

    def on_mount(self) -> None:
        self._layout()

    def _layout(self) -> None:
        if self.many_nodes:
            self.open(self.master)
        else:
            self._columns()
            self.call_after_refresh(self._columns)  # its height is known once laid out

    def on_resize(self) -> None:
        if not self.many_nodes:
            self._columns()

    def _columns(self) -> None:
        """Two columns, or one: below 80 columns two panes side by side were 16 columns each. Decided
        on the tab's own height: before it is laid out (or while another tab shows) it has none, and
        the call after the first refresh, or the resize that shows it, decides."""
        n, h = len(self.roles), self.size.height
        if n > 1 and not h:
            return
        stack = n == 1 or (self.app.size.width < STACK_BELOW and h // n >= MIN_STACKED_ROWS)
        grid = self.query_one(Grid)
        if grid.styles.grid_size_columns != (1 if stack else 2):
            grid.styles.grid_size_columns = 1 if stack else 2

    async def set_nodes(self, playbook: Playbook) -> None:
        """Panes for another node list: a Slurm allocation names the nodes once it is granted."""
        self._take(playbook)
        self._find_pane, self._find_at = None, -1
        self.due = []
        await self.query_one("#panes").remove()
        await self.mount(self._panes())
        self._layout()

    @property
    def many_nodes(self) -> bool:
        return len(self.roles) > GRID_MAX_NODES

    @property
    def panes(self) -> list[NodePane]:
        return list(self.query(NodePane))

    def pane(self, node: str) -> NodePane:
        return self.query_one(f"#pane-{css_id(node)}", NodePane)

    def has_pane(self, node: str) -> bool:
        return node in self.roles

    # ---- lines and states -----------------------------------------------------------------------
    def write(self, lines: dict[str, list[str]], counts: dict[str, int]) -> None:
        """One frame's lines, per node (already trimmed to what a pane holds); a pane that is not on
        screen (another tab, or collapsed) only keeps them, till it shows (`catch_up`)."""
        for node, batch in lines.items():
            pane = self.pane(node)
            if pane.write(batch, counts[node], shown=self.display and not pane.has_class("-collapsed")):
                if pane not in self.due:
                    self.due.append(pane)
            elif not pane.tail_due:
                pane._subtitle()  # the line count (a pane that waits for its turn says it then)

    def draw_next(self) -> None:
        """One frame's share of a flood: the next pane that waits for its turn draws its newest lines
        (one whose filter changed since has drawn them already, and gives its turn on)."""
        while self.due:
            pane = self.due.pop(0)
            if pane.tail_due and pane.is_attached:
                pane.draw_tail()
                return

    def tick(self) -> None:
        """Running panes' elapsed time; a pane on screen that skipped lines of a flood now over, whole again."""
        for pane in self.panes:
            if pane.state == NodeStatus.RUNNING:
                pane.refresh_header()
            if pane.stale and not pane.fed and self.display and not pane.has_class("-collapsed"):
                pane.catch_up()
            pane.fed = False

    def on_show(self) -> None:
        for pane in self.panes:
            if not pane.has_class("-collapsed"):
                pane.catch_up()

    def reset(self) -> None:
        """A new run: every pane empty and pending."""
        self.due = []
        for pane in self.panes:
            pane.tail_due = False
            pane.log.clear()
            pane.buffer.clear()
            pane.stale = False
            pane.total_lines = 0
            pane.started = pane.ended = None
            pane.ranks = ""
            pane.set_state(NodeStatus.PENDING)

    # ---- which pane is open (many nodes) ------------------------------------------------------
    def open(self, node: str) -> None:
        for p in self.panes:
            p.set_class(p.node != node, "-collapsed")
        self.open_pane = node
        if self.display:
            self.pane(node).catch_up()

    def open_next(self) -> None:
        if not self.many_nodes:
            return
        names = list(self.roles)
        self.open(names[(names.index(self.open_pane) + 1) % len(names)])

    # ---- filters and find ---------------------------------------------------------------------------
    def cycle_filter(self, order: list[str]) -> str:
        """The filter after the current one in `order`, applied to every pane; returns it."""
        panes = self.panes
        current = panes[0].filter if panes else "all"
        nxt = order[(order.index(current) + 1) % len(order)] if current in order else "all"
        self.set_filter(nxt)
        return nxt

    def set_filter(self, flt: str) -> None:
        """One filter on every pane; one not on screen (collapsed) applies it when it shows."""
        for p in self.panes:
            if self.display and not p.has_class("-collapsed"):
                p.set_filter(flt)
            else:
                p.filter, p.stale = flt, True
                p._subtitle()
        self.filter = flt

    def find_next(self, needle: str, start: NodePane) -> Text | None:
        """Scroll to the next line with `needle` in the pane being searched (`start` when a search
        begins); what to show in the status line, or None (and a notification) when there is none."""
        pane = self._find_pane or start
        self._find_pane = pane
        hit = pane.find(needle, self._find_at)
        if hit is None:
            self.notify(f"{needle!r} is not in {pane.node}'s pane", severity="warning")
            return None
        self._find_at = hit
        return Text(f"{pane.node}: line {hit + 1} of the pane has {needle!r}")

    def reveal(self, node: str, text: str) -> tuple[NodePane, int | None]:
        """Show the line with `text` in `node`'s pane, unfiltered and open; its index there, or None."""
        pane = self.pane(node)
        if pane.filter != "all":
            pane.set_filter("all")
        if self.many_nodes:
            self.open(node)
        return pane, pane.find(text)

    def end_find(self) -> None:
        if self._find_pane is not None:
            self._find_pane.log.mark(None)
        self._find_pane, self._find_at = None, -1


def css_id(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
