"""The smoke workload's lines: `ddptui-smoke result key=value ...` (one per rank) and
`ddptui-smoke bandwidth key=value ...` (one per scope, from each node's local rank 0)."""

from __future__ import annotations

import re

_KV = re.compile(r"(\w+)=(\S+)")
BANDWIDTH = "ddptui-smoke bandwidth "
_BW_INTS = ("size", "ranks", "iters", "rank")
_BW_FLOATS = ("algbw_gbps", "busbw_gbps", "time_ms")


def parse_result_line(line: str) -> dict | None:
    i = line.find("ddptui-smoke result ")
    if i < 0:
        return None
    d: dict = dict(_KV.findall(line[i:]))
    for k in ("rank", "local_rank", "world_size"):
        if k in d and d[k].lstrip("-").isdigit():
            d[k] = int(d[k])
    return d


def parse_bandwidth_line(line: str) -> dict | None:
    """`scope` (world | inter-node), `size` (bytes, the largest measured), `algbw_gbps`, `busbw_gbps`
    (1e9 bytes/s), `backend`, `ranks`, `iters`, `sizes` and `busbw_by_size` (lists), `host`, `rank`,
    `nccl_algo` with nccl; or `skipped` (single-node) instead of figures. None if not such a line,
    or if a figure does not read as a number."""
    i = line.find(BANDWIDTH)
    if i < 0:
        return None
    d: dict = dict(_KV.findall(line[i:]))
    if "scope" not in d:
        return None
    try:
        for k in _BW_INTS:
            if k in d:
                d[k] = int(d[k])
        for k in _BW_FLOATS:
            if k in d:
                d[k] = float(d[k])
        if "sizes" in d:
            d["sizes"] = [int(x) for x in d["sizes"].split(",")]
        if "busbw_by_size" in d:
            d["busbw_by_size"] = [float(x) for x in d["busbw_by_size"].split(",")]
    except ValueError:
        return None
    if "skipped" not in d and not ({"size", "algbw_gbps", "busbw_gbps", "ranks"} <= d.keys()):
        return None
    return d
