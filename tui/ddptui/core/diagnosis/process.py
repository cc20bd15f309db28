"""The parent's end of the diagnosis process (child.py): started on first use, fed by word of
where each node's log ends, never by its lines.

A reader's `grew()` only records the new end and wakes the sender thread, which writes what
changed since its last word: a busy child makes the pipe fill and the sender wait, never the
reader (ends only grow, so one word covers every batch it missed). Everything else (a node's
start, its exit, finish, sync) goes in order through the same thread. The child's words come back
on another thread: each finding that changed goes to `on_change`, each sync's answer to the
caller waiting for it.

If the child dies (killed, out of memory), the next word starts a new one, which reads every
node's log again from where this launch began: nothing is missed, a finding is only told again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .model import Finding

TUI_ROOT = str(Path(__file__).resolve().parents[3])  # the folder holding the ddptui package


# The most a batch's word waits for the batches after it. A running job's output comes as a batch
# every few ms per node (each print, each progress bar's redraw), and here a wake-up costs a thread
# ~60 µs of CPU: a word per batch cost the sender and the child 0.2-0.3 ms each (4 nodes x 100
# batches a second: 0.85 s of CPU each per 10 s, bench.stream --rate 100). The first batch after a
# quiet spell is told at once (live detection of a lone error line stays under a ms); the others
# within 20 ms go in the next word. Other words (a node's exit, a sync) do not wait.
COALESCE_SECONDS = 0.02
MAX_RESTARTS = 3  # a child that keeps dying (a broken install) is not started for ever


class EngineProcess:
    def __init__(self, config: dict[str, Any], on_change: Callable[[Finding], None]) -> None:
        self._config = config  # the engine's settings, sent with every reset
        self._on_change = on_change
        self._cond = threading.Condition()
        self._proc: subprocess.Popen | None = None
        self._ends: dict[str, int] = {}  # node -> bytes of its log the child may read (the nodes it knows)
        self._said: dict[str, int] = {}  # node -> the end last written to the child
        self._history: list[dict] = [{"op": "reset", **config}]  # this launch's words but grew, sync, text
        self._ops: deque[dict] = deque(self._history)  # words not yet written: the first child's reset first
        self._seq = 0
        self._waiting: dict[int, dict] = {}  # seq -> a sync word not yet answered
        self._answers: dict[int, dict] = {}
        self._last: list[dict] = []  # the findings of the last answer
        self._sender_waits = False
        self._closed = False
        self._failed: str | None = None  # why there is no child any more
        self._stderr: deque[str] = deque(maxlen=20)
        self.restarts = 0

    # ---- what the readers and the runner call ----------------------------------------------
    def known(self, node: str) -> bool:
        return node in self._ends

    def open_node(self, node: str, path: Path, offset: int, line: int) -> None:
        """`node`'s lines of this launch are in its log at `path` from byte `offset`, numbered from `line`."""
        with self._cond:
            self._ends[node] = self._said[node] = offset
            self._put({"op": "node", "node": node, "path": str(path), "offset": offset, "line": line})

    def grew(self, node: str, end: int) -> None:
        """`node`'s log holds whole lines up to byte `end` now (a reader's call: never waits). The
        sender is woken only when it sleeps: under a flood it finds the new ends on its next turn."""
        with self._cond:
            if node not in self._ends:  # a batch of the launch before a reset: not this child's
                return
            self._ends[node] = end
            if self._sender_waits:
                self._cond.notify_all()  # not notify(): a sync's caller waits on it too, and could take the one wake

    def text(self, node: str, line: int, text: str) -> None:
        """`node`'s lines from number `line`, joined by "\n": lines its log could not hold."""
        with self._cond:
            self._put({"op": "text", "node": node, "line": line, "text": text})

    def exited(self, node: str, rc: int) -> None:
        """`node`'s job ended with `rc`, after every line of its log as it ends now."""
        with self._cond:
            self._put({"op": "exited", "node": node, "rc": rc, "end": self._ends.get(node, 0)})

    def finish(self) -> None:
        """Judge what is judged at the end, after every line written so far."""
        with self._cond:
            self._put({"op": "finish", "ends": dict(self._ends)})

    def reset(self) -> None:
        """A new launch: a fresh engine, and no node known until its first lines."""
        with self._cond:
            self._ends.clear()
            self._said.clear()
            self._history = []
            if self._proc is None:
                self._ops.clear()  # no child yet: the first one needs only this reset
            self._put({"op": "reset", **self._config})

    def sync(self) -> dict:
        """Once the child has read every line written so far: its findings, and an error it met."""
        with self._cond:
            if self._closed:
                return {"findings": self._last, "error": None}  # what it said last, for a summary after the end
            if self._proc is None and self._failed is None and len(self._history) == 1:
                return {"findings": [], "error": None}  # nothing was ever said
            self._seq += 1
            seq = self._seq
            self._waiting[seq] = word = {"op": "sync", "seq": seq, "ends": dict(self._ends)}
            self._put(word)
            while seq not in self._answers and self._failed is None and not self._closed:
                self._cond.wait(1.0)
            self._waiting.pop(seq, None)
            answer = self._answers.pop(seq, None) or {"findings": self._last, "error": self._failed or "closed"}
            self._last = answer["findings"]
            return answer

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            proc = self._proc
        if proc is not None and proc.stdin:
            end_input(proc)

    # ---- the threads ---------------------------------------------------------------------------
    def _put(self, word: dict) -> None:
        """(Under the condition.)"""
        if word["op"] not in ("sync", "grew", "text"):  # lines sent as text (a log that could not be
            self._history.append(word)                  # written) are not kept: memory stays bounded
        self._ops.append(word)
        if self._proc is None:
            self._start()
        self._cond.notify_all()  # the sender, wherever it waits (see grew)

    def _start(self) -> None:
        """(Under the condition.) A child; after one died, told again all this launch said."""
        if self._failed is not None or self._closed:
            return
        if self._proc is not None:
            if self.restarts >= MAX_RESTARTS:
                self._failed = ("the diagnosis process keeps ending (rc " + str(self._proc.returncode) + "): "
                                + " | ".join(self._stderr))
                self._cond.notify_all()
                return
            self.restarts += 1
            self._ops = deque([*self._history, *self._waiting.values()])
            self._said = {}
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [TUI_ROOT, os.environ.get("PYTHONPATH")]))}
        self._proc = proc = subprocess.Popen(
            [sys.executable, "-m", "ddptui.core.diagnosis.child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, text=True, bufsize=1 << 16,
            start_new_session=True)  # the terminal's Ctrl-C is the parent's to handle; the child ends with its input
        for target in (self._send, self._listen, self._drain_stderr):
            threading.Thread(target=target, args=(proc,), name=f"ddptui-diagnosis{target.__name__}", daemon=True).start()

    def _send(self, proc: subprocess.Popen) -> None:
        assert proc.stdin is not None
        while True:
            with self._cond:
                while not self._closed and self._proc is proc and not self._ops and self._ends == self._said:
                    self._sender_waits = True
                    self._cond.wait()
                self._sender_waits = False
                if self._closed or self._proc is not proc:
                    return
                words = list(self._ops)
                self._ops.clear()
                grown = {n: e for n, e in self._ends.items() if self._said.get(n) != e}
                self._said.update(grown)
            if grown:  # the words after it were put after these lines were written: it goes first
                words.insert(0, {"op": "grew", "ends": grown})
            try:
                proc.stdin.write("".join(json.dumps(w) + "\n" for w in words))
                proc.stdin.flush()
            except (OSError, ValueError):  # the child is gone: _listen starts another
                return
            with self._cond:  # the next batches in one word, not a word and two wake-ups each
                self._cond.wait_for(lambda: self._ops or self._closed or self._proc is not proc, COALESCE_SECONDS)

    def _listen(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            msg = json.loads(raw)
            if msg["op"] == "change":
                self._on_change(Finding.from_json(msg["finding"]))
            elif msg["op"] == "synced":
                with self._cond:
                    self._answers[msg["seq"]] = msg
                    self._cond.notify_all()
        proc.wait()
        with self._cond:
            if self._proc is proc and not self._closed:
                self._start()  # it died under us: a new one reads this launch again
            self._cond.notify_all()

    def _drain_stderr(self, proc: subprocess.Popen) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self._stderr.append(line.rstrip())


def end_input(proc: subprocess.Popen) -> None:
    """End a diagnosis process (the child, a sieve) as it ends: at the end of its input; killed if
    it has not within 5 s."""
    try:
        proc.stdin.close()  # type: ignore[union-attr]
    except OSError:
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
