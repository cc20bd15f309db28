"""The playbook's `bandwidth:` block: what the measured inter-node all_reduce busbw must reach.

    bandwidth:
      min_busbw_gbps: 20   # GB/s (1e9 bytes/s); below it the run raises slow-interconnect

Kept out of loader.py, which is at its size limit; the field readers are fields.py's.
"""

from __future__ import annotations

from yaml.nodes import Node

from .fields import _Ctx, _mapping, _positive, _typed
from .model import BandwidthOptions

BANDWIDTH_KEYS = ("min_busbw_gbps",)


def parse_bandwidth(ctx: _Ctx, node: Node | None) -> BandwidthOptions:
    """The block's options (the defaults when `node` is None: no block); problems go to `ctx`."""
    if node is None:
        return BandwidthOptions()
    keys = _mapping(ctx, node, "bandwidth", BANDWIDTH_KEYS)
    kw = {}
    if "min_busbw_gbps" in keys:
        val = _typed(ctx, keys["min_busbw_gbps"][1], "bandwidth.min_busbw_gbps", float, _positive)
        if val is not None:
            kw["min_busbw_gbps"] = val
    return BandwidthOptions(**kw)
