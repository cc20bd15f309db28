"""What the core tells its consumers (the TUI and the headless CLI) while it works.

Every event is a frozen dataclass with a `kind`; `to_json()` gives the `--json` form. Both the TUI
and `run --headless` consume exactly these, so they can never disagree.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any
from collections.abc import Callable, Sequence

from .diagnosis.model import Finding
from .logs.lines import Chunk
from .states import NodeStatus, StepState


@dataclass(frozen=True)
class Event:
    kind = "event"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["event"] = self.kind
        return d


@dataclass(frozen=True)
class RunStarted(Event):
    kind = "run-started"
    run_id: str
    run_dir: str
    playbook: str
    nodes: tuple[str, ...]
    t: float = field(default_factory=time.time)


@dataclass(frozen=True)
class StepChanged(Event):
    kind = "step"
    step: str
    state: StepState
    message: str = ""
    t: float = field(default_factory=time.time)

    def __post_init__(self) -> None:  # a plain word becomes its enum member (or ValueError)
        object.__setattr__(self, "state", StepState(self.state))


@dataclass(frozen=True)
class NodeOutput(Event):
    """A batch of lines from one node's job, in order; `first_line` is the 1-based line number.
    `lines`: a tuple, or the reader's Chunk (its bytes as they went to the log; the strings are made
    only for the lines somebody reads)."""

    kind = "output"
    node: str
    lines: Sequence[str]
    first_line: int
    stream: str = "stdout"

    @property
    def text(self) -> str:
        """The lines joined by "\n"."""
        return self.lines.text if isinstance(self.lines, Chunk) else "\n".join(self.lines)

    @property
    def data(self) -> bytes:
        """The lines as UTF-8, each followed by "\n" (a Chunk's own bytes, not a copy)."""
        return (self.lines if isinstance(self.lines, Chunk) else Chunk.of_lines(self.lines)).data

    def to_json(self) -> dict[str, Any]:  # one JSON line per text line, as the contract says
        return {"event": self.kind, "node": self.node, "stream": self.stream,
                "lines": list(self.lines), "first_line": self.first_line}


@dataclass(frozen=True)
class NodeState(Event):
    """A node's state (states.NodeStatus): connecting ... running, exited, failed, lost, stopped."""

    kind = "node"
    node: str
    state: NodeStatus
    message: str = ""
    rc: int | None = None
    pid: int | None = None
    pgid: int | None = None
    t: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", NodeStatus(self.state))


@dataclass(frozen=True)
class CheckResult(Event):
    kind = "check"
    node: str
    check: str
    status: str  # pass, warn, fail, skip
    summary: str
    command: str = ""
    output: str = ""
    t: float = field(default_factory=time.time)


@dataclass(frozen=True)
class CommandPlanned(Event):
    """The exact command a node will run, shown before it runs (and copyable), with its global ranks."""

    kind = "command"
    node: str
    role: str
    node_rank: int
    command: str
    first_rank: int = 0
    nproc: int = 1
    t: float = field(default_factory=time.time)

    @property
    def ranks(self) -> range:
        return range(self.first_rank, self.first_rank + self.nproc)


@dataclass(frozen=True)
class FindingRaised(Event):
    """A finding, new or changed: a snapshot, so later changes never reach a consumer half-made."""

    kind = "finding"
    finding: Finding
    t: float = field(default_factory=time.time)  # when it was raised (a bundle's replay shows it then)

    @classmethod
    def of(cls, f: Finding) -> FindingRaised:
        return cls(f.snapshot())

    def to_json(self) -> dict[str, Any]:
        return {"event": self.kind, "finding": self.finding.to_json(), "t": self.t}


@dataclass(frozen=True)
class Notice(Event):
    kind = "notice"
    level: str  # info, warning, error
    text: str
    node: str | None = None
    t: float = field(default_factory=time.time)


@dataclass(frozen=True)
class RunFinished(Event):
    kind = "run-finished"
    ok: bool
    summary: dict[str, Any]
    t: float = field(default_factory=time.time)


@dataclass(frozen=True)
class PlaybookRevised(Event):
    """A fix was written as a new revision of the playbook, which the run now uses."""

    kind = "revision"
    path: str
    finding_id: str
    diff: str
    t: float = field(default_factory=time.time)


@dataclass(frozen=True)
class Allocated(Event):
    """The run's Slurm allocation: its nodes are the run's nodes from now on (master first)."""

    kind = "allocated"
    job_id: str
    nodes: tuple[str, ...]
    partition: str = ""
    owned: bool = True  # ddptui asked for it (and releases it at the end unless kept)
    t: float = field(default_factory=time.time)


Sink = Callable[[Event], None]
