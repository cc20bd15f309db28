"""Someone's recorded run, read-only: the step-through screen fed by a replay instead of a runbook.

The bundle becomes the core event stream a live run emits (`core.bundle.replay`); this screen pushes
those events through the same bridge into the same widgets, up to the moment the timeline is at.
Nothing reaches a node: the actions that would are refused with words.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static, TabbedContent

from ...core.bundle.read import Bundle
from ...core.bundle.replay import Timeline
from ...core.bundle.view import headline, save_playbook, source_host
from ...core.errors import DdptuiError
from ...core.events import NodeOutput
from ...core.fixes import Proposal
from ...core.playbook.model import Playbook
from ..widgets.checks import ChecksTab
from ..widgets.findings import FindingsTab
from ..widgets.panes import MergedLog
from ..widgets.steps import StepsPanel, StepTable
from ..widgets.timeline import SPEEDS, TimelineBar
from .playbook import PlaybookScreen
from .read_only import ReadOnlyActions


def _no_cluster(pb: Playbook, node: str):
    raise DdptuiError("a recorded run is read-only: it reaches no node")


class BundleScreen(ReadOnlyActions, PlaybookScreen):
    """A recorded run at a moment of its timeline (its end, when opened); it plays at 1× to 64×."""

    BINDINGS = [
        Binding("space", "play_pause", "Play/pause", tooltip="Play / pause the replay: from where the timeline is"),
        Binding("right_square_bracket", "faster", "Speed", key_display="[ ]",  # the pair, as one key in the footer
                tooltip="Faster: replay up to 64×"),
        Binding("left_square_bracket", "slower", "Slower", show=False, tooltip="Slower: replay down to 1×"),
        Binding("full_stop", "next_mark", "Next finding", tooltip="Next finding or failure: jump to it"),
        Binding("e", "to_end", "End", show=False, tooltip="Jump to the end: everything the run recorded"),
        Binding("0", "to_start", "Start", show=False, tooltip="Jump to the start: before the run began"),
        Binding("w", "save_playbook", "Save playbook",
                tooltip="Save playbook: the run's, its fixes applied, into this folder"),
        # the cluster's actions: still answered (in words), no longer advertised
        Binding("r", "run_step", "Run step", show=False),
        Binding("n", "next_step", "Next", show=False),
        Binding("s", "skip_step", "Skip", show=False),
        Binding("a", "run_all", "Run all from here", show=False),
        Binding("x", "stop_job", "Stop job", show=False),
    ]


    def __init__(self, bundle: Bundle, playbook: Playbook, note: str = "", folder: Path | None = None) -> None:
        self.folder = folder or Path.cwd()
        super().__init__(playbook, self.folder, _no_cluster)
        self.bundle, self.note = bundle, note
        self.timeline = Timeline.of(bundle, playbook)
        self.t = self.timeline.start
        self.pos = 0  # events applied so far
        self.speed = 16
        self.playing = False
        self._muted = False
        self._last = time.monotonic()
        self.clock = lambda: self.t
        self.saved_playbooks: list[Path] = []

    # ---- layout ----------------------------------------------------------------------------------
    def on_mount(self) -> None:  # Textual calls PlaybookScreen.on_mount after this one
        self.app.sub_title = self.sub_title = f"{self.pb.name} — read-only"
        banner = Text.assemble((" READ-ONLY ", "bold black on yellow"), " ", (headline(self.bundle, run_id=False), "bold"))
        if self.note:
            banner.append(f"\n{self.note}", style="yellow")
        self.mount(Static(banner, id="banner"), before=self.query_one("#main"))
        self.mount(TimelineBar(id="timeline"), after=self.query_one("#main"))
        self.set_interval(1 / 20, self._play_tick)
        self.call_after_refresh(self.action_to_end)

    @property
    def refusal(self) -> str:
        where = (f"a bundle from {source_host(self.bundle)}" if self.bundle.kind == "bundle"
                 else f"a recorded run ({self.bundle.source})")
        return f"read-only: this is {where}; save the playbook (w) to run it on your cluster"

    # ---- moving through the run ----------------------------------------------------------------------
    def seek(self, t: float) -> None:
        """Show what was known at time t: the events up to t, through the bridge, into the widgets."""
        tl = self.timeline
        t = min(max(t, tl.start), tl.end)
        if t < self.t or self.pos == 0:
            self._reset_view()
        upto = tl.count_at(t)
        quiet = not self.playing or upto - self.pos > 50  # a jump: the notifications of the way are noise
        tab = self.query_one(TabbedContent).active
        self._muted = quiet
        try:
            waiting = False  # an event not yet shown: lines after it must not overtake it
            for _, ev in tl.events[self.pos:upto]:
                if isinstance(ev, NodeOutput) and waiting:
                    self._drain()
                waiting = not isinstance(ev, NodeOutput)
                self.bridge.push(ev)
            self._drain()
        finally:
            self._muted = False
        if quiet:
            self.query_one(TabbedContent).active = tab  # a jump keeps the tab the user is looking at
        self.pos, self.t = upto, t
        if self.history:
            self.query_one(StepTable).select(self.history[-1][0])  # the step the run was at
        self.pane_grid.tick()
        self._show_timeline()

    def _reset_view(self) -> None:
        self.bridge.drain()
        self.pos = 0
        self.t = self.timeline.start
        self.history.clear()
        self.commands.clear()
        self.pane_grid.reset()
        self.query_one(MergedLog).clear()
        self.query_one(StepsPanel).show_playbook(self.pb)
        self.query_one("#step-detail", Static).update("")
        self.query_one(ChecksTab).matrix.clear_results()
        self.query_one(FindingsTab).clear("no findings yet at this moment of the run")

    def _show_timeline(self) -> None:
        tl = self.timeline
        self.query_one(TimelineBar).show(self.t, tl.start, tl.end, tl.marks, self.speed, self.playing)

    def _play_tick(self) -> None:
        now = time.monotonic()
        dt, self._last = now - self._last, now
        if not self.playing:
            return
        t = min(self.t + dt * self.speed, self.timeline.end)
        if t >= self.timeline.end:
            self.playing = False
        self.seek(t)

    def notify(self, *args, **kwargs) -> None:  # quiet while a jump replays what happened on the way
        if not self._muted:
            super().notify(*args, **kwargs)

    # ---- the timeline's actions --------------------------------------------------------------------
    def action_play_pause(self) -> None:
        if not self.playing and self.t >= self.timeline.end:
            self.seek(self.timeline.start - 1)  # at the end: play it again from the start
        self.playing = not self.playing
        self._last = time.monotonic()
        self._show_timeline()

    def _set_speed(self, step: int) -> None:
        i = SPEEDS.index(self.speed) if self.speed in SPEEDS else 0
        self.speed = SPEEDS[min(max(i + step, 0), len(SPEEDS) - 1)]
        self._show_timeline()

    def action_faster(self) -> None:
        self._set_speed(+1)

    def action_slower(self) -> None:
        self._set_speed(-1)

    def action_to_start(self) -> None:
        self.playing = False
        self._reset_view()
        self.seek(self.timeline.start)

    def action_to_end(self) -> None:
        self.playing = False
        self.seek(self.timeline.end)

    def action_next_mark(self) -> None:
        m = self.timeline.next_mark(self.t)
        if m is None:
            self.notify("no finding or failure after this moment")
            return
        self.playing = False
        self.seek(m.t)
        self._status(Text(f"{m.label}  (at {m.t - self.timeline.start:.1f}s)",
                          style="bold red" if m.severity == "error" else "bold yellow"))

    # ---- saving the playbook, refusing the cluster -----------------------------------------------------
    def action_save_playbook(self) -> None:
        try:
            path = save_playbook(self.bundle, self.folder)
        except DdptuiError as e:
            self.notify(str(e), severity="error")
            return
        self.saved_playbooks.append(path)
        self.notify(f"saved the playbook as {path}: run it with `ddptui {path}`", timeout=10)

    def _apply_and_relaunch(self, proposal: Proposal) -> None:
        self._refuse()
