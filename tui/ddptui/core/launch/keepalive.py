"""Like OpenSSH's ServerAliveInterval/ServerAliveCountMax: a node that stops answering is lost.

paramiko's own keepalive never asks for a reply, so it cannot notice a dead link; the transport's
`alive()` sends keepalive@openssh.com with want-reply and waits for the answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .nodes import NodeRun

MISSES = 3


class Watcher:
    """A loop on a thread of its own while there is something to watch: `ensure_running()` starts
    it (again, once it has returned), `closed = True` ends it."""

    thread_name = "ddptui-watcher"

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.closed = False

    def ensure_running(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        raise NotImplementedError


class Keepalive(Watcher):
    thread_name = "ddptui-keepalive"

    def __init__(self, interval: float, watched: Callable[[], list[NodeRun]],
                 on_lost: Callable[[NodeRun], None]) -> None:
        self.interval = max(0.5, float(interval))
        self._watched = watched
        self._on_lost = on_lost
        super().__init__()

    def _loop(self) -> None:
        misses: dict[str, int] = {}
        while not self.closed:
            nodes = [nr for nr in self._watched() if hasattr(nr.transport, "alive")]
            if not nodes:
                return
            for nr in nodes:
                if nr.transport.alive(timeout=self.interval):
                    misses[nr.name] = 0
                    continue
                misses[nr.name] = misses.get(nr.name, 0) + 1
                if misses[nr.name] >= MISSES:
                    self._on_lost(nr)
            time.sleep(self.interval)
