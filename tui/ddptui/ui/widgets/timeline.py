"""The timeline bar of a recorded run: where the replay is, how fast it plays, where the findings are."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...core.bundle.replay import Mark

SPEEDS = (1, 2, 4, 8, 16, 32, 64)
MARK_STYLE = {"error": "bold red", "warning": "bold yellow"}


def clock_text(seconds: float) -> str:
    seconds = max(0.0, seconds)
    m, s = divmod(seconds, 60)
    return f"{int(m):02d}:{s:04.1f}" if m < 60 else f"{int(m // 60)}h{int(m % 60):02d}:{int(s):02d}"


HINTS = ("space play/pause", "[ ] speed", ". next finding", "0 start", "e end", "w save playbook")
MIN_BAR = 10  # cells of the bar itself: the hints that would leave it fewer are left to `?`


class TimelineBar(Static):
    DEFAULT_CSS = """
    TimelineBar { height: 1; padding: 0 1; background: $panel; }
    """

    def on_resize(self) -> None:
        if getattr(self, "_shown", None):
            self.show(*self._shown)

    def show(self, t: float, start: float, end: float, marks: list[Mark], speed: int, playing: bool) -> None:
        self._shown = (t, start, end, marks, speed, playing)
        span = max(end - start, 1e-9)
        head = Text()
        head.append("▶ playing" if playing else "■ paused ", style="bold green" if playing else "bold")
        head.append(f" {speed:>2}×  ", style="cyan")
        head.append(f"{clock_text(t - start)} / {clock_text(end - start)}  ")
        room = (self.size.width or 120) - head.cell_len  # size: inside the padding
        shown = list(HINTS)  # as many of the keys as leave the bar MIN_BAR cells, the first ones first
        while shown and room - len("  " + " · ".join(shown)) < MIN_BAR:
            shown.pop()
        keys = Text("  " + " · ".join(shown) if shown else "", style="dim")
        width = max(10, room - keys.cell_len)
        at = round((t - start) / span * (width - 1))
        cells = [("━" if i <= at else "─", "green" if i <= at else "dim") for i in range(width)]
        for m in marks:  # the findings and failures, where they happened
            i = min(width - 1, max(0, round((m.t - start) / span * (width - 1))))
            cells[i] = ("●", MARK_STYLE.get(m.severity, "bold"))
        cells[min(at, width - 1)] = ("╋", "bold white")
        bar = Text()
        for ch, style in cells:
            bar.append(ch, style=style)
        self.update(head + bar + keys)
