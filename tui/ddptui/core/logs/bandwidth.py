"""The job's bandwidth figures, from the smoke workload's `ddptui-smoke bandwidth` lines: what the
run's summary records (`summary.json` → `bandwidth`) and the words the watch step ends with.

Every node's local rank 0 prints the same figures for a scope (they are the group's agreed ones),
so a scope's figure is the first line seen and `nodes` lists the nodes that reported it.
"""

from __future__ import annotations

import threading

from .results import parse_bandwidth_line

FIGURE_KEYS = ("size", "algbw_gbps", "busbw_gbps", "ranks", "iters", "time_ms", "sizes", "busbw_by_size")


def bus_factor(n: int) -> float:
    """all_reduce's busbw / algbw for n ranks: 2(n-1)/n (NVIDIA/nccl-tests doc/PERFORMANCE.md)."""
    return 2 * (n - 1) / n


def size_words(nbytes: int) -> str:
    """1048576 → `1 MiB`, 262144 → `256 KiB`."""
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= div and nbytes % div == 0:
            return f"{nbytes // div} {unit}"
    return f"{nbytes} B"


def gbps_words(x: float) -> str:
    return f"{x:.3g} GB/s"


class Bandwidth:
    """Collects one launch's bandwidth lines (thread-safe: every node's reader adds to it)."""

    def __init__(self, min_busbw_gbps: float | None = None) -> None:
        self.min_busbw_gbps = min_busbw_gbps
        self.lines: list[dict] = []
        self._lock = threading.Lock()

    def feed(self, node: str, line: str) -> None:
        """One line of `node`'s output; only a bandwidth line counts."""
        if (d := parse_bandwidth_line(line)) is not None:
            with self._lock:
                self.lines.append({**d, "node": node})

    def clear(self) -> None:
        with self._lock:
            self.lines.clear()

    def summary(self) -> dict | None:
        """None when the job printed no bandwidth line (another script, or --bw-seconds 0)."""
        with self._lock:
            lines = list(self.lines)
        if not lines:
            return None
        out: dict = {"backend": lines[0].get("backend"), "nccl_algo": lines[0].get("nccl_algo"),
                     "min_busbw_gbps": self.min_busbw_gbps, "world": None, "inter_node": None,
                     "single_node": False}
        for d in lines:
            if d.get("skipped"):
                out["single_node"] = out["single_node"] or d["scope"] == "inter-node"
                continue
            key = "inter_node" if d["scope"] == "inter-node" else "world" if d["scope"] == "world" else None
            if key is None:
                continue
            if out[key] is None:
                out[key] = {k: d[k] for k in FIGURE_KEYS if k in d} | {"nodes": []}
            if d["node"] not in out[key]["nodes"]:
                out[key]["nodes"] = sorted([*out[key]["nodes"], d["node"]])  # not in arrival order: stable
        return out

    def words(self, prefix: str = "") -> str:
        """`inter-node busbw 0.81 GB/s (32 MiB, gloo)` after `prefix`; empty when there is no figure."""
        text = self._words()
        return prefix + text if text else ""

    def _words(self) -> str:
        s = self.summary()
        if s is None:
            return ""
        how = s["backend"] + (f", NCCL_ALGO={s['nccl_algo']}" if s.get("nccl_algo") else "")
        if s["inter_node"]:
            f = s["inter_node"]
            return f"inter-node busbw {gbps_words(f['busbw_gbps'])} ({size_words(f['size'])}, {how})"
        if s["world"]:
            f = s["world"]
            one = "one node, no inter-node figure" if s["single_node"] else "no inter-node figure yet"
            return f"busbw {gbps_words(f['busbw_gbps'])} over {f['ranks']} ranks ({size_words(f['size'])}, {how}; {one})"
        return ""
