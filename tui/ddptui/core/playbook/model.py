"""The playbook model: frozen dataclasses, built only by the loader."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

STEP_KINDS = ("connect", "check", "launch-master", "wait-master", "launch-workers", "watch", "shell")

# The standard runbook, used when a playbook has no `steps:`.
DEFAULT_STEPS = (
    ("connect", "connect", "Connect to every node"),
    ("check", "check", "Preflight checks on every node"),
    ("launch-master", "launch-master", "Start torchrun on the master"),
    ("wait-master", "wait-master", "Wait until the master's rendezvous port listens"),
    ("launch-workers", "launch-workers", "Start torchrun on the workers, in order"),
    ("watch", "watch", "Watch the job until every node exits"),
)

BUILTIN_SCRIPTS = {"builtin:smoke": "smoke.py"}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    host: str | None = None  # None: take HostName from ssh_config, else the name
    user: str | None = None
    port: int | None = None
    transport: str = "ssh"  # ssh | local
    nproc_per_node: int | None = None  # per-node override of job.nproc_per_node
    env: tuple[tuple[str, str], ...] = ()  # per-node env on top of job.env
    python: str | None = None
    workdir: str | None = None


@dataclass(frozen=True)
class Job:
    script: str
    args: tuple[str, ...] = ()
    nproc_per_node: int = 1
    master_port: int = 29500
    rendezvous: str = "static"  # static | c10d
    backend: str = "auto"  # auto | gloo | nccl
    workdir: str | None = None
    python: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    rdzv_id: str = "ddptui"
    # torch's own defaults are 900 s (static join), 60 s (c10d read) and 300 s (exit barrier).
    rdzv_timeout: int = 900
    rdzv_read_timeout: int = 60
    master_wait_timeout: float = 60.0
    stop_grace: float = 10.0
    tee: bool = True

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class Step:
    id: str
    kind: str
    title: str
    timeout: float | None = None
    run: str | None = None  # for kind=shell: the command run on each node
    nodes: tuple[str, ...] = ()  # empty: all nodes


@dataclass(frozen=True)
class SSHOptions:
    connect_timeout: float = 10.0
    command_timeout: float = 60.0
    keepalive: int = 15


@dataclass(frozen=True)
class BandwidthOptions:
    min_busbw_gbps: float | None = None  # the inter-node all_reduce busbw (GB/s) below which slow-interconnect


@dataclass(frozen=True)
class Playbook:
    name: str
    nodes: tuple[NodeSpec, ...]
    master: str
    job: Job
    steps: tuple[Step, ...]
    description: str = ""
    ssh: SSHOptions = field(default_factory=SSHOptions)
    path: Path | None = None
    source: str = ""  # the YAML text as loaded (recorded in each run)
    redact: tuple[str, ...] = ()  # env names whose values never leave the run (bundles, reports)
    bandwidth: BandwidthOptions = field(default_factory=BandwidthOptions)

    @property
    def master_node(self) -> NodeSpec:
        return next(n for n in self.nodes if n.name == self.master)

    @property
    def workers(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.name != self.master)

    def ordered_nodes(self) -> tuple[NodeSpec, ...]:
        """Master first, then the workers in playbook order: node_rank follows this order."""
        return (self.master_node, *self.workers)

    def nproc_of(self, node: NodeSpec) -> int:
        return node.nproc_per_node or self.job.nproc_per_node
