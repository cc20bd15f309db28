"""Bytes from a node's stream into whole lines, delivered in batches (never one call per line)."""

from __future__ import annotations

import time
from collections.abc import Callable

OnLines = Callable[[list[str]], None]


class LineSplitter:
    """Bytes in, whole lines out; a partial line waits for the rest."""

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> list[str]:
        data = self._tail + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self._tail = data
            return []
        self._tail = data[cut + 1:]
        # decoded in one piece ("\n" is never inside a UTF-8 sequence, so lines decode as they would apart)
        lines = data[:cut].decode("utf-8", "replace").split("\n")
        return [x.rstrip("\r") for x in lines] if b"\r" in data else lines

    def flush(self) -> list[str]:
        tail, self._tail = self._tail, b""
        return [tail.decode("utf-8", "replace").rstrip("\r")] if tail else []


def read_loop(read: Callable[[], bytes], on_lines: OnLines, batch_seconds: float = 0.05) -> None:
    """Read chunks until EOF; deliver whole lines in batches (never one call per line)."""
    splitter = LineSplitter()
    pending: list[str] = []
    last = time.monotonic()
    while True:
        data = read()
        if not data:
            break
        pending.extend(splitter.feed(data))
        now = time.monotonic()
        if pending and (len(pending) >= 1000 or now - last >= batch_seconds or len(data) < 4096):
            on_lines(pending)
            pending = []
            last = now
    pending.extend(splitter.flush())
    if pending:
        on_lines(pending)
