"""Preflight's probes of a node run at once, not one after another: the check takes the slowest
probe (the software probe, python importing torch), not the sum. Each node's transport here is a
stand-in that records what preflight asks of it and holds a call until the call it must overlap
has been made: a preflight that ran them in turn would wait for itself, and say so in a failed
row. The nodes themselves are real in tests/cluster/test_preflight.py; this is about the order."""

from __future__ import annotations

import threading

from ddptui.core.checks.preflight import NodeTarget, Preflight
from ddptui.core.checks.probe import CONNECT, LISTENER
from ddptui.core.checks.software import PROBE
from ddptui.core.events import CheckResult
from ddptui.core.playbook.loader import parse_playbook
from ddptui.core.transport.base import CommandResult

PLAYBOOK = "name: overlap\nnodes: node[02-04]\nmaster: node02\njob:\n  script: train.py\n  backend: gloo\n"
WAIT = 10.0  # seconds a held call waits for the one it must overlap; only a wrong order waits this long


class HeldNode:
    """A node's transport. `hold(call, until)`: the call `call` ("probe", "software", "listener" or
    "connect") answers only once `until` has been asked of some node (a threading.Event each)."""

    kind = "local"  # no ping from the login node: nothing here leaves the process

    def __init__(self, name: str, asked: dict[str, threading.Event], holds: dict[str, str],
                 fail: set[str] = frozenset()) -> None:
        self.name, self.asked, self.holds, self.fail = name, asked, holds, fail

    def run(self, argv, shell=None, env=None, timeout=None) -> CommandResult:
        call = "probe" if shell is not None else {PROBE: "software", LISTENER: "listener", CONNECT: "connect"}[argv[2]]
        self.asked[call].set()
        if call in self.holds and not self.asked[self.holds[call]].wait(WAIT):
            raise TimeoutError(f"{self.name}: {call} waited {WAIT} s for {self.holds[call]}: they ran in turn")
        if call in self.fail:
            raise ConnectionError(f"{self.name}: the connection dropped")
        return CommandResult(tuple(argv), 0, "", "", 0.0)


def preflight(holds: dict[str, str], fail: dict[str, set[str]] | None = None,
              master_addr: str = "10.0.0.2") -> tuple[Preflight, list[CheckResult], dict[str, threading.Event]]:
    pb = parse_playbook(PLAYBOOK)
    asked = {k: threading.Event() for k in ("probe", "software", "listener", "connect")}
    targets = [NodeTarget(n.name, "master" if n.name == pb.master else "worker",
                          HeldNode(n.name, asked, holds, (fail or {}).get(n.name, set())), "python3", {}, 1)
               for n in pb.nodes]
    rows: list[CheckResult] = []
    p = Preflight(pb, targets, master_addr, rows.append, 30.0)
    p.run()
    return p, rows, asked


def probe_failures(rows: list[CheckResult]) -> list[str]:
    return [f"{r.node}: {r.summary}" for r in rows if r.check == "probe"]


def test_the_software_probe_runs_beside_the_probe_script() -> None:
    # each waits until the other has been asked: only together do both answer
    p, rows, _ = preflight({"probe": "software", "software": "probe"})
    assert probe_failures(rows) == []
    assert set(p.result.facts) == {"node02", "node03", "node04"}
    assert {r.node for r in rows if r.check == "python"} == {"node02", "node03", "node04"}  # the software rows


def test_the_port_check_does_not_wait_for_the_software_probes() -> None:
    # the software probes answer only once the master's test listener is up
    p, rows, asked = preflight({"software": "listener"})
    assert probe_failures(rows) == []
    assert asked["connect"].is_set()
    cells = {(r.node, r.check): r.status for r in rows}
    assert cells[("node02", "master-port")] == "pass"
    assert cells[("node03", "master-reachable")] == cells[("node04", "master-reachable")] == "pass"


def test_a_node_whose_software_probe_fails_says_so_and_the_others_are_judged() -> None:
    p, rows, _ = preflight({}, fail={"node03": {"software"}})
    assert probe_failures(rows) == ["node03: the probe failed: node03: the connection dropped"]
    assert set(p.result.facts) == {"node02", "node04"}  # half a node's facts are none
    assert not [r for r in rows if r.node == "node03" and r.check in ("python", "env")]
