"""A recorded run played back: a bundle (or a run directory) turned back into the core event stream.

`replay_events(b, pb)` yields `(t, Event)` in time order: the events the live run emitted (its
events.jsonl) and each node's log lines as NodeOutput batches at the moment they arrived (its
<node>.times). Whatever shows a live run shows a recorded one the same way, from the same events.
`Timeline` holds them for a viewer that moves through the run: what was known at time t, where the
findings and failures are.

Nothing from the bundle is executed. A record that is malformed (a hostile file, a newer ddptui's
event) is skipped, never raised; so are events about steps or nodes the playbook does not have.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..diagnosis.model import SEVERITIES, Finding
from ..events import (
    CheckResult, CommandPlanned, Event, FindingRaised, NodeOutput, NodeState, Notice, PlaybookRevised, RunFinished,
    RunStarted, StepChanged,
)
from ..playbook.model import Playbook
from ..states import NodeStatus, StepState
from .read import Bundle

OUTPUT_BATCH = 500  # lines of one node in one NodeOutput, at most


# ---- one recorded event (a dict from events.jsonl) -> its Event ------------------------------------
def _s(d: dict[str, Any], key: str, default: str = "") -> str:
    v = d.get(key, default)
    return v if isinstance(v, str) else default


def _i(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _strs(v: Any) -> list[str]:
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


def finding_of(d: Any) -> Finding | None:
    """A recorded finding, its fields coerced to the types the model promises (or None)."""
    if not isinstance(d, dict) or not isinstance(d.get("id"), str):
        return None
    ev = [{"node": _s(e, "node"), "line": _i(e, "line") or 0, "text": _s(e, "text"), "command": _s(e, "command")}
          for e in d.get("evidence") or () if isinstance(e, dict)] if isinstance(d.get("evidence"), list) else []
    fix = d.get("fix") if isinstance(d.get("fix"), dict) else None
    if fix is not None:
        env = fix.get("env") if isinstance(fix.get("env"), dict) else {}
        per = fix.get("per_node") if isinstance(fix.get("per_node"), dict) else {}
        fix = {"env": {str(k): str(v) for k, v in env.items()}, "scope": _s(fix, "scope", "manual"),
               "per_node": {str(n): {str(k): str(v) for k, v in e.items()} for n, e in per.items() if isinstance(e, dict)},
               "explain": _s(fix, "explain"), "alternatives": _strs(fix.get("alternatives"))}
    sev = _s(d, "severity", "error")
    return Finding.from_json({"id": d["id"], "severity": sev if sev in SEVERITIES else "error",
                              "nodes": _strs(d.get("nodes")), "summary": _s(d, "summary"), "evidence": ev,
                              "explanation": _s(d, "explanation"), "fix": fix,
                              "state": "resolved" if d.get("state") == "resolved" else "active"})


def event_of(d: dict[str, Any], t: float) -> Event | None:
    """The Event a recorded line stands for, at time t; None when it is not one this ddptui knows."""
    kind = d.get("event")
    try:
        if kind == "run-started":
            return RunStarted(_s(d, "run_id"), _s(d, "run_dir"), _s(d, "playbook"), tuple(_strs(d.get("nodes"))), t=t)
        if kind == "step":
            return StepChanged(_s(d, "step"), _s(d, "state"), _s(d, "message"), t=t)
        if kind == "node":
            return NodeState(_s(d, "node"), _s(d, "state"), _s(d, "message"), _i(d, "rc"), _i(d, "pid"),
                             _i(d, "pgid"), t=t)
        if kind == "command":
            return CommandPlanned(_s(d, "node"), _s(d, "role"), _i(d, "node_rank") or 0, _s(d, "command"),
                                  _i(d, "first_rank") or 0, max(1, _i(d, "nproc") or 1), t=t)
        if kind == "check":
            return CheckResult(_s(d, "node"), _s(d, "check"), _s(d, "status"), _s(d, "summary"), _s(d, "command"),
                               _s(d, "output"), t=t)
        if kind == "finding":
            f = finding_of(d.get("finding"))
            return FindingRaised(f, t=t) if f is not None else None
        if kind == "notice":
            node = d.get("node")
            return Notice(_s(d, "level", "info"), _s(d, "text"), node if isinstance(node, str) else None, t=t)
        if kind == "run-finished":
            s = d.get("summary")
            return RunFinished(bool(d.get("ok")), s if isinstance(s, dict) else {}, t=t)
        if kind == "revision":
            return PlaybookRevised(_s(d, "path"), _s(d, "finding_id"), _s(d, "diff"), t=t)
    except (TypeError, ValueError):  # a state word this ddptui does not know
        return None
    return None


def _belongs(ev: Event, steps: set[str], nodes: set[str]) -> bool:
    if isinstance(ev, StepChanged):
        return ev.step in steps
    if isinstance(ev, (NodeState, CommandPlanned, CheckResult)):
        return ev.node in nodes
    return True


# ---- times ------------------------------------------------------------------------------------------
def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _line_time(b: Bundle, node: str, line: int) -> float | None:
    """When line `line` (1-based, of the node's original log) arrived, if the bundle kept it."""
    timed = b.node_logs.get(node) or []
    after, count = b.elided.get(node, (0, 0))
    i = line - 1 if not count or line <= after else (after if line <= after + count else line - count)
    return timed[i][0] if 0 <= i < len(timed) else None


def _finding_time(b: Bundle, d: dict[str, Any], prev: float, nxt: float | None) -> float:
    """When a finding recorded without its own time (older runs) was raised: after its last evidence
    line arrived, before the next event was written."""
    f = d.get("finding") if isinstance(d.get("finding"), dict) else {}
    times = [_line_time(b, _s(e, "node"), _i(e, "line") or 0) for e in f.get("evidence") or ()
             if isinstance(e, dict) and not e.get("command") and _i(e, "line")]
    t = max([prev] + [x for x in times if x is not None])
    return min(t, nxt) if nxt is not None else t


def start_time(b: Bundle) -> float:
    firsts = [_num(e.get("t")) for e in b.events[:1]] + [timed[0][0] for timed in b.node_logs.values() if timed]
    known = [x for x in [_num(b.summary.get("started")), *firsts] if x is not None]
    return min(known) if known else 0.0


# ---- the stream -------------------------------------------------------------------------------------
def _recorded(b: Bundle, start: float) -> Iterator[tuple[float, Event]]:
    raw = [(_num(d.get("t")), d) for d in b.events]
    for i, (t, d) in enumerate(raw):
        at = t if t is not None else start
        inherited = i > 0 and t == raw[i - 1][0]  # no time of its own: read.parse_events gave it the last one
        if d.get("event") == "finding" and inherited:
            nxt = next((x for x, _ in raw[i + 1:] if x is not None and x > at), None)
            at = _finding_time(b, d, at, nxt)
        ev = event_of(d, at)
        if ev is not None:
            yield at, ev


def _output(b: Bundle, start: float) -> Iterator[tuple[float, Event]]:
    for node, timed in b.node_logs.items():
        batch: list[str] = []
        t0: float | None = None
        first = 1
        last = start
        for i, (t, line) in enumerate(timed):
            at = t if t is not None else last
            if batch and (at != t0 or len(batch) >= OUTPUT_BATCH):
                yield t0 or start, NodeOutput(node, tuple(batch), first)
                batch = []
            if not batch:
                t0, first = at, b.line_number(node, i) or first + len(batch)
            batch.append(line)
            last = at
        if batch:
            yield t0 or start, NodeOutput(node, tuple(batch), first)


def replay_events(b: Bundle, pb: Playbook | None = None) -> list[tuple[float, Event]]:
    """Every event of the recorded run as `(t, event)`, in time order; at one moment the lines come
    before the events (a finding follows the line that raised it). With `pb`, only what it can show."""
    start = start_time(b)
    out = [(t, 0, ev) for t, ev in _output(b, start)] + [(t, 1, ev) for t, ev in _recorded(b, start)]
    if pb is not None:
        steps, nodes = {s.id for s in pb.steps}, {n.name for n in pb.nodes}
        out = [x for x in out if _belongs(x[2], steps, nodes) and (not isinstance(x[2], NodeOutput)
                                                                   or x[2].node in nodes)]
    order = sorted(range(len(out)), key=lambda i: (out[i][0], out[i][1], i))
    return [(out[i][0], out[i][2]) for i in order]


# ---- moving through it ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mark:
    t: float
    label: str
    severity: str  # error, warning


def mark_of(ev: Event) -> Mark | None:
    """A moment worth jumping to: a finding raised, a step or a node that failed."""
    if isinstance(ev, FindingRaised) and ev.finding.active and ev.finding.severity in ("error", "warning"):
        return Mark(ev.t, f"{ev.finding.id} raised: {ev.finding.summary}", ev.finding.severity)
    if isinstance(ev, StepChanged) and ev.state is StepState.FAILED:
        return Mark(ev.t, f"step {ev.step} failed", "error")
    if isinstance(ev, NodeState) and ev.state in (NodeStatus.FAILED, NodeStatus.LOST, NodeStatus.UNREACHABLE):
        return Mark(ev.t, f"{ev.node} {ev.state}" + (f": {ev.message}" if ev.message else ""), "error")
    return None


@dataclass
class Timeline:
    events: list[tuple[float, Event]]
    start: float
    end: float
    marks: list[Mark] = field(default_factory=list)

    @classmethod
    def of(cls, b: Bundle, pb: Playbook | None = None) -> Timeline:
        evs = replay_events(b, pb)
        start = min([start_time(b)] + [t for t, _ in evs[:1]])
        ends = [t for t, _ in evs[-1:]] + [x for x in [_num(b.summary.get("ended"))] if x is not None]
        marks = [m for _, ev in evs if (m := mark_of(ev)) is not None]
        return cls(evs, start, max([start, *ends]), marks)

    @property
    def duration(self) -> float:
        return self.end - self.start

    def count_at(self, t: float) -> int:
        """How many events had happened by time t (those at t included)."""
        return bisect.bisect_right([x for x, _ in self.events], t)

    def next_mark(self, t: float) -> Mark | None:
        return next((m for m in self.marks if m.t > t), None)

    def final(self) -> RunState:
        return RunState.of(ev for _, ev in self.events)


@dataclass
class RunState:
    """Where the run stood after some of its events: each step's and node's last state, the findings."""

    steps: dict[str, StepChanged] = field(default_factory=dict)
    nodes: dict[str, NodeState] = field(default_factory=dict)
    findings: dict[str, Finding] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, events) -> RunState:
        s = cls()
        for ev in events:
            if isinstance(ev, StepChanged):
                s.steps[ev.step] = ev
            elif isinstance(ev, NodeState):
                s.nodes[ev.node] = ev
            elif isinstance(ev, FindingRaised):
                s.findings.pop(ev.finding.id, None)
                s.findings[ev.finding.id] = ev.finding
            elif isinstance(ev, NodeOutput):
                s.lines[ev.node] = s.lines.get(ev.node, 0) + len(ev.lines)
        return s
