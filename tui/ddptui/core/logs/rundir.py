"""The run directory: playbook as run, one log per node written as lines arrive, events, summary.

Beside each `<node>.log`, `<node>.times` records when its lines arrived: one `first count t` row per
batch (1-based first line, how many lines, Unix time), so a bundle can replay the run at its pace.

A full disk or a folder that turns read-only mid-run never stops a run: the first write that fails
for a file (a node's log, events, the summary) is recorded in `write_errors` and told once through
`on_write_error`; that file is written no more (a log with a hole would mislead), and the lines go on
to the screen as before. A folder that cannot be made at all is a RunDirError naming it and why.

Private and masked at rest: folders 0700, files 0600 (whatever the umask), and every text goes
through the run's Redactor first: the playbook copy, events and summary fully; the node logs for
the secret values the run knows (one search per batch, nothing when none is known).
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from ..errors import UsageError
from ..paths import private_dir, safe_name, write_private
from ..redact import Redactor
from .lines import Chunk


def open_private(path: Path, mode: str = "a") -> IO:
    """A file only its owner may read (0600 from the first byte, whatever the umask); text (UTF-8)
    unless `mode` says "b"."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8")


def node_log(run_dir: str | Path, node: str) -> Path:
    """Where a run folder keeps a node's output."""
    return Path(run_dir) / f"{safe_name(node)}.log"


class RunDirError(UsageError):
    """The run's folder cannot be made or written before the run starts: nothing was run, and the
    runs folder is the user's to fix, like a bad --runs-dir (exit code 2)."""


def why(e: OSError) -> str:
    """`No space left on device (ENOSPC)`: the system's words and the name to search for."""
    code = errno.errorcode.get(e.errno or 0)
    return f"{e.strerror or e}" + (f" ({code})" if code else "")


