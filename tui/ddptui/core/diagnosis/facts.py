"""What the engine keeps per node: the facts a line says about its node (or the NCCL host that
printed it) that the cross-node rules compare, and each node's state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .model import Evidence
from .cross_rules import CrossRule

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NCCL_HEAD = re.compile(r"(?:^|[\s:>\]])([A-Za-z0-9][\w.-]*):(\d+):(\d+) \[(\d+)\]")

# Per-node state extractors: (name, regex). Values feed the cross-node rules.
VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
NET_DEFINITE = re.compile(r"Using (?:network|internal Network) (IB|Socket)\b|via NET/(IB|Socket)/")
NET_TENTATIVE = re.compile(r"NET/(IB|Socket) : Using \[")
# the network a host's NCCL uses, whatever its name: its own IB or Socket, or a net plugin's
# (`Using network AWS Libfabric`, `Using network NCCL RDMA Plugin v8`, `Using network IBext`)
NETWORK = re.compile(r"Using (?:network|internal Network) ([A-Za-z][\w .+/-]*)")
PLUGIN_PATH = "Plugin Path : "
PLUGIN_EXTERNAL = re.compile(PLUGIN_PATH + r"(\S+)|Loaded net plugin (\S+)")
PLUGIN_INTERNAL = re.compile(r"No plugin found \(libnccl-net\.so\)|Could not find: libnccl-net\.so|Failed to find ncclNetPlugin symbol")
NRANKS = re.compile(r"rank (\d+) nRanks (\d+) nNodes (\d+)")
LOCAL_RANKS = re.compile(r"local_ranks=\[([\d, ]*)\]")  # torchrun's agent, with LOGLEVEL=INFO
GROUP_WORLD = re.compile(r"\bgroup_world_size=(\d+)")  # torchrun's agent: its --nnodes, with LOGLEVEL=INFO
COMM_SIZE = re.compile(r"\brank \d+ n[Rr]anks (\d+)\b")  # NCCL's communicator: init and destroy lines
# Lightning's process group init, printed once by each process (only where no group is initialised yet)
CLAIM = re.compile(r"[Ii]nitializing (?:ddp(?: \(SLURM\))?|distributed): GLOBAL_RANK: (\d+), MEMBER: \d+/(\d+)")
MAX_CLAIMS = 4096  # ranks kept per node
# a line that holds none of these says no fact (the engine's gate lets every one of them through)
# The transport's literals name IB and Socket, not only "via NET/" and "Using network": a net plugin's
# lines say its own name (HPC-X: `Using network NCCL RDMA Plugin v8`, `via NET/NCCL RDMA Plugin
# v8/0/GDRDMA`), which NET_DEFINITE does not read, hundreds per init
STATE_LITERALS = ("NCCL version", "Using network ", "Using internal Network ", "via NET/IB/", "via NET/Socket/",
                  "NET/IB : Using [", "NET/Socket : Using [", "Plugin Path", "Loaded net plugin", "No plugin found",
                  "Could not find: libnccl-net", "Failed to find ncclNetPlugin symbol", " nNodes ", "local_ranks=[",
                  "group_world_size=", " nranks ", " nRanks ", "GLOBAL_RANK: ")


@dataclass
class NodeState:
    name: str
    lines: int = 0
    hosts: set = field(default_factory=set)
    seen: dict = field(default_factory=dict)  # pattern source -> (line, text), for `requires` and `absent`
    version: dict = field(default_factory=dict)  # host -> (version, line, text)
    transport: dict = field(default_factory=dict)  # host -> (kind, definite, line, text)
    plugin: dict = field(default_factory=dict)  # host -> (value, line, text)
    network: dict = field(default_factory=dict)  # host -> (the network NCCL uses: IB, Socket, a plugin's, line, text)
    nnodes_seen: dict = field(default_factory=dict)  # host -> (nNodes, nRanks, line, text)
    nproc: dict = field(default_factory=dict)  # node -> (local processes torchrun started here, line, text)
    nnodes: dict = field(default_factory=dict)  # node -> (the nnodes torchrun's agent here was started with, line, text)
    comm: dict = field(default_factory=dict)  # host -> (largest communicator it joined, line, text)
    claims: dict = field(default_factory=dict)  # global rank -> ((rank, world size, times claimed here), line, text)
    pending: dict = field(default_factory=dict)  # rule index -> [Evidence] waiting for `requires`
    changes: int = 0  # facts written so far: the cross rules, which read only the facts, look again when it moves


def _keep(st: NodeState, facts: dict, key: str, value: tuple) -> None:
    facts[key] = value
    st.changes += 1


def extract_facts(st: NodeState, key: str, n: int, line: str) -> tuple[int, int] | None:
    """Keep what a line says about its node (or NCCL host `key`): NCCL version, transport, net plugin,
    local ranks, nnodes, communicator size, the global ranks Lightning's processes claimed. Returns
    (nNodes, nRanks) the first time NCCL reports them."""
    if "NCCL version" in line and key not in st.version and (m := VERSION.search(line)):
        _keep(st, st.version, key, (m.group(1), n, line.strip()))
    cur = st.transport.get(key)
    if cur is not None and cur[1]:
        pass  # a definite transport stays (nothing below would change it)
    elif ("Using " in line or "via NET/" in line) and (m := NET_DEFINITE.search(line)):
        _keep(st, st.transport, key, (m.group(1) or m.group(2), True, n, line.strip()))
    elif cur is None and " : Using [" in line and (m := NET_TENTATIVE.search(line)):
        _keep(st, st.transport, key, (m.group(1), False, n, line.strip()))
    if "sing " in line and key not in st.network and (m := NETWORK.search(line)):
        _keep(st, st.network, key, (m.group(1).strip(), n, line.strip()))
    if "lugin" in line:
        if m := PLUGIN_EXTERNAL.search(line):
            # a host names its plugin twice, `Loaded net plugin NAME` then `Plugin Path : PATH`: the
            # path, which tells two plugins apart, is kept (cross_rules.plugins_differ compares like with like)
            cur = st.plugin.get(key)
            if m.group(1) or cur is None or PLUGIN_PATH not in cur[2]:
                _keep(st, st.plugin, key, ("external:" + (m.group(1) or m.group(2)), n, line.strip()))
        elif key not in st.plugin and PLUGIN_INTERNAL.search(line):
            _keep(st, st.plugin, key, ("internal", n, line.strip()))
    if not st.nproc and "local_ranks=[" in line and (m := LOCAL_RANKS.search(line)):
        _keep(st, st.nproc, st.name, (len([x for x in m.group(1).split(",") if x.strip()]), n, line.strip()))
    if not st.nnodes and "group_world_size=" in line and (m := GROUP_WORLD.search(line)):
        _keep(st, st.nnodes, st.name, (int(m.group(1)), n, line.strip()))
    if ("nranks " in line or "nRanks " in line) and (m := COMM_SIZE.search(line)):
        size = int(m.group(1))
        if key not in st.comm or size > st.comm[key][0]:
            _keep(st, st.comm, key, (size, n, line.strip()))
    if "GLOBAL_RANK: " in line and (m := CLAIM.search(line)):
        rank = int(m.group(1))
        if (cur := st.claims.get(rank)) is not None:
            _keep(st, st.claims, rank, ((rank, cur[0][1], cur[0][2] + 1), cur[1], cur[2]))
        elif len(st.claims) < MAX_CLAIMS:
            _keep(st, st.claims, rank, ((rank, int(m.group(2)), 1), n, line.strip()))
    if " nNodes " in line and key not in st.nnodes_seen and (m := NRANKS.search(line)):
        _keep(st, st.nnodes_seen, key, (int(m.group(3)), int(m.group(2)), n, line.strip()))
        return int(m.group(3)), int(m.group(2))
    return None


def cross_verdicts(cross_rules: Iterable[CrossRule], nodes: Iterable[NodeState]) -> Iterator[tuple[str, list[str], str, list[Evidence]]]:
    """The cross rules: a per-node fact that differs between the nodes (or the hosts of one log).
    Yields (id, nodes, summary, evidence) for each rule that applies."""
    nodes = list(nodes)
    raised = set()  # an id two rules can raise is raised by the first that applies (no flip between summaries)
    for cr in cross_rules:
        if cr.id in raised:
            continue
        seen = {}  # (node, host) -> (value, line, text)
        for st in nodes:
            for host, val in getattr(st, cr.fact).items():
                seen[(st.name, host)] = (val[0], val[-2], val[-1])
        if not (cr.applies(seen) if cr.applies else len({v[0] for v in seen.values()}) >= 2):
            continue
        names = sorted({node for node, _ in seen})
        if cr.hosts_if_one_node and len(names) == 1:
            names = sorted({host for _, host in seen})
        raised.add(cr.id)
        cited = cr.cite(seen) if cr.cite else seen
        yield cr.id, names, cr.summary(seen), [Evidence(node, v[1], v[2]) for (node, _), v in sorted(cited.items())]
