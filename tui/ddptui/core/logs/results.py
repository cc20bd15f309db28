"""The smoke workload's result lines: `ddptui-smoke result key=value ...`."""

from __future__ import annotations

import re

_KV = re.compile(r"(\w+)=(\S+)")


def parse_result_line(line: str) -> dict | None:
    i = line.find("ddptui-smoke result ")
    if i < 0:
        return None
    d: dict = dict(_KV.findall(line[i:]))
    for k in ("rank", "local_rank", "world_size"):
        if k in d and d[k].lstrip("-").isdigit():
            d[k] = int(d[k])
    return d
