from pathlib import Path

import pytest

from ddptui.core.diagnosis.model import Fix
from ddptui.core.fixes import apply_fix, diff, next_revision_path, save_revision
from ddptui.core.playbook.loader import parse_playbook

PB = """\
# my cluster
name: c   # shown in the picker
nodes: node[02-04]
job:
  script: train.py
  env:
    NCCL_DEBUG: INFO   # keep this comment
"""


def test_all_nodes_fix_keeps_comments_and_loads():
    new = apply_fix(PB, Fix(env={"NCCL_IB_DISABLE": "1"}, scope="all-nodes"))
    assert "# keep this comment" in new and "# my cluster" in new and "# shown in the picker" in new
    pb = parse_playbook(new)
    assert pb.job.env_dict() == {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1"}
    d = diff(PB, new)
    added = [l for l in d.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert added == ["+    NCCL_IB_DISABLE: '1'"] and not [l for l in d.splitlines() if l.startswith("-") and not l.startswith("---")]


def test_all_nodes_fix_without_env_and_with_node_overrides():
    text = "name: c\nnodes: [a, {name: b, env: {NCCL_IB_DISABLE: '0'}}]\njob: {script: builtin:smoke}\n"
    pb = parse_playbook(apply_fix(text, Fix(env={"NCCL_IB_DISABLE": "1"})))
    assert pb.job.env_dict() == {"NCCL_IB_DISABLE": "1"} and dict(pb.nodes[1].env) == {"NCCL_IB_DISABLE": "1"}


def test_per_node_fix_splits_a_hostlist():
    new = apply_fix(PB, Fix(scope="nodes", per_node={"node03": {"GLOO_SOCKET_IFNAME": "eth0"}}))
    pb = parse_playbook(new)
    assert [n.name for n in pb.nodes] == ["node02", "node03", "node04"]
    assert dict(pb.nodes[1].env) == {"GLOO_SOCKET_IFNAME": "eth0"} and pb.nodes[0].env == ()


def test_manual_fix_cannot_be_applied():
    with pytest.raises(ValueError):
        apply_fix(PB, Fix(scope="manual", explain="open the port"))


def test_revisions_never_overwrite(tmp_path: Path):
    p = tmp_path / "x.yaml"
    p.write_text(PB)
    r1 = save_revision(p, "one")
    r2 = save_revision(r1, "two")
    assert (r1.name, r2.name) == ("x.rev1.yaml", "x.rev2.yaml") and p.read_text() == PB
    assert next_revision_path(p).name == "x.rev3.yaml"
