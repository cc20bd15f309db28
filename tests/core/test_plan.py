"""The launch plan is pure: playbook + facts -> each node's exact argv and env."""

import shlex

from ddptui.core.launch.plan import LaunchInputs, plan_launch
from ddptui.core.playbook.loader import parse_playbook

PB = """
name: p
nodes: node[02-04]
master: node03
job:
  script: train.py
  args: ["--lr", "0.1 0.2"]
  nproc_per_node: 4
  master_port: 29500
  rdzv_timeout: 20
  env: {NCCL_DEBUG: INFO, HF_TOKEN: hunter2}
"""


def inputs(pb, addr="10.0.0.3"):
    return LaunchInputs(master_addr=addr, scripts={n.name: "train.py" for n in pb.nodes},
                        pythons={n.name: "/venv/bin/python" for n in pb.nodes})


def test_static_plan_puts_the_master_first_and_ranks_follow_node_order():
    pb = parse_playbook(PB)
    plans = plan_launch(pb, inputs(pb))
    assert [(p.node, p.role, p.node_rank, p.first_rank) for p in plans] == [
        ("node03", "master", 0, 0), ("node02", "worker", 1, 4), ("node04", "worker", 2, 8)]
    assert plans[1].argv == (
        "/venv/bin/python", "-m", "torch.distributed.run", "--nnodes=3", "--nproc-per-node=4",
        "--node-rank=1", "--master-addr=10.0.0.3", "--master-port=29500", "--rdzv-conf=timeout=20",
        "--tee=3", "train.py", "--lr", "0.1 0.2")
    assert plans[0].env["NCCL_DEBUG"] == "INFO" and plans[0].env["PYTHONUNBUFFERED"] == "1"


def test_c10d_plan():
    pb = parse_playbook(PB.replace("rdzv_timeout: 20", "rendezvous: c10d\n  rdzv_id: job7\n  rdzv_read_timeout: 10"))
    argv = plan_launch(pb, inputs(pb))[2].argv
    assert "--rdzv-backend=c10d" in argv and "--rdzv-endpoint=10.0.0.3:29500" in argv
    assert "--rdzv-id=job7" in argv and "--rdzv-conf=timeout=900,read_timeout=10" in argv
    assert not any(a.startswith("--node-rank") for a in argv)


def test_shell_line_is_quoted_and_masks_secrets():
    pb = parse_playbook(PB)
    line = plan_launch(pb, inputs(pb))[0].shell_line()
    words = shlex.split(line)
    assert "HF_TOKEN=***" in words and "hunter2" not in line
    assert words[-2:] == ["--lr", "0.1 0.2"]
    assert "HF_TOKEN=hunter2" in plan_launch(pb, inputs(pb))[0].shell_line(reveal_secrets=True)


def test_per_node_nproc_and_env():
    pb = parse_playbook(PB.replace("nodes: node[02-04]", "nodes: [node02, {name: node03, nproc_per_node: 2, env: {NCCL_IB_DISABLE: 1}}, node04]"))
    plans = plan_launch(pb, inputs(pb))
    assert [p.nproc for p in plans] == [2, 4, 4] and [p.first_rank for p in plans] == [0, 2, 6]
    assert plans[0].env["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_DISABLE" not in plans[1].env
