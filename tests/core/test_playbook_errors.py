"""One bad playbook per error kind: the message and its path:line:col are what the user sees."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ddptui.core.errors import PlaybookError
from ddptui.core.playbook.loader import load_playbook, parse_playbook
from tests.conftest import DATA, ROOT, ddptui_exe

BAD = DATA / "playbooks" / "bad"

CASES = [
    ("unknown-key.yaml", 6, 3, "unknown key 'nprocs_per_node' in job (did you mean 'nproc_per_node'?)"),
    ("wrong-type.yaml", 6, 19, "job.nproc_per_node must be an integer, not a string ('two')"),
    ("missing-field.yaml", 4, 1, "missing required key 'script' in job"),
    ("duplicate-key.yaml", 7, 3, "duplicate key 'master_port' in job (first set on line 6)"),
    ("bad-hostlist.yaml", 2, 12, "bad hostlist 'node[02-04' in nodes: '[' is never closed"),
    ("master-not-in-nodes.yaml", 3, 9, "master 'node01' is not among the nodes (node02, node03, node04)"),
    ("script-not-found.yaml", 5, 11, "script not found:"),
    ("yaml-syntax.yaml", 6, 1, "YAML syntax error"),
]


@pytest.mark.parametrize("name,line,col,message", CASES, ids=[c[0] for c in CASES])
def test_each_error_kind_is_reported_with_its_position(name: str, line: int, col: int, message: str) -> None:
    with pytest.raises(PlaybookError) as ei:
        load_playbook(BAD / name)
    problems = ei.value.problems
    assert len(problems) == 1, [p.render() for p in problems]
    p = problems[0]
    assert (p.line, p.col) == (line, col)
    assert p.message.startswith(message)
    assert p.render().startswith(f"{BAD / name}:{line}:{col}: {message}")


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(PlaybookError) as ei:
        load_playbook(BAD / "many-problems.yaml")
    got = [(p.line, p.col, p.message.split(" (")[0].split(",")[0]) for p in ei.value.problems]
    assert got == [
        (2, 32, "unknown key 'prot' in nodes[1]"),
        (3, 9, "master 'node09' is not among the nodes"),
        (6, 16, "job.master_port must be a port number between 1 and 65535"),
        (7, 15, "job.rendezvous must be one of static"),
        (8, 27, "'1BAD' in job.env is not a valid environment variable name"),
        (11, 12, "steps[1].kind must be one of connect"),
    ]
    hints = [p.hint for p in ei.value.problems]
    assert "rename it to 'port'" in hints and "did you mean 'static'?" in hints


def test_render_shows_the_offending_line_and_a_caret_under_it() -> None:
    with pytest.raises(PlaybookError) as ei:
        load_playbook(BAD / "unknown-key.yaml")
    lines = ei.value.problems[0].render().splitlines()
    assert lines[1].endswith("|   nprocs_per_node: 2")
    caret = lines[2]
    assert caret.index("^") == lines[1].index("nprocs_per_node") and caret.count("^") == len("nprocs_per_node")
    assert "hint: rename it to 'nproc_per_node'" in lines[3]


@pytest.mark.parametrize("name", [c[0] for c in CASES] + ["many-problems.yaml"])
def test_validate_exits_2_without_a_traceback(name: str) -> None:
    r = subprocess.run([ddptui_exe(), "validate", str(BAD / name)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr + r.stdout
    assert f"{BAD / name}:" in r.stderr


def test_shipped_playbooks_validate() -> None:
    for f in sorted((ROOT / "playbooks").glob("*.yaml")):
        r = subprocess.run([ddptui_exe(), "validate", str(f)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert ": ok" in r.stdout


def test_three_nodes_playbook_is_the_seed_cluster() -> None:
    pb = load_playbook(ROOT / "playbooks" / "three-nodes.yaml")
    assert [n.name for n in pb.nodes] == ["node02", "node03", "node04"]
    assert pb.master == "node02" and pb.job.nproc_per_node == 4 and pb.job.master_port == 29500
    assert pb.job.backend == "nccl" and pb.job.env_dict()["NCCL_DEBUG"] == "INFO"


def test_defaults_and_node_overrides() -> None:
    pb = parse_playbook(
        "name: x\nnodes:\n  - node1\n  - {name: node2, host: 10.0.0.2, user: alice, port: 2222, nproc_per_node: 1,"
        " env: {NCCL_IB_DISABLE: 1}}\njob: {script: builtin:smoke, env: {FLAG: true}}\n")
    assert pb.master == "node1"
    assert [s.id for s in pb.steps] == ["connect", "check", "launch-master", "wait-master", "launch-workers", "watch"]
    n2 = pb.nodes[1]
    assert (n2.host, n2.user, n2.port, n2.nproc_per_node, dict(n2.env)) == (
        "10.0.0.2", "alice", 2222, 1, {"NCCL_IB_DISABLE": "1"})
    assert pb.job.env_dict() == {"FLAG": "1"}
    assert pb.job.rdzv_timeout == 900  # torch's own default unless the playbook says otherwise


def test_empty_and_missing_files() -> None:
    with pytest.raises(PlaybookError) as ei:
        parse_playbook("", "empty.yaml")
    assert ei.value.problems[0].message == "the playbook is empty"
    with pytest.raises(PlaybookError) as ei:
        load_playbook(Path("/nonexistent/pb.yaml"))
    assert ei.value.problems[0].message == "no such file"


HINTS = """name: hints
nodes:
  - {name: node02, port: ssh}
  - {name: node03}
  - {name: node04}
master: MASTER
ssh: {keepalive: 15s, connect_timeout: fast}
job:
  script: train.py
  nproc_per_node: two
  master_port: abc
  rdzv_timeout: 60s
"""


def _hints(text: str) -> dict[str, str]:
    with pytest.raises(PlaybookError) as ei:
        parse_playbook(text, "hints.yaml")
    return {p.message.split(" ")[0]: p.hint for p in ei.value.problems}


def test_a_hint_says_what_the_field_holds_and_a_value_that_fits_it() -> None:
    """Not "write an integer, e.g. 2" for a port; a timeout given with its unit is told to drop it."""
    hints = _hints(HINTS.replace("MASTER", "node02"))
    assert hints["job.master_port"] == "write a free TCP port on the master as an integer, e.g. 29500"
    assert hints["nodes[0].port"] == "write the node's SSH port as an integer, e.g. 22"
    assert hints["job.nproc_per_node"] == "write the processes to start per node (one per GPU) as an integer, e.g. 2"
    assert hints["job.rdzv_timeout"] == "write 60 without the unit: job.rdzv_timeout is in seconds"
    assert hints["ssh.keepalive"] == "write 15 without the unit: ssh.keepalive is in seconds"
    assert hints["ssh.connect_timeout"] == ("write how long an SSH connection may take, in seconds, as a number, "
                                            "e.g. 10")


@pytest.mark.parametrize("master,hint", [
    ("node9", "write one of the nodes' names: node02, node03, node04; the master runs rank 0 and the rendezvous, "
              "usually 'node02'"),  # not "did you mean 'node04'?": another number is another machine
    ("node05", "write one of the nodes' names: node02, node03, node04; the master runs rank 0 and the rendezvous, "
               "usually 'node02'"),
    ("Node03", "did you mean 'node03'?"),  # a typo in the letters, the same number: that node
    ("nod-04", "did you mean 'node04'?"),
])
def test_an_unknown_master_is_not_guessed_from_another_nodes_number(master: str, hint: str) -> None:
    assert _hints(HINTS.replace("MASTER", master))["master"] == hint
