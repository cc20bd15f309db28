"""What the Checks matrix's env and master-reachable cells say: core decides (the UI shows a row's
status and summary as they come), so these are preflight's rows, with each node's probe faked."""

from __future__ import annotations

from types import SimpleNamespace

from ddptui.core.checks.preflight import NodeTarget
from ddptui.core.events import CheckResult
from ddptui.core.playbook.loader import parse_playbook
from ddptui.core.transport.base import CommandResult
from tests.core.test_catalog import _FakeProbe

PLAYBOOK = "name: cells\nnodes: node[02-04]\nmaster: node02\njob:\n  script: train.py\n  backend: gloo\n" \
           "  nproc_per_node: 1\n  env:\n    OMP_NUM_THREADS: 1\n"


class _Node:
    """A node's transport: the port check's listener (master) and connect (worker) answer as told."""

    kind = "ssh"

    def __init__(self, out: str, rc: int = 0) -> None:
        self.out, self.rc = out, rc

    def run(self, argv, shell=None, env=None, timeout=None) -> CommandResult:
        return CommandResult(tuple(argv), self.rc, self.out, "", 0.1)


def rows(text: str, transports: dict[str, object] | None = None, master_addr: str = "") -> dict[tuple[str, str], CheckResult]:
    pb = parse_playbook(text)
    targets = [NodeTarget(n.name, "master" if n.name == pb.master else "worker",
                          (transports or {}).get(n.name, SimpleNamespace(kind="ssh")), "python3",
                          {**pb.job.env_dict(), **dict(n.env)}, pb.nproc_of(n)) for n in pb.nodes]
    got: list[CheckResult] = []
    _FakeProbe(pb, targets, master_addr, on_check=got.append).run()
    return {(r.node, r.check): r for r in got}


def test_the_env_cell_fails_where_a_variable_the_env_sets_is_the_cause() -> None:
    got = rows(PLAYBOOK + "    GLOO_SOCKET_IFNAME: eth9\n")
    for node in ("node02", "node03", "node04"):
        env = got[(node, "env")]
        assert env.status == "fail", env  # never ✓ beside the error finding it causes
        assert env.summary == "GLOO_SOCKET_IFNAME=eth9 (the playbook sets it): bad-socket-ifname"


def test_the_env_cell_passes_when_no_finding_blames_the_env() -> None:
    got = rows(PLAYBOOK + "    GLOO_SOCKET_IFNAME: eth0\n")  # the interface that routes to the master
    assert {got[(n, "env")].status for n in ("node02", "node03", "node04")} == {"pass"}
    assert got[("node03", "env")].summary == "the shell sets no NCCL_/GLOO_/TORCH_/CUDA_ variables"


def test_workers_say_why_master_reachable_was_not_tried_when_the_masters_port_is_taken() -> None:
    transports = {"node02": _Node("bind-failed errno=98 Address already in use", 3),
                  "node03": _Node("connected 10.0.0.2:29500"), "node04": _Node("connected 10.0.0.2:29500")}
    got = rows(PLAYBOOK, transports, master_addr="10.0.0.2")
    assert got[("node02", "master-port")].status == "fail"
    for node in ("node03", "node04"):
        cell = got[(node, "master-reachable")]
        assert cell.status == "skip" and cell.summary == "not tried: the master's port check failed (port 29500 is in use)"


def test_workers_try_the_master_when_its_port_is_free() -> None:
    transports = {"node02": _Node("listening 29500"), "node03": _Node("connected 10.0.0.2:29500"),
                  "node04": _Node("timed out", 1)}
    got = rows(PLAYBOOK, transports, master_addr="10.0.0.2")
    assert got[("node03", "master-reachable")].status == "pass"
    assert got[("node04", "master-reachable")].status == "fail" and "timed out" in got[("node04", "master-reachable")].summary
