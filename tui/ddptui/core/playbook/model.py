"""The playbook model: frozen dataclasses, built only by the loader."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

STEP_KINDS = ("connect", "allocate", "check", "launch-master", "wait-master", "launch-workers", "watch", "shell")

# The standard runbook, used when a playbook has no `steps:`.
DEFAULT_STEPS = (
    ("connect", "connect", "Connect to every node"),
    ("check", "check", "Preflight checks on every node"),
    ("launch-master", "launch-master", "Start torchrun on the master"),
    ("wait-master", "wait-master", "Wait until the master's rendezvous port listens"),
    ("launch-workers", "launch-workers", "Start torchrun on the workers, in order"),
    ("watch", "watch", "Watch the job until every node exits"),
)

# With `transport: slurm` the connect step is "allocate": get (or join) the allocation, then reach
# every node through a job step.
SLURM_STEPS = (("allocate", "allocate", "Get the Slurm allocation and reach every node"),) + DEFAULT_STEPS[1:]

BUILTIN_SCRIPTS = {"builtin:smoke": "smoke.py"}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    host: str | None = None  # None: take HostName from ssh_config, else the name
    user: str | None = None
    port: int | None = None
    transport: str = "ssh"  # ssh | local | slurm
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
class SlurmOptions:
    """The `slurm:` block: what to ask Slurm for (salloc, #SBATCH lines) or which allocation to use."""

    partition: str | None = None
    nodes: int | None = None  # how many nodes to allocate; default: as many as `nodes:` names
    gpus_per_node: int | None = None
    time: str | None = None  # Slurm's time format: "30", "00:30:00", "1-00:00:00"
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    extra_args: tuple[str, ...] = ()
    job: str | None = None  # an allocation the user already holds
    pending_timeout: float = 300.0
    keep: bool = False  # keep the allocation when the run ends


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
    transport: str = "ssh"  # the top-level default: ssh | local | slurm
    slurm: SlurmOptions | None = None  # the `slurm:` block, when there is one

    @property
    def on_slurm(self) -> bool:
        return self.transport == "slurm"

    def with_allocation(self, job_id: str, names: list[str]) -> Playbook:
        """This playbook on the nodes of Slurm allocation `job_id`: the names the playbook gave keep
        their settings (in the allocation's order when it named none); the master stays if granted."""
        from dataclasses import replace

        given = {n.name: n for n in self.nodes}
        nodes = tuple(given.get(n) or NodeSpec(name=n, transport="slurm") for n in names)
        master = self.master if self.master in names else names[0]
        return replace(self, nodes=nodes, master=master, slurm=replace(self.slurm or SlurmOptions(), job=str(job_id)))

    @property
    def master_node(self) -> NodeSpec:  # only after allocation when a slurm playbook names no nodes
        return next(n for n in self.nodes if n.name == self.master)

    @property
    def workers(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.name != self.master)

    def ordered_nodes(self) -> tuple[NodeSpec, ...]:
        """Master first, then the workers in playbook order: node_rank follows this order. Empty for
        a slurm playbook that names no nodes, until its allocation does."""
        return (self.master_node, *self.workers) if self.nodes else ()

    def nproc_of(self, node: NodeSpec) -> int:
        return node.nproc_per_node or self.job.nproc_per_node

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)
