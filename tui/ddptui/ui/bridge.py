"""Core events -> the UI, in batches.

The runbook calls `push` from worker threads; the app drains the queue on a 30 Hz timer. Output
lines are grouped per node and trimmed to what a pane can hold before they reach a widget, so a
flood of lines costs one `write_lines` per pane per frame, never one message per line
(measured: one message per line stalls Textual for seconds, batches keep keys answered in ms).

Input first: from the moment a key comes in until its effect is on the screen, the nodes' readers
wait before handing on their next batch (`InputFirst`), so that the UI thread does not share the
GIL with them while it answers. Their output waits in the pipe or the SSH channel meanwhile:
nothing is lost, and a hold never lasts longer than `InputFirst.most`.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from ..core.events import Event, NodeOutput
from ..core.logs.lines import last, newest
from .input_first import InputFirst


@dataclass
class Drained:
    lines: dict[str, list[str]] = field(default_factory=dict)  # node -> newest lines (trimmed)
    counts: dict[str, int] = field(default_factory=dict)  # node -> lines received this frame
    events: list[Event] = field(default_factory=list)  # everything else, in order
    merged: list[str] = field(default_factory=list)  # "node │ line" for every node, in arrival order (trimmed)


class EventBridge:
    def __init__(self, max_lines_per_pane: int, gate: InputFirst | None = None) -> None:
        self._q: collections.deque[Event] = collections.deque()
        self.max_lines = max_lines_per_pane
        self.gate = gate  # the app's InputFirst, once the screen is mounted

    def push(self, ev: Event) -> None:  # any thread
        if self.gate is not None and type(ev) is NodeOutput:
            self.gate.wait()
        self._q.append(ev)  # deque.append is atomic

    @property
    def pending(self) -> bool:
        return bool(self._q)

    @property
    def lines_next(self) -> bool:
        """The next thing queued is a node's lines."""
        q = self._q
        return bool(q) and isinstance(q[0], NodeOutput)

    def drain(self) -> Drained:  # the UI thread
        """Lines and events in arrival order: the batch ends before an event that came after lines
        (a new run's reset, a relaunch's commands must not land above lines that came first); the
        caller drains again while `pending`."""
        out = Drained()
        chunks: list[NodeOutput] = []  # the strings are made for the newest lines only, at the end
        batches: dict[str, list] = {}  # node -> its batches this frame
        q = self._q
        while q:
            if out.counts and not isinstance(q[0], NodeOutput):
                break
            ev = q.popleft()
            if isinstance(ev, NodeOutput):
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
            parts.append([f"{ev.node} │ {x}" for x in last(ev.lines, need)])
            need -= len(parts[-1])
        out.merged = [x for part in reversed(parts) for x in part]
        return out
