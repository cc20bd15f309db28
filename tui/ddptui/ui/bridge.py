"""Core events -> the UI, in batches.

The runbook calls `push` from worker threads; the app drains the queue on a 30 Hz timer. Output
lines are grouped per node and trimmed to what a pane can hold before they reach a widget, so a
flood of lines costs one `write_lines` per pane per frame, never one message per line
(measured: one message per line stalls Textual for seconds, batches keep keys answered in ms).

Input first: from the moment a key comes in until its effect is on the screen, the nodes' readers
wait before handing on their next batch (`InputFirst`), so that the UI thread does not share the
GIL with them while it answers. Their output waits in the pipe or the SSH channel meanwhile:
nothing is lost, and a hold never lasts longer than `InputFirst.most`.

Bounded: under a flood the panes are drawn 4 times a second, and a quarter of a second of 4 nodes'
NCCL lines is 30-40 MB of batches waiting (measured at the TUI's peak, bench.tui_flood 4 x 1M: 34
MB of 98 MB). A pane shows a node's newest `max_lines` lines, so a node's batch with at least that
many newer lines queued behind it (and no other event between them, where a drain would stop)
can never reach a pane: `push` keeps only its line count (the pane's total counts it) and lets its
bytes go. Each drain gives what it would have given with every batch kept; the log on disk has
every line.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..core.events import Event, NodeOutput
from ..core.logs.classify import fold
from ..core.logs.lines import last, newest
from .input_first import InputFirst


@dataclass
class Drained:
    lines: dict[str, list[str]] = field(default_factory=dict)  # node -> newest lines (trimmed)
    counts: dict[str, int] = field(default_factory=dict)  # node -> lines received this frame
    events: list[Event] = field(default_factory=list)  # everything else, in order
    merged: list[str] = field(default_factory=list)  # "node │ line" for every node, in arrival order (trimmed)


class Spent(Sequence[str]):
    """A batch's lines that no pane can show any more: how many they were, and nothing else."""

    __slots__ = ("count",)

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i):  # only ever sliced for its newest lines, of which it has none
        if isinstance(i, slice):
            return []
        raise IndexError("a spent batch keeps only its count")


class _Queued:
    """A node's batch in the queue; `ev` becomes a `Spent` one while it waits, if ever."""

    __slots__ = ("ev",)

    def __init__(self, ev: NodeOutput) -> None:
        self.ev = ev


class EventBridge:
    def __init__(self, max_lines_per_pane: int, gate: InputFirst | None = None) -> None:
        self._q: collections.deque[Event | _Queued] = collections.deque()
        self.max_lines = max_lines_per_pane
        self.gate = gate  # the app's InputFirst, once the screen is mounted
        self._lock = threading.Lock()  # the per-node accounts below: the readers' threads and the UI's
        self._waiting: dict[str, collections.deque[_Queued]] = {}  # node -> its batches queued, oldest first
        self._lines: dict[str, int] = {}  # node -> the lines of those

    def push(self, ev: Event) -> None:  # any thread
        if type(ev) is not NodeOutput:
            with self._lock:  # a drain stops at it: nothing after it spends a batch before it
                self._q.append(ev)
                self._waiting.clear()
                self._lines.clear()
            return
        if self.gate is not None:
            self.gate.wait()
        item = _Queued(ev)
        node = ev.node
        with self._lock:
            mine = self._waiting.get(node)
            if mine is None:
                mine = self._waiting[node] = collections.deque()
                self._lines[node] = 0
            mine.append(item)
            total = self._lines[node] + len(ev.lines)
            while len(mine) > 1 and total - len(mine[0].ev.lines) >= self.max_lines:  # enough newer lines: the oldest can never show
                old = mine.popleft()
                n = len(old.ev.lines)
                total -= n
                old.ev = replace(old.ev, lines=Spent(n))
            self._lines[node] = total
            self._q.append(item)

    def _take(self, item: _Queued) -> NodeOutput:
        """The batch as it stands now, no longer anybody's to spend (under the lock)."""
        mine = self._waiting.get(item.ev.node)
        if mine and mine[0] is item:
            mine.popleft()
            self._lines[item.ev.node] -= len(item.ev.lines)
        return item.ev

    @property
    def pending(self) -> bool:
        return bool(self._q)

    @property
    def lines_next(self) -> bool:
        """The next thing queued is a node's lines."""
        q = self._q
        return bool(q) and type(q[0]) is _Queued

    def drain(self) -> Drained:  # the UI thread
        """Lines and events in arrival order: the batch ends before an event that came after lines
        (a new run's reset, a relaunch's commands must not land above lines that came first); the
        caller drains again while `pending`."""
        out = Drained()
        chunks: list[NodeOutput] = []  # the strings are made for the newest lines only, at the end
        batches: dict[str, list] = {}  # node -> its batches this frame
        q = self._q
        with self._lock:  # what this drain takes is spent by nothing that comes later
            while q:
                if out.counts and type(q[0]) is not _Queued:
                    break
                ev = q.popleft()
                if type(ev) is _Queued:
                    ev = self._take(ev)
                    batches.setdefault(ev.node, []).append(ev.lines)
                    chunks.append(ev)
                    out.counts[ev.node] = out.counts.get(ev.node, 0) + len(ev.lines)
                else:
                    out.events.append(ev)
        n = self.max_lines
        out.lines = {node: newest(bs, n) for node, bs in batches.items()}
        need, parts = n, []  # "node │ line" for the newest n lines of all nodes
        for ev in reversed(chunks):
            if need <= 0:
                break
            parts.append([f"{ev.node} │ {fold(x)}" for x in last(ev.lines, need)])  # torch's prefix as a pane folds it
            need -= len(parts[-1])
        out.merged = [x for part in reversed(parts) for x in part]
        return out
