"""The run directory: playbook as run, one log per node written as lines arrive, events, summary.

Beside each `<node>.log`, `<node>.times` records when its lines arrived: one `first count t` row per
batch (1-based first line, how many lines, Unix time), so a bundle can replay the run at its pace.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import IO, Any

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(s: str) -> str:
    return _SAFE.sub("_", s).strip("._") or "node"


class RunDir:
    """Owns one run's folder. Thread-safe; every write is flushed, so a crash loses nothing."""

    def __init__(self, root: Path, playbook_name: str, playbook_text: str) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.run_id = f"{stamp}-{safe_name(playbook_name)}-{secrets.token_hex(2)}"
        self.path = Path(root).expanduser() / self.run_id
        self.path.mkdir(parents=True, exist_ok=False)
        (self.path / "playbook.yaml").write_text(playbook_text, encoding="utf-8")
        self._logs: dict[str, IO[str]] = {}
        self._times: dict[str, IO[str]] = {}
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._summary_lock = threading.Lock()
        self._events = open(self.path / "events.jsonl", "a", encoding="utf-8")

    def log_path(self, node: str) -> Path:
        return self.path / f"{safe_name(node)}.log"

    def times_path(self, node: str) -> Path:
        return self.path / f"{safe_name(node)}.times"

    def append(self, node: str, lines: list[str]) -> int:
        """Write lines to the node's log now; return the 1-based number of the first one."""
        with self._lock:
            f = self._logs.get(node)
            if f is None:
                f = self._logs[node] = open(self.log_path(node), "a", encoding="utf-8")
                self._times[node] = open(self.times_path(node), "a", encoding="utf-8")
                self._counts[node] = 0
            first = self._counts[node] + 1
            f.write("".join(line + "\n" for line in lines))
            f.flush()
            if lines:
                # floored, never rounded up: a line must not seem to arrive after what it caused
                self._times[node].write(f"{first} {len(lines)} {math.floor(time.time() * 1000) / 1000:.3f}\n")
                self._times[node].flush()
            self._counts[node] += len(lines)
            return first

    def event(self, data: dict[str, Any]) -> None:
        with self._lock:
            if not self._events.closed:
                self._events.write(json.dumps(data, default=str) + "\n")
                self._events.flush()

    def write_playbook(self, text: str) -> None:
        (self.path / "playbook.yaml").write_text(text, encoding="utf-8")

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Replace summary.json atomically (readers never see half a file); any thread."""
        text = json.dumps(summary, indent=2, default=str) + "\n"
        with self._summary_lock:
            tmp = self.path / "summary.json.tmp"
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, self.path / "summary.json")

    def close(self) -> None:
        with self._lock:
            for f in (*self._logs.values(), *self._times.values()):
                f.close()
            self._events.close()
