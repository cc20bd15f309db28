"""The diagnosis rules, as data.

A line rule is one entry: the id of the cause (catalog.py holds its severity, words, fix and what
it suppresses), the patterns that are its evidence (substring regexes: NCCL and torch lines carry
launcher prefixes, so never anchor at the line start), a summary, and optionally the patterns
that settle it (a worker that waited for the master and then joined). A rule carries its own
severity or fix only where its variant of the cause needs one (noted at the rule).

Where the meaning of the matched values decides the cause (an errno and the address it was met
at, a signal number, an IB event), a rule names a `decide` function (classify.py) that maps the
match groups to the id; the rule's own id is then only the one it gives most often.

A failure sign (signs.py) is a line that says a node failed without saying why (a Python
exception, a non-zero exit code, a signal, an NCCL WARN): when no rule explains anything on that
node by the end, the engine raises `unrecognized-failure` with these lines as its evidence.

The cross-node rules, which compare a fact across the nodes of a job, are in cross_rules.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from . import classify as C
from .catalog import DEFAULT, Default
from .model import Fix

# match groups -> (id, summary) or (id, summary, its own fix), or None: the line decides nothing
Decide = Callable[[tuple], "tuple[str, str] | tuple[str, str, Fix] | None"]


@dataclass(frozen=True)
class Rule:
    id: str  # a catalog id
    patterns: tuple[str, ...]
    summary: str = ""  # may use {0}, {1}... from the first pattern's groups; else the catalog's title
    requires: tuple[str, ...] = ()  # every one of these must also have been seen on the same node
    resolved_by: tuple[str, ...] = ()
    at_end: bool = False  # judged when the log ends (or the run does), not line by line
    absent: tuple[str, ...] = ()  # at_end rules: none of these may have been seen on the node
    info_unless_failed: bool = False  # at_end rules: information where the node did not fail, or something else says why
    severity: str | None = None  # this variant's own severity; None: the catalog's
    fix: Fix | None | Default = DEFAULT  # this variant's own fix; DEFAULT: the catalog's
    decide: Decide | None = None
    # a regex of literals that every match of the patterns holds, rarer than their longest literal:
    # the prefilter finds their lines by it (anchored_on); `patterns` stay as written (grep reads them)
    anchor: str | None = None
    compiled: tuple[re.Pattern, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        ps = self.patterns if self.anchor is None else tuple(anchored_on(p, self.anchor) for p in self.patterns)
        object.__setattr__(self, "compiled", tuple(re.compile(p) for p in ps))


def anchored_on(pattern: str, rarer: str) -> str:
    """`pattern`, whose lines the prefilter finds by `rarer` instead of its longest literal: NCCL's
    `NET/Socket : Using [0]IF:ADDR`, which wrong-interface reads, is printed by every rank, and
    `rarer` names only the bad interfaces. Every match holds `rarer` by construction; the matches,
    and their groups, are `pattern`'s (a lookahead from the line's start)."""
    return rf"^(?=.*?(?:{pattern})).*?(?:{rarer})"


# NCCL's RAS service (2.24+) warning about itself, not about the job
NCCL_RAS = r"ras/\w+\.cc:\d+ NCCL WARN Call to bind failed"
# RCCL's advice at init, printed by every rank where /proc/cmdline lacks amd_iommu=on or iommu=pt,
# HSA_FORCE_FINE_GRAIN_PCIE is unset, or the kernel balances NUMA (RCCL's init.cc: WARN(...) and init
# goes on), or (2.30) AMD SMI is not asked for: on most AMD machines, healthy jobs included (corpus
# 161, 165, 169, 170). It is about the machine, not a failure of the job
_RCCL_ADVICE = (r'Missing "[^"]+" from (?:kernel command line|environment)|NUMA auto balancing enabled'
                r"|RCCL_USE_AMD_SMI_LIB not set")  # 2.30: "... Rerun with RCCL_USE_AMD_SMI_LIB=1 to enable ..."
RCCL_ADVICE = r"NCCL WARN (?:" + _RCCL_ADVICE + ")"
# a WARN that says the job went wrong: not the libraries NCCL looks for and lacks, nor RCCL's advice
_WARN_OF_A_FAILURE = r" WARN (?!Failed to open lib|" + _RCCL_ADVICE + ")"

_VIRTUAL = r"veth\w*|docker\w*|virbr\w*|br-\w+|cni\w*|flannel\S*|cali\w+"  # container and VM bridges, their pairs
_VIRTUAL_HEADS = ("veth", "docker", "virbr", "br-", "cni", "flannel", "cali")  # what the prefilter finds them by

RULES: tuple[Rule, ...] = (
    Rule("ib-socket-mismatch", (r"socketFinalizeAccept: wrong type ([34]) != ([34])",),
         summary="socket type {0} met type {1}: NET/IB on one side, NET/Socket on the other"),
    Rule("ib-not-detected", (r"NET/IB : No device found",), requires=(r"NCCL_IB_DISABLE set by environment to 0",)),
    # AWS's OFI plugin finds no EFA device: /dev/infiniband not in the container (aws/aws-ofi-nccl#1020)
    Rule("ib-not-detected", (r"NET/OFI (?:OFI )?fi_getinfo\(\) call failed: No data available",),
         summary="the OFI net plugin finds no EFA device (fi_getinfo: No data available)"),
    # NCCL_NET=IB (or only IB left to it) and no IB device: NCCL has no network and init fails
    # (NCCL 2.28.9 on an H200 without IB, recorded: tests/data/recorded/gpu/44-net-ib-forced-no-ib-h200.log)
    Rule("ib-not-detected", (r"NCCL WARN Failed to initialize any NET plugin",), requires=(r"NET/IB : No device found",),
         severity="error", summary="NCCL found no IB device and may use no other network (NCCL_NET): init fails",
         fix=Fix(scope="manual", explain="unset NCCL_NET (NCCL then takes TCP sockets where there is no IB), or make "
                                         "the HCAs visible to the job (/dev/infiniband in the container; ibv_devinfo)")),
    # NCCL_NET names a network no loaded plugin provides: the plugin NCCL_NET_PLUGIN names was not found
    # (CSCS's NCCL known issues: NCCL_NET_PLUGIN=ofi looks for libnccl-net-ofi.so)
    Rule("ib-not-detected", (r"NCCL WARN Error: network ([\w .+/-]+?) not found",), severity="error",
         summary="NCCL_NET asks for the network {0}, which no loaded net plugin provides: init fails",
         fix=Fix(scope="manual", explain="make NCCL load the plugin that provides it: NCCL_NET_PLUGIN unset (it finds "
                                         "libnccl-net.so) or set to the plugin's file name; or unset NCCL_NET")),
    Rule("ib-device-open-failed", (r"NET/IB : Unable to open device (\S+)", r"Call to ibv_open_device failed"),
         summary="cannot open IB device {0}"),
    Rule("bad-socket-ifname", (r"neither AF_INET\(2\) nor AF_INET6\(10\)",),
         requires=(r"NCCL_SOCKET_IFNAME set (?:by environment )?to",),
         summary="NCCL_SOCKET_IFNAME names no interface with an address here"),
    # wrong-interface, lo: its own fix (exclude lo and docker; the catalog's also excludes veth)
    Rule("wrong-interface", (r"(?:Bootstrap|NET/Socket|NET) : Using (?:\[\d\])?(?:interface )?lo:127\.",),
         anchor=r"lo:127\.", summary="NCCL uses lo (127.0.0.1) for inter-node traffic",
         fix=Fix(env={"NCCL_SOCKET_IFNAME": "^lo,docker"}, scope="all-nodes",
                 explain="pin NCCL_SOCKET_IFNAME to the interface that routes between the nodes (e.g. eth0); never "
                         "lo for multi-node")),
    # a virtual interface NCCL takes first: the bootstrap and the first socket use it
    Rule("wrong-interface", (r"(?:Bootstrap|NET/Socket) : Using (?:\[0\])?(" + _VIRTUAL + "):",),
         anchor="|".join(rf"\[0\]{v}|Using {v}" for v in _VIRTUAL_HEADS), summary="NCCL uses the virtual interface {0}"),
    # one it lists after a real one carries only the channels NCCL puts on it: healthy jobs list docker0 or a veth
    # second and run (pytorch/pytorch#68893, facebookresearch/fairseq#2329), failing ones too (corpus 13, 143,
    # 284), and their pastes are alike: the cause where the node failed, else a word on it
    Rule("wrong-interface", (r"(?:Bootstrap|NET/Socket) : Using .*?\[[1-9]\d*\](" + _VIRTUAL + "):",),
         anchor=r"\](?:" + "|".join(_VIRTUAL_HEADS) + ")", at_end=True, info_unless_failed=True,
         summary="NCCL also lists the virtual interface {0}: a channel NCCL puts on it does not reach the other nodes"),
    # the interface NCCL takes first holds a link-local address (169.254.x.x: a BMC's usb0 host interface on
    # GH200 boards, uccl-project/uccl#1034: "NCCL bootstrap picks the 169.254.3.1 link-local NIC and the 2-node
    # test fails"); its peers' connects to it fail (classify: link-local), a node alone runs
    Rule("wrong-interface", (r"(?:Bootstrap|NET/Socket) : Using (?:\[0\])?([^\s:\[\]<]+):169\.254\.",),
         anchor=r":169\.254\.", at_end=True, info_unless_failed=True, fix=C.LINK_LOCAL_FIX,
         summary="NCCL uses {0}, whose address is link-local (169.254.x.x): no other host reaches it"),
    # NCCL's sockets (bootstrap, proxy, net), old and new wordings: the errno and the peer decide
    Rule("firewall-or-unreachable",
         (r"Connect to \[?([^\s<\]]+)\]?<\d+> (?:failed : |returned \d+\()([A-Za-z ]+)",
          r"Call to connect (?:failed|timeout) : ()([A-Za-z ]+)"), decide=C.decide_nccl_connect),
    # in exclusive-process compute mode the second process to open a GPU fails at once (NVIDIA/nccl-tests#369:
    # Open MPI's OFI HMEM support opened GPU 0 in every rank; OMPI_MCA_mtl_ofi_disable_hmem=true fixed it)
    Rule("duplicate-gpu", (r"CUDA-capable device\(s\) is/are busy or unavailable",),
         summary="another process holds this GPU (exclusive-process compute mode)"),
    Rule("duplicate-gpu", (r"Duplicate GPU detected : rank (\d+) and rank (\d+) both on CUDA device (\w+)",),
         summary="ranks {0} and {1} both on CUDA device {2}"),
    Rule("duplicate-rank", (r"Bootstrap Root : rank (\d+) of (\d+) ranks has already checked in",),
         summary="rank {0} of {1} checked in twice"),
    # NCCL 2.19+ retries a connect a number of times before it fails; its last retry is the failure, which the
    # errno decides (hiyouga/LlamaFactory#8045: `No route to host, retrying (34/34)`)
    Rule("firewall-or-unreachable", (r"socketPollConnect: connect returned ([A-Za-z ]+), retrying \((\d+)/(\d+)\)",),
         decide=C.decide_nccl_retry),
    # MPI's UCX told to reach a peer at 172.17.0.1, the address Docker gives docker0 on every host: the peer's
    # UCX picked docker0 (a blog's srun + pyxis nccl-tests; pinning Open MPI's and NCCL's interfaces fixed it)
    Rule("wrong-interface", (r"UCX +ERROR +connect\(fd=\d+, dest_addr=(172\.17\.0\.1):\d+\) failed",),
         summary="MPI's UCX connects to {0}, docker0's address: a peer's UCX picked docker0",
         fix=Fix(scope="manual", explain="keep MPI off docker0: OMPI_MCA_btl_tcp_if_include=IFACE and UCX_NET_DEVICES="
                                         "IFACE (the interface between the nodes), or OMPI_MCA_pml=^ucx")),
    # Gloo's pairs: old "connect [addr]:port: errno text", new "SO_ERROR: errno text, remote=[addr]"
    Rule("loopback-hostname", (r"connect \[([^\]]+)\]:\d+: ([A-Za-z ]+)", r"SO_ERROR: ([A-Za-z ]+), remote=\[([^\]]+)\]"),
         decide=C.decide_gloo_connect),
    # Gloo's pair gave up connecting within its deadline ("Connect timeout [peer]", in connectFullMesh):
    # the SYN went unanswered, so something between the nodes drops it (the errno decides, as above)
    Rule("firewall-or-unreachable", (r"\] Connect timeout \[([^\]]*)\]",), decide=C.decide_gloo_connect_timeout),
    # hostname-resolution, the node's own name: a warning (a 2-node job can still pass), and an env fix
    Rule("hostname-resolution", (r"Unable to resolve hostname to a \(local\) address",),
         summary="the node's own hostname does not resolve", severity="warning",
         fix=Fix(env={"GLOO_SOCKET_IFNAME": "eth0"}, scope="all-nodes",
                 explain="make the hostname resolve to the node's address (/etc/hosts or DNS), or name the "
                         "interface")),
    # a launcher that reaches the nodes over ssh (DeepSpeed's, pdsh) cannot resolve a node's name from its
    # hostfile (thu-coai/EVA#4: a placeholder `node-0`; volcano-sh/volcano#2952: a pod's name not in DNS)
    Rule("hostname-resolution", (r"ssh: Could not resolve hostname ([^\s:]+): ",),
         summary="ssh cannot resolve the node name {0}"),
    Rule("hostname-resolution",
         (r"failed to connect to \[([A-Za-z][\w.-]*)\]:(\d+) \(errno",),
         requires=(r"any network address of \(\d+\.\d+\.\d+\.\d+, \d+\)",),
         summary="connecting to the name {0} instead of the address"),
    Rule("cuda-driver-mismatch", (r"CUDA driver version is insufficient for CUDA runtime version",)),
    # cudaErrorSystemNotReady (802), as nccl-tests, torch's C++ and its Python warning word it
    Rule("fabric-manager-down", (r"system not yet initialized", r"CUDA_ERROR_SYSTEM_NOT_READY|cudaErrorSystemNotReady")),
    # CUDA's error 214 as torch and the driver API word it; a failing GPU's Xids (NVIDIA's catalog: ECC, NVLink, off the
    # bus, GSP; not 13/31/43, an application's) and nvidia-smi's word for a lost GPU, where a log holds them (326-332)
    Rule("gpu-hardware-fault", (r"uncorrectable ECC error encountered|CUDA_ERROR_ECC_UNCORRECTABLE|cudaErrorECCUncorrectable",),
         summary="CUDA: uncorrectable ECC error (the GPU's memory failed)"),
    Rule("gpu-hardware-fault", (r"NVRM: Xid \((?:PCI:)?([\w:.]+)\): (48|64|74|79|94|95|119|120),",
                                r"(?:GPU has|NVRM:) fallen off the bus", C.GPU_LOST),
         summary="the driver reports Xid {1} on the GPU at {0}"),
    Rule("nvls-setup-failed", (r"transport/nvls\.cc:\d+ NCCL WARN Cuda failure (\d+) '([^']*)",),
         summary="NVLS setup failed with CUDA error {0} ({1})"),
    Rule("nvls-setup-failed", (r"Failed to bind NVLink SHARP \(NVLS\) Multicast memory",),  # NCCL 2.2x's own words
         summary="NCCL could not bind NVLS multicast memory (the Fabric Manager or the NVSwitches)"),
    Rule("shm-not-writable", (r"Call to shm_open failed : Permission denied",)),
    Rule("shm-too-small", (r"failed to extend /dev/shm\S* to \d+ bytes", r"posix_fallocate failed : No space left on device",
                           r"Error while creating shared memory segment", r"insufficient shared memory \(shm\)")),
    # Slurm's cgroup OOM killer: slurmstepd reports it, srun names the task (LUMI's training Q&A)
    Rule("host-oom-exit-9", (r"Detected \d+ oom_kill events? in StepId=", r"srun: error: \S+: tasks? [\d,-]+: Out Of Memory"),
         summary="Slurm killed a task for exceeding its memory (oom_kill)"),
    Rule("watchdog-timeout", (r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+)",),
         summary="{1} #{0} timed out"),
    # torch 2.5 and later: `[rank3]:[E227 ...] ... Timeout at NCCL work: 32, last enqueued NCCL work: 32, last
    # completed NCCL work: 31.` (sgl-project/sglang#3932)
    Rule("watchdog-timeout", (r"Timeout at NCCL work: (\d+), last enqueued NCCL work: \d+, last completed NCCL work: (\d+)",),
         summary="NCCL work #{0} timed out (the last completed: #{1})"),
    # Gloo's collectives: a send or recv that did not complete within the process group timeout
    # torch 2.4+: a rank's watchdog saw its own collective time out and tells the others to dump their
    # flight records (modelscope/ms-swift#6301: a 4-node ZeRO-3 job, the timeout line itself not pasted)
    Rule("watchdog-timeout", (r"Received a dump signal due to a collective timeout from (this local rank|rank \d+)",),
         summary="a collective timed out (the dump signal came from {0})"),
    Rule("watchdog-timeout", (r"Timed out waiting (\d+)ms for (send|recv) operation to complete",),
         summary="a Gloo {1} did not complete in {0} ms"),
    Rule("collective-desync", (r"Detected mismatch between collectives on ranks",)),
    # ProcessGroupNCCL's desync report (TORCH_NCCL_DESYNC_DEBUG=1) names the rank the others wait for
    # (pytorch/pytorch#152623: rank 7 never joined #183; the maintainer: a desync)
    Rule("collective-desync", (r"\[(\d+)\] finished collective #(\d+), but didn't join collective #(\d+)",),
         summary="rank {0} finished collective #{1} but never joined #{2}: it fell behind, hangs or died, or "
                 "runs other collectives",
         fix=Fix(scope="manual", explain="see what the rank the report names was doing after the collective it "
                                         "finished: its own log and traceback, or `py-spy dump --pid PID` while it "
                                         "hangs; then make every rank run the same collectives in the same order")),
    # NCCL 2.7.8 (NVIDIA/nccl#531) said it without the comma and the second "size"
    Rule("collective-mismatch", (r"collective mismatch error,? local size (\d+) remote (?:size )?(\d+)",),
         summary="local size {0}, remote size {1}"),
    Rule("collective-mismatch", (r"Mismatched collective detected.*? around rank (\d+)",),
         summary="NCCL saw a mismatched collective around rank {0}"),
    # a worker killed by a signal, as torchrun (exitcode: -N, "Signal N (SIGX) received"), the old
    # launcher ("died with <Signals.SIGX: N>") and a shell say it: the signal number decides
    Rule("segfault-exit-11", (r"exitcode\s*:?\s*-(\d+)", r"died with <Signals\.SIG\w+: (\d+)>",
                              r"[Ss]ignal (\d+) \(SIG\w+\) received", r"exits with return code = -(\d+)"),
         decide=C.decide_signal),
    Rule("segfault-exit-11", (r"Segmentation fault",)),
    # torch elastic logs the barrier's error and goes on (agent/server/api.py `_exit_barrier`): after
    # its workers succeeded, the node's exception lines are the agent's, not a failure
    Rule("exit-barrier-race", (r"Error waiting on exit barrier",),
         requires=(r"Local worker group finished \((?:WorkerState\.)?SUCCEEDED\)",)),
    Rule("remote-rank-died", (r"ncclRemoteError", r"NCCL error: remote process exited or there was a network error",
                              r"Call to recv from \S+ failed : (Broken pipe|Connection reset by peer)",
                              r"Connection closed by peer \[([\d.]+)\]", r"Connection reset by peer \[([\d.]+)\]")),
    Rule("tcpstore-timeout", (r"client socket has timed out after (\d+)(ms|s) while trying to connect to \(?([\w.:-]+)",),
         summary="gave up after {0}{1} connecting to {2}"),
    Rule("tcpstore-timeout", (r"connect\(\) timed out\. Original timeout was (\d+) ms",),
         summary="gave up connecting to the master's store after {0} ms"),
    # the store answered, the key never came: rank 0 had not published its NCCL id (SpongebBob/Finetune-
    # ChatGLM2-6B#13: rank 0 still tokenizing 2.3M samples; a longer timeout fixed it)
    Rule("tcpstore-timeout", (r"retrieving ncclUniqueId from \[(\d+)\] via c10d key-value store by key '[^']*', "
                              r"but store->get\('[^']*'\) got error: Socket Timeout",),
         summary="waited for rank {0}'s NCCL id in the store until the timeout"),
    # the same store timeout while torchrun's agent creates the c10d rendezvous store
    Rule("rendezvous-timeout", (r"connect\(\) timed out\. Original timeout was (\d+) ms",),
         requires=(r"rendezvous/c10d_rendezvous_backend",), summary="the c10d rendezvous store did not answer in {0} ms"),
    # not NCCL's RAS service (2.24+), whose client socket is one port per host, localhost:28028: the
    # other processes on the host print `ras/client_support.cc:181 NCCL WARN Call to bind failed:
    # Address already in use` and run on (corpus 156, a healthy job)
    Rule("port-in-use", (r"failed to bind to \S+ \(errno: 98 - Address already in use\)", r"EADDRINUSE",
                         r"^(?!.*" + NCCL_RAS + r").*[Aa]ddress already in use")),
    Rule("master-not-started",
         (r"is not yet listening \(Error: 111 - Connection refused\), retrying",
          r"TCP client failed to connect/validate to host (\S+) - retrying"),
         summary="waits for the master's store, which does not listen yet",
         resolved_by=(r"has started to listen", r"Rendezvous complete for workers", r"init_process_group done",
                      r"client socket has connected to")),
    # not the agent's warning that it could not shut the rendezvous down (or send a heartbeat) "due to
    # an error of type RendezvousConnectionError": a healthy c10d job's workers print it when the store's
    # host finished first (tests/data/recorded/24-*)
    Rule("rendezvous-timeout", (r"(?<!error of type )RendezvousConnectionError", r"RendezvousTimeoutError")),
    # Horovod's Gloo rendezvous, an HTTP store on the launcher: its keys did not all come in time
    # (horovod/horovod#2015: 50 nodes; --gloo-timeout-seconds 240 fixed it)
    Rule("rendezvous-timeout", (r"http_store\.cc:\d+\] Wait timeout for key\(s\): ?(\S*)",),
         summary="Horovod's Gloo rendezvous timed out waiting for key(s) {0} (on many nodes: --gloo-timeout-seconds)"),
    # the agent waited on the store for a key of torchelastic's own rendezvous that never came
    Rule("rendezvous-timeout", (r"wait timeout after (\d+)ms, keys: \S*/torchelastic/(\S+)",),
         summary="torchrun waited {0} ms for the rendezvous key {1}, which no node wrote"),
    # the c10d client's connect to the master's store: the address and the errno decide
    Rule("bad-master-addr", (r"failed to connect to \[?([^\s\]]+?)\]?:(\d+) \(errno: (\d+) - ",),
         decide=C.decide_store_connect),
    Rule("bad-master-addr", (r"any network address of \(([^,\s]+), (\d+)\)",), decide=C.decide_master_name),
    # torchrun's rendezvous result names the master as the node itself while the node rendezvoused
    # with another host: the master's agent was started with master_addr localhost, and told every
    # node so (pytorch/pytorch#76367). Agents that all rendezvous on localhost (one host) are fine
    Rule("bad-master-addr", (r"(?:^|\s)master_addr=(localhost|127(?:\.\d+){3}|::1)\s*$",),
         requires=(r"\brdzv_endpoint\s*: +(?!localhost:|127\.|\[?::1\]?:)\S+:\d+",),
         summary="the rendezvous gave this node master_addr={0}: the master node was started with master_addr "
                 "{0}, which on every other node is that node itself"),
    # DeepSpeed's launcher found no address for the first host (its `hostname -I` printed nothing) and
    # started every node with an empty --master_addr (deepspeedai/DeepSpeed#2612, the maintainer's answer)
    Rule("bad-master-addr", (r"Using IP address of  for node \S", r"--master_addr=(?:\s|$)"),
         summary="master_addr is empty: the launcher found no address for the first node"),
    # a master name that does not resolve: a name the rendezvous published (another node's
    # hostname) is a resolution problem; MASTER_ADDR itself, most often a master not up yet
    # (Kubernetes creates the master's service name with its pod)
    Rule("hostname-resolution", (r"host not found",), requires=(r"TCPStore server at [A-Za-z]",),
         summary="a host name published by the rendezvous does not resolve"),
    Rule("master-not-started", (r"host not found",), summary="the master's name does not resolve (yet)"),
    Rule("bad-socket-ifname", (r"Unable to find address for: (\S+)",), summary="no address for interface {0}"),
    # NCCL's interface filter let nothing through (its WARN, or the "Last error:" of an ncclInternalError;
    # NCCL 2.4-2.7 said it in net_socket (Tencent/PocketFlow#105: NCCL_SOCKET_IFNAME=eth1 in a container
    # that has only eth0), and where no interface has an IPv4 address tried a socket it could not make
    # (NVIDIA/nccl-tests#14 in a container, NVIDIA/nccl#210: "no IP interface found on the machine")
    Rule("bad-socket-ifname", (r"Bootstrap : no socket interface found", r"NET/Socket : no interface found",
                               r"Socket creation failed : Address family not supported by protocol"),
         summary="NCCL found no interface that NCCL_SOCKET_IFNAME (or its default filter) allows"),
    # c10d's getaddrinfo of a host name: the address family and the gai error decide
    Rule("hostname-resolution",
         (r"The (IPv[46]) network addresses of \(([^,\s]+), (\d+)\) cannot be retrieved \(gai error: (-?\d+)",),
         decide=C.decide_gai),
    Rule("missing-rank", (r"waiting for clients\. (\d+)/(\d+) clients joined",),
         summary="{0} of {1} nodes joined the master's store"),
    Rule("missing-rank", (r"store based barrier .*\(world_size=(\d+), worker_count=(\d+)",),
         decide=C.decide_store_barrier),
    Rule("gid-index", (r"NET/IB : Got completion with error 12, opcode",)),
    # the queue pair cannot be moved to its GID: the index is not in this node's table (NVIDIA/nccl#718; not
    # ibv_modify_qp's "Connection timed out" of corpus 177, whose cause the thread never found)
    Rule("gid-index", (r"Call to ibv_modify_qp failed with error No such device",),
         summary="the GID index is not on this node's HCA port (ibv_modify_qp: No such device)"),
    # `NET/IB : Got`, or `NET/IB: Got` in NCCL's ib_plugin.c (deepspeedai/DeepSpeed#6875)
    # libmlx5's own report of a completion with error (OpenRLHF/OpenRLHF#621: then the broadcast's peer died)
    Rule("ib-completion-error", (r"mlx5: \S+: got completion with error",), summary="the HCA reported a completion with error"),
    Rule("ib-completion-error", (r"NET/IB ?: Got completion from peer \S+ with (?:status=|error )(\d+)",),
         summary="RDMA completion error {0}"),
    Rule("ib-async-fatal-event", (r"NET/IB : (\S+) async fatal event",), summary="fatal event on {0}"),
    Rule("ib-async-fatal-event", (r"NET/IB : Got async event : ([\w ]+)",), decide=C.decide_ib_event),
    Rule("gpu-count-short", (r"invalid device ordinal", r"no CUDA-capable device is detected")),
    # RDMA under a low locked-memory limit, where the library says so: UCX 1.14+ adds the limit to an ENOMEM
    # (". Please set" or " : Please set"; openucx/ucx#8229, where 64 KiB was the cause), libibverbs warns at
    # load at 32 KiB or less for a non-root process. A job that needs no RDMA runs on with it (ucx#8746: a
    # node without InfiniBand): the cause where the node failed, else a word. NCCL's own ENOMEM lines are not
    # read so: other causes give them too (a GB10 kernel's memory setting, hunt 17)
    Rule("memlock-too-low", (r"Please set max locked memory \(ulimit -l\) to 'unlimited' \(current: (\d+) kbytes\)",),
         at_end=True, info_unless_failed=True, summary="UCX could not register memory: the locked-memory limit is {0} KiB"),
    Rule("memlock-too-low", (r"RLIMIT_MEMLOCK is (\d+) bytes",), at_end=True, info_unless_failed=True,
         summary="libibverbs: the locked-memory limit is {0} bytes, which severely limits memory registrations"),
    # NVSHMEM's IB transport without the GPUDirect RDMA module (deepseek-ai/DeepEP#223, `modprobe nvidia-peermem`
    # fixed it): the cause where the node failed; a job that needs no IB (one node) runs, and hears of it
    Rule("gpudirect-rdma-missing", (r"neither nv_peer_mem, or nvidia_peermem detected",), at_end=True,
         info_unless_failed=True, summary="NVSHMEM finds no nvidia_peermem module and skips its InfiniBand transport"),
    # NCCL without GPUDirect RDMA to an HCA (NVIDIA/nccl#899: 2.14's "(no module)"; NVIDIA/nccl#1676: 2.22's, without,
    # ~18x slower): it runs, copying through host memory. Never a failure's cause; NET/Socket says it of every NIC
    Rule("gpudirect-rdma-missing", (r"NET/(?:IB|UCX) : GPU Direct RDMA Disabled for HCA \d+ '([^']+)'",), severity="info",
         summary="NCCL has no GPUDirect RDMA to {0}: its InfiniBand/RoCE traffic is copied through host memory"),
    # NCCL's lookup of a NIC by the id its own topology gave it: 2.25 and 2.26 fail so on multi-node
    # jobs, 2.27 fixes it (NVIDIA-NeMo/Speech#13996, NVIDIA-NeMo/Run#266: confirmed by upgrading)
    Rule("nccl-known-bug", (r"Could not find NET with id (\w+)",),
         summary="NCCL lost a NIC of its own topology ('Could not find NET with id {0}'): NCCL 2.25 and 2.26 "
                 "fail so on multi-node jobs; 2.27 fixes it"),
    # a silent hang: not where init completed, nor where NCCL itself reported an error (that is the cause)
    # (an "NCCL error" raised is no silent hang either: NVIDIA/nccl#187's unhandled cuda error in an old log
    # whose rings go via P2P/IPC and that prints no WARN)
    Rule("p2p-hang", (r"via P2P/IPC",),
         at_end=True, absent=(r"Init COMPLETE", r"ncclCommInitRank comm .* - Init COMPLETE", _WARN_OF_A_FAILURE,
                              r"NCCL error")),
    # RCCL said the IOMMU is not in pass-through, and init stopped once it had the GPUs' channels (the
    # P2P connection is next): ROCm/rccl#1129, two MI100s, "Now, the RCCL test works!" with iommu=pt
    Rule("p2p-hang", (r'WARN Missing "iommu=pt" from kernel command line',), requires=(r"P2P Chunksize set to",),
         at_end=True, absent=(r"Init COMPLETE", _WARN_OF_A_FAILURE),
         summary='init stopped connecting the GPUs, and RCCL warned that "iommu=pt" is missing from the kernel command line'),
)
