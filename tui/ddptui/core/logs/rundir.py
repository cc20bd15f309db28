"""The run directory: playbook as run, one log per node written as lines arrive, events, summary.

Beside each `<node>.log`, `<node>.times` records when its lines arrived: one `first count t` row per
batch (1-based first line, how many lines, Unix time), so a bundle can replay the run at its pace.

Private and masked at rest: folders 0700, files 0600 (whatever the umask), and every text goes
through the run's Redactor first: the playbook copy, events and summary fully; the node logs for
the secret values the run knows (one search per batch, nothing when none is known).
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

from ..redact import Redactor

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(s: str) -> str:
    return _SAFE.sub("_", s).strip("._") or "node"


def private_dir(path: Path) -> Path:
    """mkdir -p with each folder it creates 0700 (an existing one is left as it is)."""
    path = Path(path).expanduser()
    if not path.is_dir():
        private_dir(path.parent)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(path, 0o700)  # mkdir's mode passes through the umask
    return path


def open_private(path: Path, mode: str = "a") -> IO[str]:
    """A text file only its owner may read (0600 from the first byte, whatever the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, mode, encoding="utf-8")


def write_private(path: Path, text: str) -> None:
    with open_private(path, "w") as f:
        f.write(text)


class RunDir:
    """Owns one run's folder. Thread-safe; every write is flushed, so a crash loses nothing."""

    def __init__(self, root: Path, playbook_name: str, playbook_text: str, redactor: Redactor | None = None) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.run_id = f"{stamp}-{safe_name(playbook_name)}-{secrets.token_hex(2)}"
        self.redactor = redactor or Redactor.from_playbook_text(playbook_text)
        self.path = private_dir(Path(root)) / self.run_id
        self.path.mkdir(mode=0o700, exist_ok=False)
        os.chmod(self.path, 0o700)
        self.write_playbook(playbook_text)
        self._logs: dict[str, IO[str]] = {}
        self._times: dict[str, IO[str]] = {}
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._summary_lock = threading.Lock()
        self._events = open_private(self.path / "events.jsonl")

    def log_path(self, node: str) -> Path:
        return self.path / f"{safe_name(node)}.log"

    def times_path(self, node: str) -> Path:
        return self.path / f"{safe_name(node)}.times"

    def append(self, node: str, lines: list[str]) -> int:
        """Write lines to the node's log now; return the 1-based number of the first one."""
        with self._lock:
            f = self._logs.get(node)
            if f is None:
                f = self._logs[node] = open_private(self.log_path(node))
                self._times[node] = open_private(self.times_path(node))
                self._counts[node] = 0
            first = self._counts[node] + 1
            lines = self.redactor.lines(lines)
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
                self._events.write(json.dumps(self.redactor.obj(data, "events"), default=str) + "\n")
                self._events.flush()

    def write_playbook(self, text: str, rel: str = "playbook.yaml") -> None:
        """A playbook into the run folder (`rel`: playbook.yaml or revisions/NAME), its secret values
        hidden: the real ones reach the nodes only through the guard's stdin."""
        path = self.path / rel
        if path.parent != self.path:
            private_dir(path.parent)
        write_private(path, self.redactor.yaml_text(text))

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Replace summary.json atomically (readers never see half a file); any thread."""
        text = json.dumps(self.redactor.obj(summary, "summary"), indent=2, default=str) + "\n"
        with self._summary_lock:
            tmp = self.path / "summary.json.tmp"
            write_private(tmp, text)
            os.replace(tmp, self.path / "summary.json")

    def close(self) -> None:
        with self._lock:
            for f in (*self._logs.values(), *self._times.values()):
                f.close()
            self._events.close()
