"""Recorded core events for the UI tests and snapshots: a 3-node job, checked, run and finished,
pushed into a playbook screen's bridge as the runbook would push them. No cluster, no clock: every
timestamp is fixed, so what is drawn is the same on every run."""

from __future__ import annotations

from pathlib import Path

from ddptui.core import events as E
from ddptui.core.diagnosis.model import Evidence, Finding, Fix

NODES = ("alpha", "beta", "gamma")
T0 = 1_767_268_800.0  # 2026-01-01 12:00:00 UTC
RUN_ID = "20260101-120000-three-local-0a1b"

PB3 = """\
name: three-local
description: three nodes on this machine, 2 processes each
transport: local
nodes: [alpha, beta, gamma]
job:
  script: builtin:smoke
  nproc_per_node: 2
  env: {NCCL_DEBUG: INFO}
"""

CHECKS = ("ping", "hostname", "interfaces", "route", "env", "shm", "python", "torch", "backend", "master-port",
          "master-reachable")

SOCKET_FINDING = Finding(
    "nccl-socket-ifname", "warning", ["beta", "gamma"],
    "NCCL picked the loopback interface on beta and gamma",
    [Evidence("beta", 4, "beta:12:12 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>"),
     Evidence("gamma", 4, "gamma:12:12 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>")],
    "Without NCCL_SOCKET_IFNAME, NCCL takes the first interface it finds; on these nodes that is lo, "
    "which no other node can reach.",
    Fix(env={"NCCL_SOCKET_IFNAME": "eth0"}, explain="Pin NCCL's socket interface to the one the nodes share.",
        alternatives=("NCCL_SOCKET_IFNAME=^lo,docker",)))
SHM_FINDING = Finding("small-shm", "info", ["gamma"], "/dev/shm is 64 MiB on gamma",
                      [Evidence("gamma", 0, "shm: 64 MiB")], "Enough for gloo; NCCL wants more with many GPUs.")


def write_playbook(folder: Path) -> Path:
    p = folder / "three-local.yaml"
    p.write_text(PB3)
    return p


def _lines(node: str, rank0: int) -> tuple[str, ...]:
    host = node
    out = [
        f"I0101 12:00:0{rank0}.123456 4242 site-packages/torch/distributed/run.py:650] Using nproc_per_node=2.",
        f"[default0]:{host}:12:12 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.{rank0 + 2}<0>",
        f"[default1]:{host}:13:13 [1] NCCL INFO cudaDriverVersion 12040",
        f"[default0]:{host}:12:12 [0] NCCL INFO NET/Socket : Using [0]{'eth0' if node == 'alpha' else 'lo'}:"
        f"{'10.0.0.2' if node == 'alpha' else '127.0.0.1'}<0>",
        "[default1]:UserWarning: TypedStorage is deprecated. It will be removed in the future and UntypedStorage "
        "will be the only storage class. This should only matter to you if you are using storages directly.",
    ]
    for lr in (0, 1):
        out.append(f"[default{lr}]:ddptui-smoke result host={host} rank={rank0 + lr} local_rank={lr} world_size=6 "
                   f"backend=gloo all_reduce=ok sum=15 expected=15 params_in_sync=true "
                   f"allreduce_ms={11.5 + rank0 + lr:.2f} total_s={2.5 + rank0 / 10:.2f}")
    out.append(f"[default0]:ddptui-smoke bandwidth scope=world size=33554432 algbw_gbps=0.82 busbw_gbps=1.37 "
               f"backend=gloo ranks=6 iters=20 time_ms=40.9 host={host} rank={rank0}")
    out.append(f"[default0]:ddptui-smoke bandwidth scope=inter-node size=33554432 algbw_gbps=0.61 busbw_gbps=0.81 "
               f"backend=gloo ranks=3 iters=20 time_ms=55.1 host={host} rank={rank0}")
    return tuple(out)


def checked(push) -> None:
    """connect and check, passed; the checks' results for every node."""
    push(E.RunStarted(RUN_ID, f"~/.local/share/ddptui/runs/{RUN_ID}", "three-local", NODES, t=T0))
    push(E.StepChanged("connect", "running", "Connect to every node", t=T0))
    for n in NODES:
        push(E.NodeState(n, "connected", "local", t=T0 + 0.1))
    push(E.StepChanged("connect", "passed", "3 nodes connected", t=T0 + 0.2))
    push(E.StepChanged("check", "running", "Check every node", t=T0 + 0.2))
    for i, n in enumerate(NODES):
        for c in CHECKS:
            status = "warn" if (c == "shm" and n == "gamma") else "pass"
            push(E.CheckResult(n, c, status, f"{c} ok on {n}" if status == "pass" else "/dev/shm is 64 MiB",
                               f"check-{c} --node {n}", f"{c}: fine\n", t=T0 + 0.3 + i))
        push(E.CheckResult(n, "ib", "skip", "no InfiniBand device", "ls /sys/class/infiniband", "", t=T0 + 0.4 + i))
    push(E.FindingRaised(SHM_FINDING, t=T0 + 3))
    push(E.StepChanged("check", "passed", "every check passed on 3 nodes (1 warning)", t=T0 + 3))


def finished(push) -> None:
    """The whole job: checked, launched master first, every rank's result, every node exited 0."""
    checked(push)
    push(E.StepChanged("launch-master", "running", "Start torchrun on the master", t=T0 + 4))
    for rank, n in enumerate(NODES):
        push(E.CommandPlanned(n, "master" if rank == 0 else "worker", rank,
                              f"cd ~ && NCCL_DEBUG=INFO torchrun --nnodes=3 --nproc-per-node=2 --node-rank={rank} "
                              "--master-addr=127.0.0.1 --master-port=29500 smoke.py", 2 * rank, 2, t=T0 + 4))
    push(E.NodeState("alpha", "launching", "master, node_rank 0", t=T0 + 4))
    push(E.NodeState("alpha", "running", "pid 4242", pid=4242, pgid=4242, t=T0 + 4.5))
    push(E.StepChanged("launch-master", "passed", "torchrun started on alpha (pid 4242)", t=T0 + 4.5))
    push(E.StepChanged("wait-master", "running", "Wait for the master's port", t=T0 + 4.5))
    push(E.StepChanged("wait-master", "passed", "127.0.0.1:29500 accepts connections (0.4 s)", t=T0 + 5))
    push(E.StepChanged("launch-workers", "running", "Start torchrun on the workers", t=T0 + 5))
    for n in NODES[1:]:
        push(E.NodeState(n, "launching", "worker", t=T0 + 5))
        push(E.NodeState(n, "running", "pid 4300", t=T0 + 5.5))
    push(E.StepChanged("launch-workers", "passed", "torchrun started on 2 workers", t=T0 + 5.5))
    push(E.StepChanged("watch", "running", "Watch until every node exits", t=T0 + 5.5))
    for rank, n in enumerate(NODES):
        push(E.NodeOutput(n, _lines(n, 2 * rank), 1))
    push(E.FindingRaised(SOCKET_FINDING, t=T0 + 8))
    for i, n in enumerate(NODES):
        push(E.NodeState(n, "exited", "exited 0", rc=0, t=T0 + 16.25 + i / 10))
    push(E.StepChanged("watch", "passed", "every node exited 0, 6 rank results ok; inter-node busbw 0.81 GB/s "
                                          "(32 MiB, gloo)", t=T0 + 16.5))
