"""The diagnosis rules, as data.

A rule is one entry: the id of the cause (CONTRACTS.md), a severity, the patterns that are its
evidence (substring regexes: NCCL and torch lines carry launcher prefixes, so never anchor at the
line start), the words for the user, a fix, what it suppresses when both fire, and optionally the
patterns that settle it (a worker that waited for the master and then joined).

Cross-node rules (different transports, NCCL versions or net plugins on the nodes of one job)
live in engine.py: they compare the per-node state that the extractors below keep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .model import Fix


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    patterns: tuple[str, ...]
    explanation: str
    fix: Fix | None = None
    summary: str = ""  # may use {0}, {1}... from the first pattern's groups
    requires: tuple[str, ...] = ()  # every one of these must also have been seen on the same node
    suppresses: tuple[str, ...] = ()  # ids this one explains better (same node)
    resolved_by: tuple[str, ...] = ()
    at_end: bool = False  # judged when the log ends (or the run does), not line by line
    absent: tuple[str, ...] = ()  # at_end rules: none of these may have been seen on the node
    compiled: tuple[re.Pattern, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", tuple(re.compile(p) for p in self.patterns))


def _fix(explain: str, env: dict | None = None, scope: str = "manual", alternatives: tuple = ()) -> Fix:
    return Fix(env=env or {}, scope=scope if env else "manual", explain=explain, alternatives=alternatives)


RULES: tuple[Rule, ...] = (
    Rule("ib-socket-mismatch", "error", (r"socketFinalizeAccept: wrong type ([34]) != ([34])",),
         "NCCL's socket types 3 (NetSocket) and 4 (NetIb) met: one node uses NET/Socket and its peer NET/IB. "
         "NCCL picks its transport per node, so env that reached only some nodes (NCCL_IB_DISABLE, "
         "NCCL_SOCKET_IFNAME) splits the job.",
         _fix("the same NCCL_IB_DISABLE on every node: 1 makes all nodes use TCP sockets (slower than IB, but "
              "consistent)", {"NCCL_IB_DISABLE": "1"}, "all-nodes",
              ("enable IB on every node instead (remove NCCL_IB_DISABLE where it is set): the fast choice",)),
         summary="socket type {0} met type {1}: NET/IB on one side, NET/Socket on the other"),
    Rule("ib-not-detected", "warning", (r"NET/IB : No device found",),
         "IB was asked for (NCCL_IB_DISABLE=0) but NCCL found no InfiniBand device and fell back to TCP sockets.",
         _fix("make the HCAs visible to the job (rdma-core/libibverbs, /dev/infiniband in the container) and check "
              "with ibv_devinfo; if only some nodes see IB, the job will also split transports"),
         requires=(r"NCCL_IB_DISABLE set by environment to 0",)),
    Rule("ib-device-open-failed", "warning", (r"NET/IB : Unable to open device (\S+)", r"Call to ibv_open_device failed"),
         "Some HCAs are listed but cannot be opened (often a container that exposes only some of /dev/infiniband).",
         _fix("restrict NCCL_IB_HCA to the devices the job can open, or expose /dev/infiniband/uverbs* for the others"),
         summary="cannot open IB device {0}"),
    Rule("bad-socket-ifname", "error", (r"neither AF_INET\(2\) nor AF_INET6\(10\)",),
         "NCCL_SOCKET_IFNAME names an interface that does not exist here, so NCCL has no address to use and "
         "fails at init (NCCL itself does not warn about the name).",
         _fix("set NCCL_SOCKET_IFNAME to an interface that exists on every node (ip -br addr), or a prefix / ^exclude "
              "list that matches on all of them"),
         requires=(r"NCCL_SOCKET_IFNAME set (?:by environment )?to",)),
    Rule("wrong-interface", "error", (r"(?:Bootstrap|NET/Socket|NET) : Using (?:\[\d\])?(?:interface )?lo:127\.",),
         "NCCL uses the loopback interface for traffic between nodes; the other nodes cannot reach 127.0.0.1.",
         _fix("pin NCCL_SOCKET_IFNAME to the interface that routes between the nodes (e.g. eth0); never lo for "
              "multi-node", {"NCCL_SOCKET_IFNAME": "^lo,docker"}, "all-nodes"),
         summary="NCCL uses lo (127.0.0.1) for inter-node traffic"),
    Rule("wrong-interface", "error",
         (r"(?:Bootstrap|NET/Socket) : Using .*\[\d\](veth\w*|docker\w*|virbr\w*|br-\w+|cni\w*|flannel\S*|cali\w+):",),
         "NCCL also uses a container/virtual interface, which does not reach the other nodes: connects to it time "
         "out ('unhandled system error').",
         _fix("pin NCCL_SOCKET_IFNAME to the physical interface (or exclude virtual ones: ^docker,veth,lo)",
              {"NCCL_SOCKET_IFNAME": "^docker,veth,lo"}, "all-nodes"),
         summary="NCCL uses the virtual interface {0}"),
    Rule("firewall-or-unreachable", "error",
         (r"(?:Call to connect failed|socketPollConnect: Connect to \S+ returned \d+\()"
          r"\s*:?\s*(Connection timed out|No route to host)",
          r"returned 113\(No route to host\)", r"Software caused connection abort"),
         "A TCP connection between the nodes did not get through: a firewall drops or rejects it, or there is no "
         "route. NCCL also opens ephemeral ports besides the rendezvous port.",
         _fix("open TCP between the nodes on the interface NCCL uses (test with nc -l PORT / nc NODE PORT), or run "
              "containers with --network host"),
         suppresses=("remote-rank-died",)),
    Rule("duplicate-gpu", "error", (r"Duplicate GPU detected : rank (\d+) and rank (\d+) both on CUDA device (\w+)",),
         "Two ranks on one node opened the same GPU: the script does not call torch.cuda.set_device(LOCAL_RANK), "
         "or CUDA_VISIBLE_DEVICES hides the others.",
         _fix("set the device from LOCAL_RANK before init_process_group, and do not restrict CUDA_VISIBLE_DEVICES to one GPU"),
         summary="ranks {0} and {1} both on CUDA device {2}"),
    Rule("duplicate-rank", "error", (r"Bootstrap Root : rank (\d+) of (\d+) ranks has already checked in",),
         "Two processes claimed the same rank: node ranks or local ranks are wrong (both nodes started as "
         "node_rank 0, or the launcher's rank env was overridden).",
         _fix("give every node its own node_rank (ddptui's static plan does), and do not set RANK yourself"),
         summary="rank {0} of {1} checked in twice"),
    Rule("loopback-hostname", "error", (r"connect \[(127\.\d+\.\d+\.\d+)\]:\d+: Connection refused",),
         "Gloo binds to the address the hostname resolves to; on this node that is a loopback address (127.0.1.1 "
         "in Debian's /etc/hosts), so the other nodes were told to connect to it.",
         _fix("set GLOO_SOCKET_IFNAME to the interface that routes to the other nodes, or fix /etc/hosts",
              {"GLOO_SOCKET_IFNAME": "eth0"}, "all-nodes"),
         summary="a peer advertised {0}"),
    Rule("hostname-resolution", "warning", (r"Unable to resolve hostname to a \(local\) address",),
         "The node's own hostname does not resolve, so Gloo falls back to the loopback address and advertises "
         "127.0.0.1 to the other ranks. A 2-node job can still pass (recorded on the test cluster: the peer "
         "connected first); with more ranks connections to it are refused or time out.",
         _fix("make the hostname resolve to the node's address (/etc/hosts or DNS), or name the interface",
              {"GLOO_SOCKET_IFNAME": "eth0"}, "all-nodes"),
         suppresses=("loopback-hostname",)),
    Rule("hostname-resolution", "error",
         (r"failed to connect to \[([A-Za-z][\w.-]*)\]:(\d+) \(errno",),
         "The numeric master address was turned back into a host name (reverse lookup through /etc/hosts), and that "
         "name does not lead to the master from here.",
         _fix("make the name resolve to the right address on every node, or remove the stale /etc/hosts entry"),
         requires=(r"any network address of \(\d+\.\d+\.\d+\.\d+, \d+\)",),
         summary="connecting to the name {0} instead of the address",
         suppresses=("bad-master-addr",)),
    Rule("cuda-driver-mismatch", "error", (r"CUDA driver version is insufficient for CUDA runtime version",),
         "The NVIDIA driver on this node is older than the CUDA runtime that torch/NCCL was built with.",
         _fix("upgrade the driver, or install a torch build for the CUDA version the driver supports (nvidia-smi shows it)")),
    Rule("shm-too-small", "error", (r"failed to extend /dev/shm\S* to \d+ bytes", r"posix_fallocate failed : No space left on device",
                                    r"Error while creating shared memory segment"),
         "/dev/shm is too small for NCCL's shared-memory buffers (Docker's default is 64 MiB).",
         _fix("give the container more shared memory (docker --shm-size=8g, a memory-backed emptyDir on Kubernetes); "
              "NCCL_SHM_DISABLE=1 avoids it at a cost in speed", {"NCCL_SHM_DISABLE": "1"}, "all-nodes")),
    Rule("watchdog-timeout", "error", (r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+)",),
         "A collective did not finish within the process group timeout on every rank: a rank is stuck, dead, or "
         "running a different collective.",
         _fix("find the rank that did not reach the collective (its log stops earlier); TORCH_NCCL_TRACE_BUFFER_SIZE and "
              "TORCH_DISTRIBUTED_DEBUG=DETAIL show where"),
         suppresses=("remote-rank-died",), summary="{1} #{0} timed out"),
    Rule("collective-desync", "error", (r"Detected mismatch between collectives on ranks",),
         "Ranks entered different collectives (or shapes) at the same sequence number: the code path differs by rank.",
         _fix("make every rank run the same collectives in the same order with the same shapes")),
    Rule("collective-mismatch", "error", (r"collective mismatch error, local size (\d+) remote size (\d+)",),
         "Two peers posted transfers of different sizes: ranks are running different collectives.",
         _fix("run with TORCH_DISTRIBUTED_DEBUG=DETAIL to see which ranks differ"), summary="local size {0}, remote size {1}"),
    Rule("segfault-exit-11", "error", (r"exitcode\s*:?\s*-11\b",),
         "A worker died of SIGSEGV: a crash in native code (a CUDA/NCCL/extension mismatch, or bad memory access).",
         _fix("run that rank's code alone with faulthandler (python -X faulthandler) to get the stack"),
         suppresses=("remote-rank-died",)),
    Rule("host-oom-exit-9", "error", (r"exitcode\s*:?\s*-9\b",),
         "A worker was killed with SIGKILL, most often by the kernel's OOM killer (host RAM, not GPU memory).",
         _fix("check dmesg for 'Out of memory: Killed process'; lower the per-rank host memory (data loader workers, "
              "model loading), or add RAM/swap"),
         suppresses=("remote-rank-died",)),
    Rule("remote-rank-died", "error", (r"Call to recv from \S+ failed : (Broken pipe|Connection reset by peer)",
                                       r"Connection closed by peer \[([\d.]+)\]", r"Connection reset by peer \[([\d.]+)\]"),
         "The connection to a rank on another node broke: that rank died first (look at its node's log for the "
         "first error).", _fix("find the first failure on the other nodes: this one is a consequence")),
    Rule("tcpstore-timeout", "error", (r"client socket has timed out after (\d+)(ms|s) while trying to connect to \(?([\w.:-]+)",),
         "This node could not reach the rendezvous store on the master within the timeout: the master was not "
         "started, listens elsewhere, or a firewall drops the port.",
         _fix("start the master first (ddptui does), check master_addr/master_port, and open the port"),
         summary="gave up after {0}{1} connecting to {2}"),
    Rule("port-in-use", "error", (r"failed to bind to \S+ \(errno: 98 - Address already in use\)", r"EADDRINUSE",
                                  r"address already in use"),
         "The rendezvous port is taken on the master (another job, or a previous run's leftover).",
         _fix("stop what listens there (ss -ltnp 'sport = :PORT') or choose another master_port")),
    Rule("master-not-started", "warning",
         (r"is not yet listening \(Error: 111 - Connection refused\), retrying",
          r"TCP client failed to connect/validate to host (\S+) - retrying",
          r"failed to connect to \S+ \(errno: 111 - Connection refused\)"),
         "This node started before the master's rendezvous store listened; it retries until the rendezvous timeout.",
         _fix("start the master first (ddptui's ordered launch does); it will join once the master listens"),
         resolved_by=(r"has started to listen", r"Rendezvous complete for workers", r"init_process_group done",
                      r"client socket has connected to")),
    Rule("rendezvous-timeout", "error", (r"RendezvousConnectionError", r"RendezvousTimeoutError"),
         "The c10d rendezvous store could not be reached (or not all nodes joined) within the rendezvous timeout.",
         _fix("check rdzv_endpoint and that its host is up and reachable; raise rdzv read_timeout only if it is slow"),
         suppresses=("tcpstore-timeout", "master-not-started")),
    Rule("bad-master-addr", "error", (r"any network address of \((\d+|0\.\d+\.\d+\.\d+), \d+\)",
                                      r"connect to \[?(?:::ffff:)?(0\.\d+\.\d+\.\d+)\]?:\d+"),
         "The master address is not a usable address (an all-digit host name is read as an IPv4 number: '05' is "
         "0.0.0.5).", _fix("give master_addr as the master's real IP address or a resolvable name"),
         suppresses=("tcpstore-timeout", "master-not-started")),
    Rule("bad-socket-ifname", "error", (r"Unable to find address for: (\S+)",),
         "GLOO_SOCKET_IFNAME (or NCCL's) names an interface that has no address on this node; Gloo stops at "
         "once and the other nodes wait out their timeout.",
         _fix("set GLOO_SOCKET_IFNAME to an interface that exists on every node (ip -br addr)"),
         summary="no address for interface {0}"),
    Rule("bad-master-addr", "error",
         (r"failed to connect to any network address of \(([\d.]+), (\d+)\)",),
         "Nothing answers at the master address from this node ('No route to host': no host has that address "
         "on the subnet, or a firewall rejects it). torchrun's master_addr is probably not the master's address.",
         _fix("give master_addr as the address of the master's interface that the workers route to (ddptui's "
              "check step shows it), and check that a firewall does not reject it"),
         requires=(r"errno: 113 - No route to host",), summary="no answer at {0}:{1}",
         suppresses=("tcpstore-timeout",)),
    Rule("missing-rank", "error", (r"waiting for clients\. (\d+)/(\d+) clients joined",),
         "The master's store waited for every node, and some never came: a node was not launched, or it points "
         "at another master address or port.",
         _fix("launch every node (ddptui's launch-workers does), with the same master_addr and master_port"),
         summary="{0} of {1} nodes joined the master's store", suppresses=("tcpstore-timeout",)),
    Rule("missing-rank", "error", (r"store based barrier .*\(world_size=(\d+), worker_count=(\d+)",),
         "Not every rank reached init_process_group: one crashed, was never launched, or joined another store.",
         _fix("look for the rank missing from the logs; check every node was launched with the same world size"),
         summary="{1} of {0} ranks reached the barrier"),
    Rule("gid-index", "error", (r"NET/IB : Got completion with error 12, opcode",),
         "RETRY_EXCEEDED on the first RDMA transfer on RoCE: the default GID index does not route between the "
         "nodes (different switches or subnets).",
         _fix("set NCCL_IB_GID_INDEX to the RoCEv2 GID (often 3; check with show_gids)", {"NCCL_IB_GID_INDEX": "3"},
              "all-nodes")),
    Rule("ib-completion-error", "error", (r"NET/IB : Got completion from peer \S+ with (?:status=|error )(\d+)",),
         "An RDMA transfer failed on the fabric (the completion status names the verbs error).",
         _fix("check the fabric (ibstat, link errors), the GID index, and that the same NCCL runs on every node"),
         summary="RDMA completion error {0}"),
    Rule("ib-async-fatal-event", "error", (r"NET/IB : (\S+) async fatal event",),
         "The HCA raised a fatal asynchronous event: a queue pair failed.", _fix("check the HCA firmware and driver; "
         "update them to the same versions on every node"), summary="fatal event on {0}"),
    Rule("p2p-hang", "warning", (r"via P2P/IPC",),
         "GPU peer-to-peer transfers over PCIe hang on some consumer GPUs and platforms (IOMMU/ACS): init succeeds, "
         "then the first collective never finishes.",
         _fix("NCCL_P2P_DISABLE=1 routes intra-node traffic through host memory (slower, but it completes)",
              {"NCCL_P2P_DISABLE": "1"}, "all-nodes"),
         at_end=True, absent=(r"Init COMPLETE", r"ncclCommInitRank comm .* - Init COMPLETE")),
)
