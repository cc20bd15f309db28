from pathlib import Path

import pytest

from ddptui.core.diagnosis.model import Fix
from ddptui.core.fixes import NotFixable, apply_fix, diff, next_revision_path, save_revision
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
    with pytest.raises(NotFixable):
        apply_fix(PB, Fix(scope="manual", explain="open the port"))


def test_revisions_never_overwrite(tmp_path: Path):
    p = tmp_path / "x.yaml"
    p.write_text(PB)
    r1 = save_revision(p, "one")
    r2 = save_revision(r1, "two")
    assert (r1.name, r2.name) == ("x.rev1.yaml", "x.rev2.yaml") and p.read_text() == PB
    assert next_revision_path(p).name == "x.rev3.yaml"


def test_the_same_change_on_every_node_goes_into_job_env():
    """A cause that lives in job.env is fixed in job.env: the hostlist stays one line."""
    text = PB.replace("    NCCL_DEBUG: INFO   # keep this comment\n",
                      "    NCCL_DEBUG: INFO   # keep this comment\n    GLOO_SOCKET_IFNAME: eth9\n")
    fix = Fix(scope="nodes", per_node={n: {"GLOO_SOCKET_IFNAME": "eth0"} for n in ("node02", "node03", "node04")})
    new = apply_fix(text, fix, ["node02", "node03", "node04"])
    pb = parse_playbook(new)
    assert "nodes: node[02-04]" in new and all(n.env == () for n in pb.nodes)
    assert pb.job.env_dict()["GLOO_SOCKET_IFNAME"] == "eth0" and "# keep this comment" in new


def test_propose_folds_one_finding_per_node_into_one_job_env_change(tmp_path: Path):
    from ddptui.core.diagnosis.model import Finding
    from ddptui.core.fixes import propose
    from ddptui.core.playbook.loader import load_playbook

    p = tmp_path / "c.yaml"
    p.write_text(PB.replace("script: train.py", "script: builtin:smoke"))
    pb = load_playbook(p)
    fs = [Finding("bad-socket-ifname", "error", [n], f"{n}: eth9", fix=Fix(
        scope="nodes", per_node={n: {"GLOO_SOCKET_IFNAME": "eth0"}})) for n in ("node02", "node03", "node04")]
    prop = propose(pb, fs)
    added = [l for l in prop.diff.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert added == ["+    GLOO_SOCKET_IFNAME: eth0"] and prop.ids == ("bad-socket-ifname",) * 3
    only_two = propose(pb, fs[:2])  # not every node: each named node gets its own value
    assert "nodes:\n" in only_two.new_text and "node[02-04]" not in only_two.new_text


def test_manual_findings_are_not_fixable(tmp_path: Path):
    from ddptui.core.diagnosis.model import Finding
    from ddptui.core.fixes import propose
    from ddptui.core.playbook.loader import load_playbook

    p = tmp_path / "c.yaml"
    p.write_text(PB.replace("script: train.py", "script: builtin:smoke"))
    f = Finding("port-in-use", "error", ["node02"], "taken", fix=Fix(scope="manual", explain="free the port"))
    assert not f.fixable
    with pytest.raises(NotFixable, match="free the port"):
        propose(load_playbook(p), [f])
