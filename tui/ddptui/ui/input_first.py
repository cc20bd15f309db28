"""Input first: the nodes' readers wait while the app answers a key (ui/bridge.py says why).

A module of its own because the app's input thread needs it from the first frame on, and the event
bridge (with the core's events) only once a playbook's screen opens: the picker's first frame no
longer imports them (bench.startup).
"""

from __future__ import annotations

import threading
import time


class InputFirst:
    """The readers wait while the app answers a key. Under a flood the UI thread shared the GIL
    with every node's reader while it ran a key's action and drew the frame that shows it
    (bench.tui_flood, 4 x 3M lines, alternating with the code before: key -> screen p50 61 vs
    103 ms, p90 105 vs 183, p99 159 vs 275; the idle app's p50 57-64 ms; README, Benchmarks).

    `hold` (any thread: the key has come in) until `release` (the UI thread: its effect is drawn),
    and at most `most` seconds, should a key never reach the point that releases it."""

    def __init__(self, most: float = 0.25) -> None:
        self.most = most
        self.ui_thread: int | None = None  # never held back itself (the app sets it once running)
        self._flowing = threading.Event()
        self._flowing.set()
        self._until = 0.0

    def hold(self) -> None:
        self._until = time.monotonic() + self.most
        self._flowing.clear()

    def release(self) -> None:
        self._flowing.set()

    def wait(self) -> None:
        """A reader, before it hands on a batch: wait out a hold (returns at once without one)."""
        if not self._flowing.is_set() and threading.get_ident() != self.ui_thread:
            left = self._until - time.monotonic()
            if left > 0:
                self._flowing.wait(left)
