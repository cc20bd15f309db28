"""What the Checks matrix's env and master-reachable cells say: core decides (the UI shows a row's
status and summary as they come), so these are preflight's rows, each node's probe answered with
what a node of the namespace cluster answered (tests/core/recorded_nodes.py)."""

from __future__ import annotations

import pytest

from ddptui.core.checks import stage
from ddptui.core.checks.preflight import NodeTarget, Preflight
from ddptui.core.errors import StepFailed
from ddptui.core.events import CheckResult
from ddptui.core.launch.nodes import NodeRun
from ddptui.core.playbook.loader import parse_playbook
from tests.core.recorded_nodes import MASTER_ADDR, RecordedNode

PLAYBOOK = "name: cells\nnodes: node[02-04]\nmaster: node02\njob:\n  script: train.py\n  backend: gloo\n" \
           "  nproc_per_node: 1\n  env:\n    OMP_NUM_THREADS: 1\n"


def preflight(text: str, port: dict[str, tuple[str, int]] | None, on_check):
    """(the playbook, preflight's result) on the recorded nodes; `port`: a node's answer to its
    port-check command (stdout, rc)."""
    pb = parse_playbook(text)
    targets = [NodeTarget(n.name, "master" if n.name == pb.master else "worker",
                          RecordedNode(n.name, (port or {}).get(n.name)), "python3",
                          {**pb.job.env_dict(), **dict(n.env)}, pb.nproc_of(n)) for n in pb.nodes]
    return pb, Preflight(pb, targets, MASTER_ADDR, on_check=on_check).run()


def rows(text: str, port: dict[str, tuple[str, int]] | None = None) -> dict[tuple[str, str], CheckResult]:
    """Preflight's rows."""
    got: list[CheckResult] = []
    preflight(text, port, got.append)
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
    got = rows(PLAYBOOK, {"node02": ("bind-failed errno=98 Address already in use", 3)})
    assert got[("node02", "master-port")].status == "fail"
    for node in ("node03", "node04"):
        cell = got[(node, "master-reachable")]
        assert cell.status == "skip" and cell.summary == "not tried: the master's port check failed (port 29500 is in use)"


def test_workers_try_the_master_when_its_port_is_free() -> None:
    got = rows(PLAYBOOK, {"node04": ("failed 10.213.0.2:29500: timed out", 1)})
    assert got[("node03", "master-reachable")].status == "pass"
    assert got[("node04", "master-reachable")].status == "fail" and "timed out" in got[("node04", "master-reachable")].summary


def step_words(text: str, port: dict[str, tuple[str, int]] | None = None) -> str:
    """The check step's words when it fails (stage.verdict), on preflight's result for the recorded nodes."""
    pb, result = preflight(text, port, lambda r: None)
    with pytest.raises(StepFailed) as e:
        stage.verdict(pb, {n.name: NodeRun(n) for n in pb.nodes}, result, lambda ev: None)
    return str(e.value)


def test_the_failed_step_says_each_cause_once() -> None:
    """A bad GLOO_SOCKET_IFNAME on 3 nodes: the step said each node's env cell ("...(the playbook
    sets it): bad-socket-ifname") and then the finding that says the same. The cells the finding
    says are left to the Checks tab; their count stays. A taken master port: the port cell's "port
    29500 is already in use" and port-in-use, whose evidence is that cell's own command, once."""
    words = step_words(PLAYBOOK.replace("train.py", "builtin:smoke") + "    GLOO_SOCKET_IFNAME: eth9\n")
    assert words == ("3 checks failed, 1 error finding: bad-socket-ifname: node02, node03, node04: "
                     "GLOO_SOCKET_IFNAME=eth9 names no usable interface"), words
    words = step_words(PLAYBOOK.replace("train.py", "builtin:smoke"),
                       {"node02": ("bind-failed errno=98 Address already in use", 3)})
    assert words.startswith("1 check failed, 1 error finding: port-in-use: master_port 29500 is already taken on "
                            "node02") and "master-port" not in words, words
