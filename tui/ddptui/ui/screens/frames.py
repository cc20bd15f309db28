"""The run screen's frames: the bridge's events and lines, to the widgets. What comes after a quiet
spell is shown at the next frame (30 a second); while lines keep coming, at most LINES_FPS times a
second, and under a flood FLOOD_FPS, so that drawing the panes leaves the frames between to the
keys, and the panes that follow the flood draw its newest lines one a frame, not all in the frame
that took them (PaneGrid.draw_next)."""

from __future__ import annotations

import time

from ...core import events as E
from ..bridge import Drained
from ..widgets.panes import FOLLOW_LINES, MergedLog
from ..widgets.results import ResultsTab

FLOOD_FPS = 4  # how often the panes are drawn while lines come faster than anyone reads them
# How often while lines keep coming (a training loop's prints, a progress bar on every rank): a
# draw of a pane that took lines costs Textual ~12 ms here (160x45: every row of a scrolled log is
# rendered again), and drawn at every frame that had a line, 4 nodes x 100 lines a second (one a
# write) kept the TUI at 77% of a core; at 10 draws a second 50%, at 5 31% (its readers' own share of
# that is ~8%). Five a second is about the flood's pace (FLOOD_FPS) and still reads as live.
LINES_FPS = 5


class Frames:
    """Mixed into PlaybookScreen (which has `bridge`, `pane_grid`, `_held`, `_next_drain`, `_apply`)."""

    def _frame(self) -> None:
        """30 times a second. What the bridge holds is drained at once after a quiet spell, then at
        most LINES_FPS times a second, FLOOD_FPS under a flood (a pane got more lines than it
        draws): drawing the panes is most of a frame's cost, and the frames between are the keys'."""
        now = time.monotonic()
        self.pane_grid.draw_next()  # a flood's panes, one a frame: no frame draws them all
        if now >= self._next_drain and self.bridge.pending:
            flooded = self._drain(frame=True)
            self._next_drain = now + 1 / (FLOOD_FPS if flooded else LINES_FPS)

    def _drain(self, frame: bool = False) -> bool:
        """What the bridge holds, to the widgets; whether a pane got more lines than it draws. A
        frame takes the batches up to the lines that came while it drew (the next frame's): drawn
        in a batch of their own they would look like a calm after the flood, and a pane that
        skipped lines rebuilds itself whole when the flood calms."""
        if self._held is not None:  # panes for the allocation's nodes are being mounted
            return False
        flooded = self._drain_batch()
        while self.bridge.pending and self._held is None and not (frame and self.bridge.lines_next):
            flooded = self._drain_batch() or flooded
        while not frame and self.pane_grid.due:  # not a frame (a seek, the run's end): all of it now
            self.pane_grid.draw_next()
        return flooded

    def _drain_batch(self, held: Drained | None = None) -> bool:
        d = held or self.bridge.drain()  # its events all came before its lines
        for i, ev in enumerate(d.events):
            self._apply(ev)
            if isinstance(ev, E.Allocated) and self._held is not None:  # the rest waits for the new panes
                self._held = Drained(d.lines, d.counts, d.events[i + 1:], d.merged)
                return False
        if d.events:
            self.refresh_bindings()  # a job started or ended, a finding or a command came: other keys apply
        self.pane_grid.write(d.lines, d.counts)
        if d.merged:
            merged = self.query_one(MergedLog)
            merged.append(d.merged, shown=merged.parent.display)
        results = self.query_one(ResultsTab)
        for node, lines in d.lines.items():
            results.feed(node, lines)
        return max(d.counts.values(), default=0) > FOLLOW_LINES