class RunDir:
    """Owns one run's folder. Thread-safe; every write is flushed, so a crash loses nothing."""

    def __init__(self, root: Path, playbook_name: str, playbook_text: str, redactor: Redactor | None = None) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.run_id = f"{stamp}-{safe_name(playbook_name)}-{secrets.token_hex(2)}"
        self.redactor = redactor or Redactor.from_playbook_text(playbook_text)
        self.path = Path(root).expanduser() / self.run_id
        try:
            private_dir(Path(root))
            self.path.mkdir(mode=0o700, exist_ok=False)
            os.chmod(self.path, 0o700)
            self.write_playbook(playbook_text)
            self._events = open_private(self.path / "events.jsonl")
        except OSError as e:
            shutil.rmtree(self.path, ignore_errors=True)  # no half-made run left to be listed
            raise RunDirError(f"runs folder {root}: cannot write this run's files there: {why(e)}; nothing was "
                              f"run (free some space there, or choose another folder with --runs-dir)") from None
        self._logs: dict[str, IO[bytes]] = {}
        self._times: dict[str, IO[str]] = {}
        self._counts: dict[str, int] = {}
        self._sizes: dict[str, int] = {}  # bytes of each node's log
        self._lock = threading.Lock()  # the run's files and write_errors; a node's log and times: its own lock
        self._node_locks: dict[str, threading.Lock] = {}
        self._summary_lock = threading.Lock()
        self.closed = False  # the run's record is final: its summary and events.jsonl's run-finished agree
        self.write_errors: dict[str, str] = {}  # what ("node04", "events.jsonl", "summary.json") -> why it stopped
        self.on_write_error: Callable[[str, Path, str], None] | None = None  # (what, path, why), once each

    def _failed(self, what: str, path: Path, e: OSError) -> Callable[[], None]:
        """Record a write that failed (under the lock); what to call once the lock is released."""
        if what in self.write_errors:
            return lambda: None
        self.write_errors[what] = why(e)
        cb = self.on_write_error
        return (lambda: cb(what, path, self.write_errors[what])) if cb else (lambda: None)

    def log_path(self, node: str) -> Path:
        return node_log(self.path, node)

    def times_path(self, node: str) -> Path:
        return self.path / f"{safe_name(node)}.times"

    def append(self, node: str, lines: list[str], masked: bool = False) -> int:
        """Write lines to the node's log now; return the 1-based number of the first one (counted
        on when the log can no longer be written, so line numbers stay those of the stream).
        `masked`: the caller already passed them through this run's redactor."""
        shown = lines if masked else self.redactor.lines(lines)
        return self.append_chunk(node, Chunk.of_lines(shown))

    def append_chunk(self, node: str, chunk: Chunk) -> int:
        """A reader's batch, already masked, as `append`: its bytes go to the log as they are.
        Under the node's own lock: nodes' batches are written at once, not one after another (with
        one lock, 4 nodes flooding waited ~1 s for each other's writes in a 2 s stream)."""
        failed = None
        with self._node_lock(node):
            first = self._counts.setdefault(node, 0) + 1
            self._counts[node] += chunk.count
            if node not in self.write_errors:
                try:
                    self._write_log(node, first, chunk)
                except OSError as e:
                    failed = e
        if failed is not None:
            with self._lock:
                then = self._failed(node, self.log_path(node), failed)
            then()
        return first

    def _node_lock(self, node: str) -> threading.Lock:
        lock = self._node_locks.get(node)
        if lock is None:
            with self._lock:
                lock = self._node_locks.setdefault(node, threading.Lock())
        return lock

    def log_size(self, node: str) -> int | None:
        """Bytes in the node's log so far; None once it can no longer be written."""
        return None if node in self.write_errors else self._sizes.get(node, 0)

    def _write_log(self, node: str, first: int, chunk: Chunk) -> None:
        f = self._logs.get(node)
        if f is None:
            f = self._logs[node] = open_private(self.log_path(node), "ab")
            self._times[node] = open_private(self.times_path(node))
        if not chunk.count:
            return
        f.write(chunk.data)
        f.flush()
        self._sizes[node] = self._sizes.get(node, 0) + len(chunk.data)
        # floored, never rounded up: a line must not seem to arrive after what it caused
        self._times[node].write(f"{first} {chunk.count} {math.floor(time.time() * 1000) / 1000:.3f}\n")
        self._times[node].flush()

    def event(self, data: dict[str, Any]) -> None:
        then = _nothing
        with self._lock:
            if not self._events.closed and "events.jsonl" not in self.write_errors:
                try:
                    self._events.write(json.dumps(self.redactor.obj(data, "events"), default=str) + "\n")
                    self._events.flush()
                except OSError as e:
                    then = self._failed("events.jsonl", self.path / "events.jsonl", e)
        then()

    def write_playbook(self, text: str, rel: str = "playbook.yaml") -> None:
        """A playbook into the run folder (`rel`: playbook.yaml or revisions/NAME), its secret values
        hidden: the real ones reach the nodes only through the guard's stdin."""
        path = self.path / rel
        if path.parent != self.path:
            private_dir(path.parent)
        write_private(path, self.redactor.yaml_text(text).encode())

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Replace summary.json atomically (readers never see half a file); any thread. Not after
        close(): a step that ended after the user quit rewrote it ("check": "passed", "ok": true)
        under events.jsonl's last word, run-finished with "check": "running", "ok": false."""
        text = json.dumps(self.redactor.obj(summary, "summary"), indent=2, default=str) + "\n"
        then = _nothing
        with self._summary_lock:
            if self.closed:
                return
            try:
                write_private(self.path / "summary.json", text.encode())
            except OSError as e:  # the last summary that could be written stays whole
                with self._lock:
                    then = self._failed("summary.json", self.path / "summary.json", e)
        then()

    def _every_node_has_a_log(self, nodes: Iterable[str]) -> None:
        """A node of the run has its log, empty if it never printed (a check failed, it could not be
        reached): the run's folder holds one `<node>.log` per node, as readers count on."""
        for node in nodes:
            with self._node_lock(node):
                if node not in self._logs and node not in self.write_errors:
                    try:
                        self._write_log(node, 1, Chunk(b"", 0))
                    except OSError:  # no log to make on a full disk: the summary still says why
                        pass

    def close(self, nodes: Iterable[str] = ()) -> None:
        """The run's end: each of its `nodes` (final now: a Slurm allocation names them late) gets
        its log if it has none, then every file is closed and summary.json is no longer rewritten."""
        self._every_node_has_a_log(nodes)
        with self._summary_lock:
            self.closed = True
        with self._lock:
            locks = list(self._node_locks.values())
        for lock in locks:  # each node's batch being written, if one is, ends first
            lock.acquire()
        try:
            with self._lock:
                for f in (*self._logs.values(), *self._times.values(), self._events):
                    try:
                        f.close()
                    except OSError:  # what a full disk would not take was already said
                        pass
        finally:
            for lock in locks:
                lock.release()


def _nothing() -> None:
    return None


_TIME_FIELDS = ("started", "ended")


def _a_time(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < 1e11


def clean_summary(s: Any) -> dict[str, Any]:
    """A summary.json as its readers take it for granted, from a file anybody may have written (a
    bundle comes from elsewhere): a dict; `nodes` and `facts` dicts of a dict per node; `findings`
    a list of dicts; times that are times. What has the wrong shape is left out, never guessed."""
    if not isinstance(s, dict):
        return {}
    out = {k: v for k, v in s.items() if k not in _TIME_FIELDS or _a_time(v)}
    for key in ("nodes", "facts"):
        if key in s:
            v = s[key]
            out[key] = {n: {k: x for k, x in d.items() if k not in _TIME_FIELDS or _a_time(x)}
                        for n, d in v.items() if isinstance(n, str) and isinstance(d, dict)} if isinstance(v, dict) else {}
    for key in ("findings", "results"):
        if key in s:
            out[key] = [f for f in s[key] if isinstance(f, dict)] if isinstance(s[key], list) else []
    if "steps" in s and not isinstance(s["steps"], dict):
        out["steps"] = {}
    return out
