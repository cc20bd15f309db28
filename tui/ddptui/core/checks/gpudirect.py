"""GPUDirect RDMA on a node: whether its NICs may read and write GPU memory, as NCCL will find out.

NCCL's InfiniBand/RoCE transport hands GPU memory to the NIC directly (a channel `via
NET/IB/0/GDRDMA`) only where the kernel lets the NIC reach it: through the peer-memory module
(nvidia_peermem, shipped with the driver since R470; MLNX_OFED's nv_peer_mem before it), which NCCL
looks for at PEERMEM_FILES, or through DMA-BUF, which needs the open flavour of the GPU kernel
modules (NVIDIA's default since R560) and Linux 5.12 or later ("installing the OpenRM version of the
GPU driver and using a recent kernel", NCCL's maintainer in NVIDIA/nccl#1474). Without either, NCCL copies every
byte through host memory: the job runs, at a fraction of what the fabric carries (all_reduce went
from 8 to 20 GB/s once enabled, 3 x 8 GPUs over 400 Gb/s IB: aikitoria/open-gpu-kernel-modules#20),
and NVSHMEM does not start at all (deepseek-ai/DeepEP#223).

The probe reads what NCCL reads, and the driver's banner; the judge warns where neither way exists
on a node from which NCCL will use NET/IB. What it cannot see (a GeForce's libcuda refuses
both; a NIC or a kernel without DMA-BUF support), the run's own log says: NCCL prints `GPU Direct
RDMA (nvidia-peermem) enabled`, `(DMABUF) enabled`, or `Disabled`, which the diagnosis reads.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..diagnosis.catalog import finding
from ..diagnosis.model import Evidence, Finding, Fix

if TYPE_CHECKING:
    from .facts import NodeFacts

# NCCL's own test for the peer-memory module (src/transport/net_ib: KNL_MODULE_LOADED): MLNX_OFED's
# peer-memory clients, and the driver's nvidia_peermem, which NCCL looks for only since 2.23.4: up to
# 2.22.3 a node with nvidia_peermem alone has no GPUDirect RDMA (NVIDIA/nccl#1676: all_reduce on 2 DGX
# fell from ~180 to ~10 GB/s when DGX OS 25.01 replaced nv_peer_mem with it)
SYS_MODULE = "/sys/module/nvidia_peermem/version"
PEERMEM_FILES = ("/sys/kernel/mm/memory_peers/nv_mem/version", "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
                 SYS_MODULE)
NCCL_SEES_SYS_MODULE = (2, 23)
COMMAND = ("for f in " + " ".join(PEERMEM_FILES) + '; do [ -e "$f" ] && echo "peermem $f"; done; '
           'echo "kernel $(uname -r)"; head -n 1 /proc/driver/nvidia/version 2>/dev/null; true')
DMABUF_KERNEL = (5, 12)  # the kernel's RDMA DMA-BUF import (ib_umem_dmabuf) came in 5.12
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  ..." (proprietary), "... UNIX Open Kernel
# Module for x86_64  565.57.01  Release Build ..." (open; nix-community/nixGL#186)
_BANNER = re.compile(r"^NVRM version: NVIDIA UNIX (Open )?(?:\S+ )?Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)?)(?=\s|$)", re.M)


def parse(text: str) -> dict | None:
    """The probe's output -> {"peermem": the first of PEERMEM_FILES found, or None; "kernel": `uname -r`;
    "driver": the kernel module's version, or None where /proc/driver/nvidia/version was not read;
    "open": the open flavour of the modules (None: not read)}; None where the probe did not run."""
    said: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in ("kernel", "peermem") and value.strip():
            said.setdefault(key, value.strip())  # the first: PEERMEM_FILES' order
    kernel, peermem = said.get("kernel"), said.get("peermem")
    if kernel is None:
        return None
    m = _BANNER.search(text)
    return {"peermem": peermem, "kernel": kernel, "driver": m.group(2) if m else None,
            "open": bool(m.group(1)) if m else None}


def kernel_at_least(release: str, want: tuple[int, int]) -> bool | None:
    """`uname -r`'s "6.8.0-45-generic" against (major, minor); None where it is no version."""
    m = re.match(r"(\d+)\.(\d+)", release)
    return None if m is None else (int(m.group(1)), int(m.group(2))) >= want


