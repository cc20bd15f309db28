"""The diagnosis rules, as data.

A line rule is one entry: the id of the cause (catalog.py holds its severity, words, fix and what
it suppresses), the patterns that are its evidence (substring regexes: NCCL and torch lines carry
launcher prefixes, so never anchor at the line start), a summary, and optionally the patterns
that settle it (a worker that waited for the master and then joined). A rule carries its own
severity or fix only where its variant of the cause needs one (noted at the rule).

A cross-node rule names a per-node fact (the NCCL version, the network transport, the net plugin,
the number of local processes) that must agree on every node of a job; engine.py extracts the
facts and raises the rule's id when they differ.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .catalog import DEFAULT, Default
from .model import Fix


@dataclass(frozen=True)
class Rule:
    id: str  # a catalog id
    patterns: tuple[str, ...]
    summary: str = ""  # may use {0}, {1}... from the first pattern's groups; else the catalog's title
    requires: tuple[str, ...] = ()  # every one of these must also have been seen on the same node
    resolved_by: tuple[str, ...] = ()
    at_end: bool = False  # judged when the log ends (or the run does), not line by line
    absent: tuple[str, ...] = ()  # at_end rules: none of these may have been seen on the node
    severity: str | None = None  # this variant's own severity; None: the catalog's
    fix: Fix | None | Default = DEFAULT  # this variant's own fix; DEFAULT: the catalog's
    compiled: tuple[re.Pattern, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", tuple(re.compile(p) for p in self.patterns))


RULES: tuple[Rule, ...] = (
    Rule("ib-socket-mismatch", (r"socketFinalizeAccept: wrong type ([34]) != ([34])",),
         summary="socket type {0} met type {1}: NET/IB on one side, NET/Socket on the other"),
    Rule("ib-not-detected", (r"NET/IB : No device found",), requires=(r"NCCL_IB_DISABLE set by environment to 0",)),
    Rule("ib-device-open-failed", (r"NET/IB : Unable to open device (\S+)", r"Call to ibv_open_device failed"),
         summary="cannot open IB device {0}"),
    Rule("bad-socket-ifname", (r"neither AF_INET\(2\) nor AF_INET6\(10\)",),
         requires=(r"NCCL_SOCKET_IFNAME set (?:by environment )?to",),
         summary="NCCL_SOCKET_IFNAME names no interface with an address here"),
    # wrong-interface, lo: its own fix (exclude lo and docker; the catalog's also excludes veth)
    Rule("wrong-interface", (r"(?:Bootstrap|NET/Socket|NET) : Using (?:\[\d\])?(?:interface )?lo:127\.",),
         summary="NCCL uses lo (127.0.0.1) for inter-node traffic",
         fix=Fix(env={"NCCL_SOCKET_IFNAME": "^lo,docker"}, scope="all-nodes",
                 explain="pin NCCL_SOCKET_IFNAME to the interface that routes between the nodes (e.g. eth0); never "
                         "lo for multi-node")),
    Rule("wrong-interface",
         (r"(?:Bootstrap|NET/Socket) : Using .*\[\d\](veth\w*|docker\w*|virbr\w*|br-\w+|cni\w*|flannel\S*|cali\w+):",),
         summary="NCCL uses the virtual interface {0}"),
    Rule("firewall-or-unreachable",
         (r"(?:Call to connect failed|socketPollConnect: Connect to \S+ returned \d+\()"
          r"\s*:?\s*(Connection timed out|No route to host)",
          r"returned 113\(No route to host\)", r"Software caused connection abort")),
    Rule("duplicate-gpu", (r"Duplicate GPU detected : rank (\d+) and rank (\d+) both on CUDA device (\w+)",),
         summary="ranks {0} and {1} both on CUDA device {2}"),
    Rule("duplicate-rank", (r"Bootstrap Root : rank (\d+) of (\d+) ranks has already checked in",),
         summary="rank {0} of {1} checked in twice"),
    Rule("loopback-hostname", (r"connect \[(127\.\d+\.\d+\.\d+)\]:\d+: Connection refused",),
         summary="a peer advertised {0}"),
    # hostname-resolution, the node's own name: a warning (a 2-node job can still pass), and an env fix
    Rule("hostname-resolution", (r"Unable to resolve hostname to a \(local\) address",),
         summary="the node's own hostname does not resolve", severity="warning",
         fix=Fix(env={"GLOO_SOCKET_IFNAME": "eth0"}, scope="all-nodes",
                 explain="make the hostname resolve to the node's address (/etc/hosts or DNS), or name the "
                         "interface")),
    Rule("hostname-resolution",
         (r"failed to connect to \[([A-Za-z][\w.-]*)\]:(\d+) \(errno",),
         requires=(r"any network address of \(\d+\.\d+\.\d+\.\d+, \d+\)",),
         summary="connecting to the name {0} instead of the address"),
    Rule("cuda-driver-mismatch", (r"CUDA driver version is insufficient for CUDA runtime version",)),
    Rule("shm-too-small", (r"failed to extend /dev/shm\S* to \d+ bytes", r"posix_fallocate failed : No space left on device",
                           r"Error while creating shared memory segment")),
    Rule("watchdog-timeout", (r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+)",),
         summary="{1} #{0} timed out"),
    Rule("collective-desync", (r"Detected mismatch between collectives on ranks",)),
    Rule("collective-mismatch", (r"collective mismatch error, local size (\d+) remote size (\d+)",),
         summary="local size {0}, remote size {1}"),
    Rule("segfault-exit-11", (r"exitcode\s*:?\s*-11\b",)),
    Rule("host-oom-exit-9", (r"exitcode\s*:?\s*-9\b",)),
    Rule("remote-rank-died", (r"Call to recv from \S+ failed : (Broken pipe|Connection reset by peer)",
                              r"Connection closed by peer \[([\d.]+)\]", r"Connection reset by peer \[([\d.]+)\]")),
    Rule("tcpstore-timeout", (r"client socket has timed out after (\d+)(ms|s) while trying to connect to \(?([\w.:-]+)",),
         summary="gave up after {0}{1} connecting to {2}"),
    Rule("port-in-use", (r"failed to bind to \S+ \(errno: 98 - Address already in use\)", r"EADDRINUSE",
                         r"address already in use")),
    Rule("master-not-started",
         (r"is not yet listening \(Error: 111 - Connection refused\), retrying",
          r"TCP client failed to connect/validate to host (\S+) - retrying",
          r"failed to connect to \S+ \(errno: 111 - Connection refused\)"),
         summary="waits for the master's store, which does not listen yet",
         resolved_by=(r"has started to listen", r"Rendezvous complete for workers", r"init_process_group done",
                      r"client socket has connected to")),
    Rule("rendezvous-timeout", (r"RendezvousConnectionError", r"RendezvousTimeoutError")),
    Rule("bad-master-addr", (r"any network address of \((\d+|0\.\d+\.\d+\.\d+), \d+\)",
                             r"connect to \[?(?:::ffff:)?(0\.\d+\.\d+\.\d+)\]?:\d+"),
         summary="{0} is not a usable master address"),
    Rule("bad-socket-ifname", (r"Unable to find address for: (\S+)",), summary="no address for interface {0}"),
    Rule("bad-master-addr",
         (r"failed to connect to any network address of \(([\d.]+), (\d+)\)",),
         requires=(r"errno: 113 - No route to host",), summary="no answer at {0}:{1}"),
    Rule("missing-rank", (r"waiting for clients\. (\d+)/(\d+) clients joined",),
         summary="{0} of {1} nodes joined the master's store"),
    Rule("missing-rank", (r"store based barrier .*\(world_size=(\d+), worker_count=(\d+)",),
         summary="{1} of {0} ranks reached the barrier"),
    Rule("gid-index", (r"NET/IB : Got completion with error 12, opcode",)),
    Rule("ib-completion-error", (r"NET/IB : Got completion from peer \S+ with (?:status=|error )(\d+)",),
         summary="RDMA completion error {0}"),
    Rule("ib-async-fatal-event", (r"NET/IB : (\S+) async fatal event",), summary="fatal event on {0}"),
    Rule("p2p-hang", (r"via P2P/IPC",),
         at_end=True, absent=(r"Init COMPLETE", r"ncclCommInitRank comm .* - Init COMPLETE")),
)


# ---- cross-node rules ------------------------------------------------------------------------------
Seen = dict  # (node, host) -> (value, line, text): one fact per host that printed it, on each node


def _listing(seen: Seen) -> str:
    return ", ".join(f"{host} {v[0]}" for (_, host), v in sorted(seen.items()))


def _transports(seen: Seen) -> str:
    ib = sorted({host for (_, host), v in seen.items() if v[0] == "IB"})
    sock = sorted({host for (_, host), v in seen.items() if v[0] == "Socket"})
    return f"{', '.join(ib)} use NET/IB, {', '.join(sock)} NET/Socket"


def _nprocs(seen: Seen) -> str:
    return "torchrun started " + ", ".join(f"{node}: {v[0]}" for (node, _), v in sorted(seen.items())) + " processes"


@dataclass(frozen=True)
class CrossRule:
    id: str  # a catalog id
    fact: str  # version | transport | plugin | nproc: the per-node fact that must agree
    summary: Callable[[Seen], str]
    hosts_if_one_node: bool = False  # one log that holds several hosts: name the hosts, not the node


CROSS_RULES: tuple[CrossRule, ...] = (
    CrossRule("nccl-version-mismatch", "version", lambda seen: "NCCL versions differ: " + _listing(seen),
              hosts_if_one_node=True),
    CrossRule("ib-socket-mismatch", "transport", _transports),
    CrossRule("nproc-mismatch", "nproc", _nprocs),
    CrossRule("net-plugin-mismatch", "plugin", lambda seen: "net plugins differ: " + _listing(seen)),
)
