"""slow-interconnect from a measurement: the smoke workload's `ddptui-smoke bandwidth` lines.

The engine hands this judge the lines that carry its anchors (the gate's literals, ANCHORS) and
asks for a verdict after each batch. The inter-node figure (one rank per node) is compared with
the playbook's `bandwidth.min_busbw_gbps` and, when NCCL_DEBUG=INFO named the transport NCCL chose
(NET/IB, NET/Socket), with the catalog's reference figures for it; an unknown transport (gloo, or
no NCCL_DEBUG) leaves only the threshold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..logs.bandwidth import gbps_words, size_words
from ..logs.results import parse_bandwidth_line
from .catalog import CATALOG
from .links import healthy_floor, link_figures
from .model import Evidence

IB_OFF = "NCCL_IB_DISABLE set by environment to 1"
SOCKET_IFACE = "NET/Socket : Using ["
ANCHORS = ("ddptui-smoke bandwidth", IB_OFF, SOCKET_IFACE)
IFACE = re.compile(r"NET/Socket : Using \[\d+\]([\w.-]+):")  # NCCL's pick: [0]eth0:10.0.0.2<0>

Verdict = tuple[list[str], str, list[Evidence], str]  # nodes, summary, evidence, explanation


class BandwidthJudge:
    def __init__(self, min_busbw_gbps: float | None = None) -> None:
        self.min_busbw_gbps = min_busbw_gbps
        self.measured: dict[str, tuple[dict, Evidence]] = {}  # node -> its inter-node line
        self.ib_off: dict[str, Evidence] = {}
        self.ifaces: set[str] = set()  # the interfaces NET/Socket uses
        self.dirty = False  # something arrived since the last verdict

    def feed(self, node: str, n: int, line: str) -> None:
        """Any line that passed the engine's gate; cheap on the ones that are not for this judge."""
        if SOCKET_IFACE in line and (m := IFACE.search(line)):
            self.ifaces.add(m.group(1))
        elif IB_OFF in line:
            self.ib_off.setdefault(node, Evidence(node, n, line.strip()))
            self.dirty = bool(self.measured)
        elif (d := parse_bandwidth_line(line)) and d["scope"] == "inter-node" and "skipped" not in d:
            if node not in self.measured:
                self.measured[node] = (d, Evidence(node, n, line.strip()))
                self.dirty = True

    def judge(self, nodes: Mapping[str, Any]) -> Verdict | None:
        """`nodes`: the engine's per-node states; their `transport` (host -> (IB | Socket, definite, line
        number, text)) says what NCCL chose."""
        self.dirty = False
        transports = {name: [(v[0], v[2], v[3]) for v in st.transport.values() if v[1]] for name, st in nodes.items()}
        if not self.measured:
            return None
        d = next(iter(self.measured.values()))[0]
        busbw = d["busbw_gbps"]
        kinds = {k for node in self.measured for k, _, _ in transports.get(node, ())}
        transport = "Socket" if "Socket" in kinds else "IB" if "IB" in kinds else None
        floor = healthy_floor(transport)
        below = []
        if self.min_busbw_gbps is not None and busbw < self.min_busbw_gbps:
            below.append(f"the playbook's bandwidth.min_busbw_gbps ({self.min_busbw_gbps:g} GB/s)")
        if floor is not None and busbw < floor:
            below.append(f"half of what the slowest NET/{transport} link gives ({floor:g} GB/s)")
        if not below:
            return None
        nccl = d.get("backend") == "nccl"
        how = d.get("backend", "?") + (f" over NET/{transport}" if transport else "") + (
            f", NCCL_ALGO={d.get('nccl_algo') or 'Ring'}" if nccl else "")
        nodes = sorted(self.measured)
        summary = (f"inter-node all_reduce busbw {gbps_words(busbw)} ({size_words(d['size'])}, {how}, "
                   f"{d['ranks']} nodes) is below {' and '.join(below)}")
        evidence = [ev for _, ev in self.measured.values()] + list(self.ib_off.values()) + [
            Evidence(node, n, text) for node in nodes for k, n, text in transports.get(node, ())[:1] if k == transport]
        return nodes, summary, evidence, self._explain(d, transport)

    def _explain(self, d: dict, transport: str | None) -> str:
        if transport == "Socket":
            ifaces = sorted(self.ifaces)
            why = ("NCCL chose NET/Socket (TCP sockets)" + (
                f" and NCCL_IB_DISABLE=1 is set on {', '.join(sorted(self.ib_off))}: if the nodes have InfiniBand or "
                "RoCE, remove it and look for 'Using network IB'" if self.ib_off else
                ": if the nodes have InfiniBand or RoCE, NCCL did not use it (NCCL_IB_DISABLE, HCAs the container "
                "does not see, a missing net plugin)") +
                f"; otherwise the interface it uses{' (' + ', '.join(ifaces) + ')' if ifaces else ''} may be a slow "
                "one (a 1 GbE management network gives at most 0.125 GB/s): pin NCCL_SOCKET_IFNAME to the fast one.")
        elif transport == "IB":
            why = ("NCCL uses NET/IB, yet the figure is far below one NIC's (" +
                   ", ".join(f"{f.link}: ~{f.busbw_gbps[0]:g} GB/s" for f in link_figures("IB")) +
                   "): check each NIC's link rate (ibstat), PCIe, GPUDirect RDMA and ACS; all_reduce between "
                   "pairs of nodes finds the slow one.")
        else:
            why = ("The transport is not in the logs (gloo, or NCCL without NCCL_DEBUG=INFO), so only the playbook's "
                   "threshold applies. Likely: the traffic takes the wrong interface (GLOO_SOCKET_IFNAME / "
                   "NCCL_SOCKET_IFNAME on a management or virtual network), a slow, shaped or shared link, or, with "
                   "NCCL, TCP sockets where InfiniBand exists (NCCL_IB_DISABLE set); NCCL_DEBUG=INFO names the "
                   "transport.")
        sizes = ", ".join(size_words(s) for s in d.get("sizes") or [d["size"]])
        algo = ", with NCCL_ALGO=Ring" if d.get("backend") == "nccl" else ""
        return (f"{CATALOG['slow-interconnect'].explanation} {why} Measured by ddptui's smoke test: all_reduce "
                f"over one rank per node ({d['ranks']} nodes), sizes {sizes}{algo}, timed by the slowest rank; "
                f"payloads under 1 GiB read somewhat below the link's plateau, not several times below.")