def judge(node: str, nf: NodeFacts, backend: str | None) -> tuple[str, str, list[Finding]] | None:
    """(check status, summary, findings) of the node's GPUDirect RDMA (`nf.gpudirect`); None where it was
    not read or the node has no GPU. A warning where NCCL will use NET/IB and neither the
    peer-memory module nor DMA-BUF (open modules, Linux 5.12+) is there."""
    g = nf.gpudirect
    if g is None or not nf.gpus:
        return None
    new_kernel = kernel_at_least(g["kernel"], DMABUF_KERNEL)
    dmabuf = bool(g["open"] and new_kernel)
    nccl = nccl_version(nf.software.get("nccl"))
    fix = None
    if g["peermem"]:
        name = "nvidia_peermem" if g["peermem"] == SYS_MODULE else "a peer-memory module"
        if g["peermem"] != SYS_MODULE or nccl is None or nccl >= NCCL_SEES_SYS_MODULE or dmabuf:
            return "pass", f"GPUDirect RDMA: {name} loaded", []
        said = (f"nvidia_peermem is loaded, but the job's NCCL {nf.software['nccl']} looks only where MLNX_OFED's "
                "nv_peer_mem registers (NVIDIA/nccl#1676: NCCL 2.23.4 looks for it)")
        fix = Fix(scope="manual", explain="NCCL 2.23.4 or later in the job's environment (a newer torch, or the "
                  "nvidia-nccl-cu12 wheel of that version), or the driver's open kernel modules on Linux 5.12+, with "
                  "which NCCL uses DMA-BUF and needs no module (NVIDIA/nccl#1474)")
    elif g["driver"] is None:
        return "skip", "GPUDirect RDMA not known: no peer-memory module, /proc/driver/nvidia/version unread", []
    elif g["open"] and new_kernel is None:
        return "skip", f"GPUDirect RDMA not known: no peer-memory module, kernel release {g['kernel']!r} unread", []
    elif dmabuf:
        return "pass", f"GPUDirect RDMA: DMA-BUF possible (open kernel modules {g['driver']}, Linux {g['kernel']})", []
    else:
        why = "proprietary kernel modules" if not g["open"] else f"Linux {g['kernel']} is older than 5.12"
        said = f"no GPUDirect RDMA: no peer-memory module, no DMA-BUF ({why})"
    if backend != "nccl":
        return "pass", f"{said}; {backend or 'the job'} does not use it", []
    if nf.predicted_transport != "IB":
        return "pass", f"{said}; NET/{nf.predicted_transport or 'Socket'} does not use it", []
    cmd, out = nf.evidence.get("gpudirect", ("", ""))
    # what says it: the driver's banner; where the module is there, the file and the job's NCCL
    text = f"peermem {g['peermem']}; the job's NCCL {nf.software['nccl']}" if fix else \
        out.splitlines()[-1] if out.strip() else said
    f = finding("gpudirect-rdma-missing", [node], f"{node}: {said}: NCCL will copy its InfiniBand/RoCE traffic "
                f"through host memory", [Evidence(node, 0, text, cmd)], severity="warning", **({"fix": fix} if fix else {}))
    return "warn", f"{said}: NET/IB through host memory", [f]


def nccl_version(text: str | None) -> tuple[int, ...] | None:
    """The software probe's "2.21.5" (torch.cuda.nccl.version()) -> (2, 21, 5); None where unknown."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    return None if m is None else tuple(int(x) for x in m.groups() if x is not None)
