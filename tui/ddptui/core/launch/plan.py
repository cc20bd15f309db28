"""The launch plan: playbook + what the nodes told us -> each node's exact torchrun command.

Pure code: no I/O, so it is unit-tested line by line. Values are quoted only when a plan is shown
as a shell line; the transport sends argv and env as data, never as pasted strings.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..playbook.model import Job, NodeSpec, Playbook
from ..redact import looks_secret, shape_of


def is_secret(name: str, value: str, redact: tuple[str, ...] = ()) -> bool:
    """One source of truth (core/redact.py): secret by name, by the playbook's `redact:`, or by shape."""
    return name.upper() in {n.upper() for n in redact} or looks_secret(name) or shape_of(value) is not None


@dataclass(frozen=True)
class NodePlan:
    node: str
    role: str  # master | worker
    node_rank: int
    nproc: int
    first_rank: int  # global rank of local rank 0 (static rendezvous)
    python: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    redact: tuple[str, ...] = ()  # the playbook's `redact:` names: masked however innocent they look

    @property
    def ranks(self) -> range:
        return range(self.first_rank, self.first_rank + self.nproc)

    def shell_line(self, reveal_secrets: bool = False) -> str:
        """The command as one copyable shell line; secret-looking env values are masked."""
        env = " ".join(
            f"{k}={shlex.quote(v if reveal_secrets or not is_secret(k, v, self.redact) else '***')}"
            for k, v in sorted(self.env.items())
        )
        cmd = shlex.join(self.argv)
        line = f"env {env} {cmd}" if env else cmd
        return f"cd {shlex.quote(self.cwd)} && {line}" if self.cwd else line


@dataclass(frozen=True)
class LaunchInputs:
    """What the plan needs to know about the nodes (from connect and the checks)."""

    master_addr: str
    scripts: dict[str, str]  # node -> the script's path on that node
    pythons: dict[str, str]  # node -> interpreter whose torch runs the job
    cwds: dict[str, str | None] = field(default_factory=dict)  # node -> workdir_for(); default: as written


def env_for(pb: Playbook, node: NodeSpec) -> dict[str, str]:
    """The job's env on one node: job.env, then the node's own env on top. The one merge."""
    env = pb.job.env_dict()
    env.update(dict(node.env))
    return env


def workdir_for(pb: Playbook, node: NodeSpec, transport_kind: str) -> str | None:
    """Where the job runs on a node: the node's workdir, the job's, or (on this machine, with
    neither, for a script of the user's) the playbook's folder, so a relative script resolves as
    the user wrote it. The one place that decides it: the script check and the launch both ask."""
    cwd = node.workdir or pb.job.workdir
    if cwd is None and transport_kind == "local" and pb.path is not None and not pb.job.script.startswith("builtin:"):
        cwd = str(Path(pb.path).resolve().parent)
    return cwd


def base_env(job: Job) -> dict[str, str]:
    """What torchrun gets on every node before the playbook's env (which may override it)."""
    env = {"PYTHONUNBUFFERED": "1", "LOGLEVEL": "INFO"}
    if job.backend != "auto":
        env["DDPTUI_BACKEND"] = job.backend
    return env


def torchrun_flags(job: Job, nnodes: int | str, nproc: int, master_addr: str, node_rank: int | str,
                   rdzv_id: str | None = None) -> list[str]:
    """torch.distributed.run's options for one node: the one place the rendezvous rules live. `nnodes`,
    `node_rank` and `rdzv_id` may be shell expansions (`$SLURM_NODEID`) when a batch script renders them."""
    flags = [f"--nnodes={nnodes}", f"--nproc-per-node={nproc}"]
    if job.rendezvous == "static":
        flags += [f"--node-rank={node_rank}", f"--master-addr={master_addr}",
                  f"--master-port={job.master_port}", f"--rdzv-conf=timeout={job.rdzv_timeout}"]
    else:
        flags += ["--rdzv-backend=c10d", f"--rdzv-endpoint={master_addr}:{job.master_port}",
                  f"--rdzv-id={rdzv_id or job.rdzv_id}",
                  f"--rdzv-conf=timeout={job.rdzv_timeout},read_timeout={job.rdzv_read_timeout}"]
    if job.tee:
        # --tee makes torchrun prefix each line with [default<local_rank>]:, so two ranks'
        # prints never glue together on one line.
        flags.append("--tee=3")
    return flags


def plan_launch(pb: Playbook, inputs: LaunchInputs) -> list[NodePlan]:
    """One NodePlan per node, master first; node_rank follows the playbook's node order."""
    job = pb.job
    nodes = pb.ordered_nodes()
    nnodes = len(nodes)
    plans: list[NodePlan] = []
    first_rank = 0
    for rank, node in enumerate(nodes):
        nproc = pb.nproc_of(node)
        python = inputs.pythons[node.name]
        argv = [python, "-m", "torch.distributed.run",
                *torchrun_flags(job, nnodes, nproc, inputs.master_addr, rank),
                inputs.scripts[node.name], *job.args]
        env = base_env(job)
        env.update(env_for(pb, node))
        plans.append(NodePlan(
            node=node.name, role="master" if rank == 0 else "worker", node_rank=rank, nproc=nproc,
            first_rank=first_rank, python=python, argv=tuple(argv), env=env,
            cwd=inputs.cwds.get(node.name, node.workdir or job.workdir), redact=tuple(pb.redact),
        ))
        first_rank += nproc
    return plans
