"""What a link should give: all_reduce busbw on large payloads, by NCCL's transport, each figure
with its source (research: turn2-anchors.md §3.3). slow-interconnect (bandwidth.py) judges a
measured busbw against them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinkFigure:
    transport: str  # NCCL's word for it: NVLink (inside a node), IB (also RoCE), Socket (TCP)
    link: str
    busbw_gbps: tuple[float, float]  # practical range, GB/s (1e9 bytes/s), per NIC for IB and Socket
    source: str


BUSBW_REFERENCE = (
    LinkFigure("NVLink", "8x A100 NVLink3, one node", (230, 235), "stas00 network/README; NVIDIA/nccl#1048"),
    LinkFigure("NVLink", "8x H100/H200 NVSwitch, NCCL_ALGO=Ring", (370, 370), "NVIDIA/nccl-tests#212, #290"),
    LinkFigure("IB", "100 Gb/s NIC (EDR IB, 100 GbE RoCE)", (12, 12), "NVIDIA/nccl-tests#119, #29"),
    LinkFigure("IB", "200 Gb/s NIC (HDR)", (24, 24), "NVIDIA/nccl-tests#119; NVIDIA/nccl#1048"),
    LinkFigure("IB", "400 Gb/s NIC (NDR, CX-7)", (46, 49), "NVIDIA/nccl-tests#290, #267"),
    LinkFigure("Socket", "10 GbE", (1.0, 1.1), "derived: 1.25 GB/s on the wire"),
    LinkFigure("Socket", "25 GbE", (1.7, 2.5), "NVIDIA/nccl-tests#83"),
    LinkFigure("Socket", "100 GbE", (1.1, 5.2), "NVIDIA/nccl#450, #398"),
)
FAR_BELOW = 2.0  # "far below": under half of the slowest healthy link of that transport


def link_figures(transport: str | None) -> tuple[LinkFigure, ...]:
    return tuple(f for f in BUSBW_REFERENCE if f.transport == transport)


def healthy_floor(transport: str | None) -> float | None:
    """The busbw under which a link of this transport is far below what it should give (GB/s), or None
    when the transport is unknown (gloo, or NCCL without NCCL_DEBUG=INFO)."""
    figures = link_figures(transport)
    return min(f.busbw_gbps[0] for f in figures) / FAR_BELOW if figures else None
