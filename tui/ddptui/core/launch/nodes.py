"""What one run knows of each node, and running a function on every node at once."""

from __future__ import annotations

import collections
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import NodeError
from ..logs.torchrun import RootCauseParser
from ..playbook.model import NodeSpec, Playbook
from ..states import NodeStatus
from ..transport.base import RemoteProcess, Transport
from .plan import NodePlan, env_for


@dataclass
class NodeRun:
    """One node in one run: its connection, plan, process and what its output said."""

    spec: NodeSpec
    transport: Transport | None = None
    state: NodeStatus = NodeStatus.PENDING
    error: str | None = None
    python: str = "python3"
    plan: NodePlan | None = None
    process: RemoteProcess | None = None
    started_at: float | None = None
    ended_at: float | None = None
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=20))
    facts: object | None = None  # checks.facts.NodeFacts once the checks ran
    agent: RootCauseParser = field(default_factory=RootCauseParser)
    watcher: threading.Thread | None = None  # posts the node's state when its job exits

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running

    @property
    def connected(self) -> bool:
        return self.transport is not None and self.state != NodeStatus.UNREACHABLE


def fan_out(nodes: list[NodeRun], fn: Callable[[NodeRun], None]) -> dict[str, Exception]:
    """Run fn on every node at once; each node's error kept on its own."""
    errors: dict[str, Exception] = {}
    if not nodes:
        return errors
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        futs = {pool.submit(fn, nr): nr.name for nr in nodes}
        for fut, name in futs.items():
            try:
                fut.result()
            except Exception as e:
                errors[name] = e
    return errors


def python_for(pb: Playbook, node: NodeSpec, transport_kind: str) -> str:
    return node.python or pb.job.python or (sys.executable if transport_kind == "local" else "python3")


def connect(nr: NodeRun, factory: Callable[[Playbook, str], Transport], pb: Playbook,
            set_state: Callable[..., None], notify: Callable[[str, str, str], None] | None = None) -> None:
    """Open a node's one connection (again, if it was unreachable); NodeError says why not.
    What the transport noted on the way (skipped known_hosts lines, a key saved) goes to `notify`
    as (level, text, node), connected or not."""
    if nr.transport is not None and nr.state != NodeStatus.UNREACHABLE:
        return
    set_state(nr, NodeStatus.CONNECTING, "")
    t = factory(pb, nr.name)
    try:
        t.connect()
    except NodeError as e:
        nr.error = e.reason
        set_state(nr, NodeStatus.UNREACHABLE, e.reason)
        raise
    finally:
        for note in getattr(t, "notes", ()) if notify else ():
            notify("info" if note.startswith("added ") else "warning", note, nr.name)
    nr.transport = t
    nr.error = None
    nr.python = python_for(pb, nr.spec, t.kind)
    set_state(nr, NodeStatus.CONNECTED, f"{t.kind} {t.address or ''}".strip())


def run_shell(pb: Playbook, step, nodes: list[NodeRun], run_dir: Callable[[], object],
              sink: Callable[[object], None]) -> str:
    """A `shell` step: its command on each node at once, with the job's env; output to the node's
    log and the consumers; StepFailed names each node where it did not exit 0."""
    from ..errors import StepFailed
    from ..events import NodeOutput

    def one(nr: NodeRun) -> None:
        r = nr.transport.run([], shell=step.run, env=env_for(pb, nr.spec),
                             timeout=step.timeout or pb.ssh.command_timeout)
        rd = run_dir()
        lines = rd.redactor.lines((r.stdout + r.stderr).splitlines() or [f"(no output, rc={r.rc})"])
        first = rd.append(nr.name, lines, masked=True)  # the consumers get what the log gets
        sink(NodeOutput(nr.name, tuple(lines), first))
        if r.rc != 0:
            raise StepFailed(f"rc={r.rc}" if r.rc is not None else "timed out")

    errors = fan_out(nodes, one)
    if errors:
        raise StepFailed("; ".join(f"{n}: {e}" for n, e in errors.items()))
    return f"ran on {len(nodes)} node{'s' if len(nodes) != 1 else ''}"
