"""The locked-memory limit a job's processes get on a node, and whether RDMA can register its buffers.

NCCL's InfiniBand/RoCE transport (and EFA, UCX, NVSHMEM) registers its buffers with the HCA
(`ibv_reg_mr`), which pins them: the kernel counts pinned pages against the process's
RLIMIT_MEMLOCK (`ulimit -l`) unless the process has CAP_IPC_LOCK (root has it, except where a
container runtime drops it: Docker does). Docker gives a container 64 KiB, systemd's default is
8 MiB, and Slurm hands a job the limit of the shell that submitted it (PropagateResourceLimits), so
a login node's low limit reaches every node; libibverbs itself warns at 32 KiB or less ("This will
severely limit memory registrations"). NVIDIA's and Mellanox's guides set it unlimited.

The probe reads the limit and the capability in the node's own session, as the job will start
there; the judge warns only where NCCL will use NET/IB (a socket job pins nothing of this size).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..diagnosis.catalog import finding
from ..diagnosis.model import Evidence, Finding

if TYPE_CHECKING:
    from .facts import NodeFacts

COMMAND = "ulimit -l; grep '^CapEff:' /proc/self/status"
CAP_IPC_LOCK = 14  # linux/capability.h
# Below this a finite limit is a default nobody raised (64 KiB, 8 MiB...), not a site's choice: NCCL
# pins NCCL_BUFFSIZE (4 MiB) per channel and peer, tens to hundreds of MiB a process
MIN_KIB = 1 << 20


def parse(text: str) -> dict | None:
    """`ulimit -l` then /proc/self/status's CapEff line -> {"limit_kib": KiB or None (unlimited),
    "ipc_lock": CAP_IPC_LOCK in the effective set, or None where the line was not read}."""
    words = text.split()
    if not words or not (words[0] == "unlimited" or words[0].isdigit()):
        return None
    ipc_lock = None
    if "CapEff:" in words and words.index("CapEff:") + 1 < len(words):
        try:
            ipc_lock = bool(int(words[words.index("CapEff:") + 1], 16) >> CAP_IPC_LOCK & 1)
        except ValueError:
            pass
    return {"limit_kib": None if words[0] == "unlimited" else int(words[0]), "ipc_lock": ipc_lock}


def in_words(kib: int | None) -> str:
    if kib is None:
        return "unlimited"
    return f"{kib // 1024} MiB" if kib >= 1024 and kib % 1024 == 0 else f"{kib} KiB"


def judge(node: str, nf: NodeFacts, backend: str | None) -> tuple[str, str, list[Finding]] | None:
    """(check status, summary, findings) of the node's locked-memory limit (`nf.memlock`), or None
    where it was not read. A warning where NCCL will use NET/IB and the limit is finite, under
    MIN_KIB, and the processes lack CAP_IPC_LOCK: RDMA registration then fails or is cut short."""
    if nf.memlock is None:
        return None
    kib, ipc_lock = nf.memlock["limit_kib"], nf.memlock["ipc_lock"]
    said = f"locked memory {in_words(kib)}" + (" (CAP_IPC_LOCK: not counted)" if ipc_lock and kib is not None else "")
    low = kib is not None and kib < MIN_KIB and not ipc_lock
    if not low or backend != "nccl" or nf.predicted_transport != "IB":
        return "pass", said, []
    cmd, _ = nf.evidence.get("memlock", ("", ""))
    f = finding("memlock-too-low", [node], f"{node}: the locked-memory limit is {in_words(kib)}, and NCCL will use "
                f"InfiniBand/RoCE", [Evidence(node, 0, f"ulimit -l: {kib}" + ("" if ipc_lock is None else
                                                                             ", no CAP_IPC_LOCK"), cmd)],
                severity="warning")
    return "warn", f"{said}: NET/IB pins more", [f]
