"""The diagnosis catalog: every cause ddptui can name, defined once.

A cause is an id of the command-line contract (CONTRACTS.md) with its default severity, a title
(short words), the explanation for the user, a default fix, and the ids it explains better when
both are raised. The log rules (rules.py), the cross-node rules, the preflight checks and the
runbook all build their findings with `finding()`, so one id always reads the same; a caller
passes its own fix only when the evidence makes it sharper (the port, the node, the interface).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .model import SEVERITIES, Evidence, Finding, Fix


@dataclass(frozen=True)
class Cause:
    id: str
    severity: str  # the default; a caller may know better (a prediction is a warning, a failure an error)
    title: str  # short words; a finding's summary when the evidence says nothing sharper
    explanation: str
    fix: Fix | None = None
    suppresses: tuple[str, ...] = ()  # ids this one explains better when both are raised
    job_wide: bool = False  # compares the nodes of the job: its suppressions hold on every node
    # a symptom of another rank's failure: it explains a node's failure only where that node shows no
    # error of its own before it (engine._unrecognized); one it shows is the finding, not this
    consequence: bool = False


class Default:
    def __repr__(self) -> str:
        return "<catalog default>"


DEFAULT = Default()  # "the catalog's fix", as opposed to None ("no fix")


def _manual(explain: str, *alternatives: str) -> Fix:
    return Fix(scope="manual", explain=explain, alternatives=alternatives)


def _env(env: dict[str, str], explain: str, *alternatives: str) -> Fix:
    return Fix(env=env, scope="all-nodes", explain=explain, alternatives=alternatives)


# shm-too-small's two ways out, in the words the log's finding and the check's both use
SHM_MORE = "give the container more shared memory (docker --shm-size=8g, a memory-backed emptyDir on Kubernetes)"
SHM_LEFTOVERS = ("where jobs that crashed filled it, remove their segments (`ls -la /dev/shm` on the node: nccl-*, "
                 "psm_* of jobs no longer running), or empty it before each start (llm-d/llm-d#364)")

_CAUSES = (
    # ---- transports, versions, plugins ------------------------------------------------------------
    Cause("ib-socket-mismatch", "error", "NET/IB on some nodes, NET/Socket on others",
          "NCCL picks its network transport on each node by itself; here some nodes use InfiniBand (NET/IB, socket "
          "type 4) and others TCP sockets (NET/Socket, type 3), so their connections cannot meet: the first "
          "inter-node collective fails ('wrong type', 'Connection closed by remote peer') or hangs until the "
          "watchdog fires. Env that reached only some nodes (NCCL_IB_DISABLE, NCCL_SOCKET_IFNAME, NCCL_IB_HCA), or "
          "HCAs that only some nodes see, split the job.",
          _env({"NCCL_IB_DISABLE": "1"}, "the same NCCL_IB_DISABLE on every node: 1 makes all nodes use TCP sockets "
               "(slower than IB, but consistent)",
               "enable IB on every node instead (remove NCCL_IB_DISABLE where it is set, make the HCAs visible "
               "everywhere): the fast choice"),
          suppresses=("remote-rank-died",), job_wide=True),
    Cause("net-plugin-mismatch", "error", "NCCL net plugins differ between the nodes",
          "Some nodes load an external NCCL net plugin (libnccl-net.so, e.g. HPC-X SHARP or aws-ofi-nccl) and "
          "others NCCL's internal one: their transports do not interoperate and the job hangs.",
          _manual("make the net plugin identical on every node (the same plugin on LD_LIBRARY_PATH everywhere, or "
                  "NCCL_NET_PLUGIN=none on all nodes)"), job_wide=True),
    Cause("nccl-version-mismatch", "error", "NCCL versions differ between the nodes",
          "The nodes of one job load different NCCL (or torch/CUDA) libraries: a pip nvidia-nccl wheel on some, the "
          "system's or another wheel on others. They cannot talk reliably: init fails with 'ncclSocketInit: ... "
          "family ...', hangs, or collectives go wrong.",
          _manual("use the same environment on every node: one shared venv or image (the same torch wheel and "
                  "nvidia-nccl-cuXX pin)"), suppresses=("bad-socket-ifname", "net-plugin-mismatch"), job_wide=True),
    Cause("ib-not-detected", "warning", "IB asked for, no IB device found",
          "IB was asked for (NCCL_IB_DISABLE=0, or AWS's OFI plugin for EFA is installed) but NCCL found no "
          "InfiniBand or EFA device: it falls back to TCP sockets, or fails.",
          _manual("make the HCAs visible to the job (rdma-core/libibverbs, /dev/infiniband in the container; on "
                  "AWS the EFA devices, checked with fi_info -p efa) and check with ibv_devinfo; if only some "
                  "nodes see them, the job will also split transports")),
    Cause("ib-device-open-failed", "warning", "an IB device cannot be opened",
          "Some HCAs are listed but cannot be opened (often a container that exposes only some of /dev/infiniband).",
          _manual("restrict NCCL_IB_HCA to the devices the job can open, or expose /dev/infiniband/uverbs* for the "
                  "others"), suppresses=("ib-not-detected",)),  # NCCL finds no device because it cannot open the one there is
    # ---- interfaces and addresses ---------------------------------------------------------------------
    Cause("bad-socket-ifname", "error", "the socket interface named in env does not exist",
          "NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME names an interface that does not exist (or has no address) on "
          "this node, or no interface has one (a container's own network): NCCL or Gloo finds no address to use "
          "and fails at init, and the other nodes wait out their timeout.",
          _manual("set it to an interface that exists on every node (ip -br addr; for NCCL a prefix or ^exclude "
                  "list that matches on all of them also works); a container with none needs --network host")),
    Cause("wrong-interface", "error", "traffic between the nodes would use an interface that does not reach them",
          "NCCL or Gloo (or MPI, for nccl-tests) uses an interface that does not reach the other nodes: the loopback "
          "(127.0.0.1), a container/virtual one (docker0, veth*, cni*...), one whose address is link-local "
          "(169.254.x.x, such as a BMC's usb0), or an IPoIB port with only its IPv6 fe80:: where other nodes use "
          "IPv4. Connections to it are refused or time out ('unhandled system error', 'No route to host'), or init "
          "hangs.",
          _env({"NCCL_SOCKET_IFNAME": "^docker,veth,lo"},
               "pin NCCL_SOCKET_IFNAME to the physical interface (or exclude virtual ones: ^docker,veth,lo)")),
    Cause("loopback-hostname", "error", "the hostname resolves to a loopback address",
          "Gloo (and torch's store for other hosts) binds to the address the hostname resolves to; when that is a "
          "loopback address (127.0.1.1 in Debian's /etc/hosts), the other nodes are told to connect to it: "
          "'Connection refused' or a timeout.",
          _env({"GLOO_SOCKET_IFNAME": "eth0"}, "set GLOO_SOCKET_IFNAME to the interface that routes to the other "
                                                "nodes, or fix /etc/hosts")),
    Cause("hostname-resolution", "error", "a host name does not resolve to the right address",
          "A name does not lead where it should. When a node's own hostname does not resolve, Gloo falls back to the "
          "loopback address and advertises 127.0.0.1 to the other ranks (a 2-node job can still pass: the peer may "
          "connect first; with more ranks connections to it are refused or time out). When the numeric master address "
          "is turned back into a name (a reverse lookup through /etc/hosts), it may not lead to the master.",
          _manual("make the names resolve to the right addresses on every node (/etc/hosts or DNS), or remove the "
                  "stale /etc/hosts entry"),
          suppresses=("loopback-hostname", "bad-master-addr", "master-not-started")),
    Cause("bad-master-addr", "error", "master_addr does not lead to the master",
          "The master address is not usable from this node: it is not an address at all (an all-digit host name is "
          "read as an IPv4 number: '05' is 0.0.0.5), it names the node itself (the master's agent was started with "
          "master_addr localhost and the rendezvous passed that on to every node), it is empty (a launcher found no "
          "address for the first host), or nothing answers there ('No route to host': no host has that address on the "
          "subnet, or a firewall rejects it).",
          _manual("give master_addr as the address of the master's interface that the workers route to (ddptui's "
                  "check step shows it) or a name that resolves to it, and check that a firewall does not reject it"),
          suppresses=("tcpstore-timeout", "master-not-started")),
    Cause("firewall-or-unreachable", "error", "a TCP connection between the nodes does not get through",
          "A TCP connection between the nodes did not get through: a firewall drops or rejects it, or there is no "
          "route to the address a node gave (NCCL or Gloo took an interface the others cannot reach). torchrun waits "
          "out its rendezvous timeout in silence; NCCL and Gloo also open ephemeral ports besides the rendezvous port.",
          _manual("open TCP between the nodes on the interface NCCL/Gloo use, for the master port and the ephemeral "
                  "ports (test with nc -l PORT / nc NODE PORT), or run containers with --network host; where the "
                  "address is on a network the others cannot reach, set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) "
                  "to the interface that routes between the nodes"),
          suppresses=("remote-rank-died",)),
    # ---- rendezvous ----------------------------------------------------------------------------------
    Cause("master-not-started", "warning", "a worker waits for a master that is not running",
          "A worker started before the master: it is waiting for the master's rendezvous store and will time out "
          "(rdzv_timeout, 900 s by default) unless the master starts.",
          _manual("start the master (run launch-master); the worker joins as soon as its port listens")),
    Cause("rendezvous-timeout", "error", "the rendezvous timed out",
          "The c10d rendezvous store could not be reached (or not all nodes joined) within the rendezvous timeout.",
          _manual("check rdzv_endpoint and that its host is up and reachable; raise rdzv read_timeout only if it is "
                  "slow"),
          suppresses=("tcpstore-timeout", "master-not-started")),
    Cause("tcpstore-timeout", "error", "the master's store could not be reached",
          "This node's requests to the rendezvous store on the master timed out: the master was not started, "
          "listens elsewhere, or a firewall drops the port; or the store answered and rank 0 never wrote what the "
          "others wait for (its NCCL id): it crashed, or is still busy before its first collective (a long data "
          "preparation).",
          _manual("start the master first (ddptui does), check master_addr/master_port, and open the port; where "
                  "rank 0 prepares data before init, do it before init_process_group or raise its timeout")),
    Cause("port-in-use", "error", "the master port is already taken",
          "The rendezvous port is taken on the master (another job, or a previous run's leftover): torchrun's "
          "TCPStore cannot listen there (EADDRINUSE), and the workers hang until their timeout.",
          _manual("stop what listens on the master's port (`ss -ltnp` on the master names it, with its "
                  "pid) or set job.master_port to a free port")),
    # ---- ranks and processes -------------------------------------------------------------------------
    Cause("missing-rank", "error", "not every node or rank joined",
          "Not every node or rank joined: one was never launched, crashed before init_process_group, or points at "
          "another master address, port or store.",
          _manual("launch every node (ddptui's launch-workers does) with the same master_addr, master_port and "
                  "world size; look for the rank missing from the logs"),
          suppresses=("tcpstore-timeout",)),
    Cause("ranks-not-joined", "error", "the nodes did not join as one job",
          "The nodes did not join one job: each formed its own communicator (nnodes, world size or the rendezvous "
          "differ between the nodes, or the launcher started a separate job on each), or torchrun was started with "
          "a different nnodes on some nodes: an agent that expects more nodes waits for them (torchrun does not "
          "check; it may even train, then hang at the exit barrier).",
          _manual("start every node with the same nnodes, master_addr, master_port and rendezvous id (ddptui's plan "
                  "does)"), job_wide=True),
    Cause("duplicate-rank", "error", "a rank checked in twice",
          "Two processes claimed the same rank: node ranks or local ranks are wrong (both nodes started as "
          "node_rank 0, or the launcher's rank env was overridden), or, under Slurm, a framework that starts its "
          "own processes (Lightning) was given one task a node and every node started ranks 0.. as the first.",
          _manual("give every node its own node_rank (ddptui's static plan does), and do not set RANK yourself; "
                  "under Slurm with Lightning, ask for --ntasks-per-node equal to the devices a node")),
    Cause("duplicate-gpu", "error", "two ranks on one GPU",
          "Two ranks on one node opened the same GPU: the script does not call torch.cuda.set_device(LOCAL_RANK), or "
          "CUDA_VISIBLE_DEVICES hides the others. In exclusive-process compute mode the second process fails at once "
          "('busy or unavailable'), whoever it is: another rank, a library that opens GPU 0 in every rank (Open MPI's "
          "OFI support of GPU memory), another job.",
          _manual("set the device from LOCAL_RANK before init_process_group, and do not restrict "
                  "CUDA_VISIBLE_DEVICES to one GPU")),
    Cause("nproc-mismatch", "warning", "nproc_per_node differs between the nodes",
          "nproc_per_node differs by node. torchrun does not fail on this: the world size silently becomes the "
          "sum, and code that assumes equal nodes (ranks per node, data sharding) goes wrong.",
          _manual("give every node the same nproc_per_node, unless you mean it"), job_wide=True),
    Cause("gpu-count-short", "error", "fewer GPUs than processes",
          "NCCL needs one GPU per process; extra ranks would share a GPU and fail with 'Duplicate GPU detected'. "
          "'invalid device ordinal' says a process asked for a GPU index the node does not have: more processes "
          "than GPUs, CUDA_VISIBLE_DEVICES hiding some, or, when only nodes after the first fail, code that picks "
          "the GPU by the global RANK instead of LOCAL_RANK (LMCache/LMCache#1988).",
          _manual("set nproc_per_node to the number of GPUs on the node, and pick each process' GPU by LOCAL_RANK")),
    Cause("cuda-driver-mismatch", "error", "the NVIDIA driver is too old for this CUDA",
          "The NVIDIA driver on this node is older than the CUDA runtime that torch/NCCL was built with.",
          _manual("upgrade the driver, or install a torch build for the CUDA version the driver supports "
                  "(nvidia-smi shows it)")),
    Cause("fabric-manager-down", "error", "CUDA is not ready: the NVSwitch fabric is not set up (Fabric Manager)",
          "CUDA error 802, 'system not yet initialized': on NVSwitch machines (HGX/DGX A100, H100, H200, B200) CUDA "
          "starts only once NVIDIA's Fabric Manager has set the NVSwitch fabric up (nvidia-smi -q: Fabric State "
          "Completed, Status Success), and on this node it is not installed, not running, or of another version "
          "than the driver. Every GPU there fails at its first CUDA call (torch: no GPU available); the other nodes "
          "wait for its ranks.",
          _manual("on that node, install nvidia-fabricmanager of exactly the driver's version (nvidia-smi's Driver "
                  "Version) and start it: systemctl enable --now nvidia-fabricmanager; nvidia-smi -q then shows "
                  "the Fabric State as Completed",
                  "where CUDA itself runs and only NCCL's call fails with 802 at the first collective (a GB200 node, "
                  "NVIDIA/nccl#1769: \"runs without any errors when i set NCCL_NVLS_ENABLE=0\"), the NVLink fabric "
                  "is not ready for NCCL's NVLS multicast: NCCL_NVLS_ENABLE=0 runs the job without it, while the "
                  "fabric (IMEX, the NVLink switches) is put in order")),
    # CUDA's cudaErrorECCUncorrectable (214), the driver's Xids and the GPU's remapped rows (NVIDIA's GPU Memory
    # Error Management and Xid guides); corpus 326-332, tests/data/corpus/nvidia-smi/11-12
    Cause("gpu-hardware-fault", "error", "a GPU of this node is failing (memory errors, lost, or not answering)",
          "The GPU itself failed, not the job: CUDA said 'uncorrectable ECC error encountered' (its memory returned "
          "data it could not correct, and the driver stopped every process on it), or the driver reports the GPU "
          "failing (an Xid for its memory, NVLink, the bus or its firmware: 48, 64, 74, 79 'fallen off the bus', "
          "94, 95, 119, 120), or nvidia-smi can no longer reach it. The job cannot go on on that GPU; the other ranks only wait for it or "
          "lose their connection to it. A relaunch on the same GPU fails again until it is reset, and a GPU that "
          "keeps failing must be taken out of service.",
          _manual("on that node: nvidia-smi -q -d ECC,ROW_REMAPPER (or PAGE_RETIREMENT on older GPUs) shows the "
                  "errors and whether rows wait for a reset (Pending: Yes), dmesg | grep -i xid the driver's words; "
                  "reset the GPU (nvidia-smi -r with no process on it) or reboot the node; if the errors come back "
                  "or a remapping failed, drain it (Slurm: scontrol update nodename=NODE state=drain reason=\"GPU "
                  "ECC\") and run without it (sbatch --exclude=NODE) until the GPU is replaced"),
          suppresses=("remote-rank-died", "watchdog-timeout")),
    # NVIDIA's maintainers on NVIDIA/nccl#976, #1338, #1488, nccl-tests#276, pytorch#150852: "usually caused by
    # the Fabric Manager being stopped and restarted without an intervening GPU reset"
    Cause("memlock-too-low", "error", "the locked-memory limit is too low for InfiniBand/RDMA",
          "RDMA (NCCL's InfiniBand/RoCE transport, EFA, UCX, NVSHMEM) registers its buffers with the HCA, which "
          "pins them, and the kernel counts pinned memory against the process's locked-memory limit (ulimit -l) "
          "unless it has CAP_IPC_LOCK. Docker gives a container 64 KiB and drops that capability, systemd's "
          "default is 8 MiB, and Slurm hands a job the limit of the shell that submitted it "
          "(PropagateResourceLimits). The registration then fails ('ibv_reg_mr failed', 'Cannot allocate "
          "memory'); libibverbs warns at 32 KiB or less ('RLIMIT_MEMLOCK is 32768 bytes').",
          _manual("raise it where the job's processes get it: docker run --ulimit memlock=-1 (or --cap-add "
                  "IPC_LOCK), a Kubernetes pod with the IPC_LOCK capability, '* - memlock unlimited' in "
                  "/etc/security/limits.conf for SSH sessions, LimitMEMLOCK=infinity in slurmd's systemd unit and "
                  "PropagateResourceLimitsExcept=MEMLOCK in slurm.conf (then restart slurmd)"),
          suppresses=("remote-rank-died",)),
    Cause("gpudirect-rdma-missing", "error", "no GPUDirect RDMA: the nvidia_peermem module is not found",
          "GPUDirect RDMA lets the InfiniBand/RoCE NIC read and write GPU memory itself; the kernel allows it through "
          "the nvidia_peermem module (nv_peer_mem with old MLNX_OFED), or through DMA-BUF where the GPU driver's "
          "kernel modules are the open ones and Linux is 5.12 or later. NCCL runs without it, copying every byte "
          "through host memory, at a fraction of the fabric's bandwidth (8 against 20 GB/s in "
          "aikitoria/open-gpu-kernel-modules#20). NVSHMEM (DeepEP's internode kernels, and the MoE dispatchers of "
          "Megatron and SGLang built on them) does not: it skips its IB transport and its init fails on every node "
          "('Peer GPU N is not accessible', 'building transport map failed'); the peers see the broken sockets. "
          "Some NVSHMEM builds look for the module where newer drivers do not put it, and miss one that is loaded "
          "(deepseek-ai/DeepEP#151).",
          _manual("load the module on every node: sudo modprobe nvidia-peermem, and list it in "
                  "/etc/modules-load.d/ for the next boot (lsmod | grep peermem shows it); or, for NCCL, the "
                  "driver's open kernel modules (NVIDIA's default since R560) on Linux 5.12+, where DMA-BUF needs "
                  "no module; where the module is loaded already, the job's NVSHMEM does not find it: a newer "
                  "NVSHMEM (deepseek-ai/DeepEP#151)"),
          suppresses=("remote-rank-died",)),  # the node whose NVSHMEM failed left; its peers' sockets broke
    Cause("nvls-setup-failed", "error", "NVLink SHARP (NVLS) setup failed on an NVSwitch node",
          "NCCL could not set up NVLink SHARP (NVLS), the NVSwitch multicast it uses for collectives inside an "
          "HGX/DGX H100, H200 or B200 node: a CUDA call of that setup failed. The node's NVSwitch fabric is not in "
          "order: its Fabric Manager is not running (newer NCCL says 'a system or configuration error in the "
          "Fabric Manager or NVSwitches'), or it was stopped and restarted without a GPU reset in between "
          "(nvidia-smi -q may still say the fabric is fine), which only a GPU reset or a reboot clears. NCCL 2.29 "
          "also fails so when many communicators have used up the NVSwitches' multicast slots, where 2.28 fell "
          "back (NVIDIA/nccl#2077).",
          _env({"NCCL_NVLS_ENABLE": "0"}, "NCCL_NVLS_ENABLE=0 runs the job without NVLS (collectives inside the "
               "node are slower, and they run); the lasting fix is the node's: the Fabric Manager running, of the "
               "driver's version (systemctl status nvidia-fabricmanager), and the GPUs reset after it restarts "
               "(nvidia-smi -r with no process on them, in the order of its user guide), or a reboot"),
          suppresses=("remote-rank-died",)),
    Cause("shm-not-writable", "error", "/dev/shm is not writable for the job",
          "NCCL keeps the buffers of transfers between GPUs of a node without P2P as files in /dev/shm, and here "
          "creating one was refused (shm_open: Permission denied): /dev/shm's mode or owner is not the default "
          "(1777), or a container mounts it read-only.",
          _env({"NCCL_SHM_DISABLE": "1"}, "make /dev/shm writable for every user again (chmod 1777 /dev/shm, or "
               "mount its tmpfs with mode=1777); NCCL_SHM_DISABLE=1 avoids it at a cost in speed"),
          suppresses=("shm-too-small",)),  # NCCL's next line, "Error while creating shared memory segment"
    Cause("shm-too-small", "error", "/dev/shm is too small or full",
          "/dev/shm is too small for NCCL's shared-memory buffers and DataLoader workers (Docker's default is "
          "64 MiB), or full: the segments of a job that crashed stay there (NCCL's nccl-*, psm_*) until someone "
          "removes them. They fail with 'No space left on device' or a bus error.",
          _env({"NCCL_SHM_DISABLE": "1"}, SHM_MORE + "; NCCL_SHM_DISABLE=1 avoids it at a cost in speed",
               SHM_LEFTOVERS)),
    # ---- collectives and crashes ---------------------------------------------------------------------
    Cause("watchdog-timeout", "error", "a collective timed out",
          "A collective did not finish within the process group timeout on every rank: a rank is stuck, dead, or "
          "running a different collective, or the network between the nodes stopped carrying packets (a link that "
          "goes down sends no reset: every rank just waits).",
          _manual("find the rank that did not reach the collective (its log stops earlier); "
                  "TORCH_NCCL_TRACE_BUFFER_SIZE and TORCH_DISTRIBUTED_DEBUG=DETAIL show where"),
          suppresses=("remote-rank-died",)),
    Cause("collective-desync", "error", "ranks entered different collectives",
          "Ranks entered different collectives (or shapes) at the same sequence number: the code path differs by "
          "rank; or one rank fell behind (it hangs in its own work, or died) and never joined the others' next "
          "collective, which torch's desync report names.",
          _manual("make every rank run the same collectives in the same order with the same shapes"),
          suppresses=("watchdog-timeout", "remote-rank-died")),  # the timeout is where the desync shows
    Cause("collective-mismatch", "error", "peers posted transfers of different sizes",
          "Two peers posted transfers of different sizes: ranks are running different collectives.",
          _manual("run with TORCH_DISTRIBUTED_DEBUG=DETAIL to see which ranks differ")),
    Cause("segfault-exit-11", "error", "a worker died of SIGSEGV",
          "A worker died of SIGSEGV: a crash in native code (a CUDA/NCCL/extension mismatch, or bad memory access).",
          _manual("run that rank's code alone with faulthandler (python -X faulthandler) to get the stack"),
          suppresses=("remote-rank-died",)),
    Cause("host-oom-exit-9", "error", "a worker was killed (SIGKILL, most often the OOM killer)",
          "A worker was killed with SIGKILL, most often by the kernel's OOM killer (host RAM, not GPU memory).",
          _manual("check dmesg for 'Out of memory: Killed process'; lower the per-rank host memory (data loader "
                  "workers, model loading), or add RAM/swap"),
          suppresses=("remote-rank-died",)),
    Cause("remote-rank-died", "error", "a peer rank died first",
          "The connection to a peer rank broke: that rank, on this node or another, died first. Its own lines "
          "(the first Traceback, signal or exit code; torchrun's Root Cause) say why.",
          _manual("find the first failure among the job's ranks (the run's first failure names its rank): "
                  "this one is a consequence"), consequence=True),
    # ---- the fabric ----------------------------------------------------------------------------------
    Cause("gid-index", "error", "RoCE GID index does not route",
          "On RoCE, NCCL addresses the peers through one GID index of the HCA's port (NCCL_IB_GID_INDEX): here it "
          "does not route between the nodes (RETRY_EXCEEDED on the first RDMA transfer: different switches or "
          "subnets), or it is not there on this node (ibv_modify_qp: No such device), as when the nodes' GID "
          "tables differ (containers, Kubernetes RDMA plugins), or one HCA's port has no usable GID at all (its "
          "netdev has no address, or a container's network namespace does not hold it).",
          _env({"NCCL_IB_GID_INDEX": "3"}, "set NCCL_IB_GID_INDEX to the RoCEv2 GID (often 3; check with show_gids "
               "on every node, and set it per node where the tables differ)",
               "leave out an HCA whose port has no GID: NCCL_IB_HCA=^mlx5_N (show_gids lists none for it)",
               "in Kubernetes, run the pods with host networking, or give each pod the NCCL_IB_HCA it can use")),
    Cause("ib-completion-error", "error", "an RDMA transfer failed",
          "An RDMA transfer failed on the fabric (the completion status names the verbs error). A local "
          "access or protection error on the first transfers can also be ports whose MTUs differ between the nodes "
          "(NCCL 2.20 and later no longer lowers a queue pair's MTU to the smaller one: NVIDIA/nccl#1524).",
          _manual("check the fabric (ibstat, link errors), the GID index, that the ports' MTU is the same on every "
                  "node (ibv_devinfo: active_mtu), and that the same NCCL runs on every node"),
          suppresses=("remote-rank-died",)),  # the failed transfer broke the peers' links
    Cause("ib-async-fatal-event", "error", "the HCA raised a fatal event",
          "The HCA raised a fatal asynchronous event: a queue pair failed.",
          _manual("check the HCA firmware and driver; update them to the same versions on every node")),
    Cause("p2p-hang", "warning", "GPU peer-to-peer transfers hang",
          "GPU peer-to-peer transfers over PCIe hang on some GPUs and platforms (an IOMMU not in pass-through, "
          "PCIe ACS): init stops while it connects the GPUs, or it completes and the first collective never "
          "finishes.",
          _env({"NCCL_P2P_DISABLE": "1"}, "NCCL_P2P_DISABLE=1 routes intra-node traffic through host memory "
                                           "(slower, but it completes); the lasting fix is the platform's: iommu=pt "
                                           "on the kernel command line, ACS off")),
    Cause("slow-interconnect", "warning", "inter-node bandwidth is far below the link's",
          "Collectives complete, but the bandwidth between the nodes is far below what the link can carry: NCCL "
          "fell back to TCP sockets, uses a slow interface, or the fabric is degraded.",
          _manual("check NCCL_DEBUG=INFO's 'Using network' line and the interface it names; measure the link "
                  "alone (ib_write_bw, iperf3) between the nodes")),
    Cause("exit-barrier-race", "info", "torchrun's exit barrier failed after this node's workers succeeded",
          "Once its workers are done, torchrun's agent waits at an exit barrier on the store the master's agent "
          "hosts. The master's agent leaves as soon as it sees the last agent arrive and closes the store, and the "
          "last one may still be waiting on it: that node logs 'Error waiting on exit barrier' with a traceback "
          "('Failed to recv', 'Connection reset') and exits with its workers' result anyway. A known race in torch "
          "elastic (pytorch/pytorch#69520), the likelier the more nodes there are; the barrier also gives up when "
          "another node never gets there (that node's own finding says why). The node did not fail.",
          _manual("nothing to fix on this node: its workers succeeded and torchrun exited with their result; the "
                  "traceback is the agent's, after the job")),
    Cause("nccl-known-bug", "error", "a known NCCL bug",
          "NCCL failed where a known bug of its release fails: the error is NCCL's own internal one, not the "
          "machine's or the job's, and a later release fixes it. The summary names the bug and that release.",
          _manual("upgrade NCCL on every node to the release the summary names (the nvidia-nccl-cu12 wheel, a "
                  "torch built with it, or a newer container)")),
    Cause("unrecognized-failure", "error", "a failure ddptui does not recognize",
          "The job failed, but no known cause matched its output (a Python exception in the training script is "
          "one): the evidence is each node's first error.",
          _manual("read the first error on each node (the earliest failure usually causes the rest); NCCL_DEBUG=INFO "
                  "and TORCH_DISTRIBUTED_DEBUG=DETAIL say more"),
          suppresses=("remote-rank-died",)),  # that node's own error came first: the peers' broken links follow it
)

CATALOG: dict[str, Cause] = {c.id: c for c in _CAUSES}
assert len(CATALOG) == len(_CAUSES), "an id is defined twice"


def finding(id: str, nodes: Iterable[str], summary: str, evidence: Iterable[Evidence], *,
            fix: Fix | None | Default = DEFAULT, severity: str | None = None,
            explanation: str | None = None) -> Finding:
    """A Finding for a catalog id; severity, explanation and fix come from the catalog unless given.

    An unknown id raises KeyError: every id is defined here, so that is a bug in the caller.
    """
    cause = CATALOG[id]
    sev = severity or cause.severity
    if sev not in SEVERITIES:
        raise ValueError(f"{id}: severity {sev!r} is not one of {SEVERITIES}")
    return Finding(id, sev, list(nodes), summary, list(evidence), explanation or cause.explanation,
                   cause.fix if isinstance(fix, Default) else fix)


def hidden_ids(findings: Iterable[Finding]) -> set[str]:
    """The ids that a better explanation among these findings covers (the catalog's `suppresses`).

    A node-level cause hides another only where they share a node; a job-wide one (it compares the
    nodes) hides wherever it is raised. An id this version does not know (a bundle made by a newer
    ddptui) hides nothing and stays shown.
    """
    active = {f.id: f for f in findings}
    hidden: set[str] = set()
    for f in active.values():
        cause = CATALOG.get(f.id)
        for s in cause.suppresses if cause else ():
            if s in active and (cause.job_wide or set(active[s].nodes) & set(f.nodes)):
                hidden.add(s)
    return hidden
