"""Node names from hostlist expressions: `node[02-04]`, `gpu[1,3-4]-ib`, `a,b`.

Written by hand rather than taken from ClusterShell: we need only expansion, and we need the
column of the bad character so `ddptui validate` can point at it; ClusterShell's NodeSet is a large
dependency whose errors carry no position.
"""

from __future__ import annotations

import re

from .errors import DdptuiError


class HostlistError(DdptuiError, ValueError):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset  # 0-based offset into the expression


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_NAME_CHARS = re.compile(r"^[A-Za-z0-9._-]+$")


def _split_top(expr: str) -> list[tuple[str, int]]:
    """Split on commas outside brackets; return (part, offset)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            if depth:
                raise HostlistError("nested '[' in hostlist", i)
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError("']' without '['", i)
            depth = 0
        elif ch == "," and not depth:
            parts.append((expr[start:i], start))
            start = i + 1
    if depth:
        raise HostlistError("'[' is never closed", expr.rfind("["))
    parts.append((expr[start:], start))
    return parts


def _expand_ranges(body: str, offset: int) -> list[str]:
    out: list[str] = []
    pos = offset
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise HostlistError(f"bad range {item!r}: expected N or N-M", pos)
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise HostlistError(f"range {item!r} goes backwards", pos)
        if int(hi) - int(lo) > 100_000:
            raise HostlistError(f"range {item!r} is too large", pos)
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        out.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
        pos += len(item) + 1
    return out


def _expand_one(part: str, offset: int) -> list[str]:
    results = [""]
    i = 0
    while i < len(part):
        j = part.find("[", i)
        if j < 0:
            lit = part[i:]
            results = [r + lit for r in results]
            break
        lit = part[i:j]
        k = part.index("]", j)
        nums = _expand_ranges(part[j + 1 : k], offset + j + 1)
        results = [r + lit + n for r in results for n in nums]
        i = k + 1
    for name in results:
        if not name or not _NAME_CHARS.match(name):
            raise HostlistError(f"bad host name {name!r}", offset)
    return results


def expand_hostlist(expr: str) -> list[str]:
    """Expand a hostlist expression into names, keeping order and dropping nothing.

    >>> expand_hostlist("node[02-04]")
    ['node02', 'node03', 'node04']
    """
    expr = expr.strip()
    if not expr:
        raise HostlistError("empty hostlist", 0)
    names: list[str] = []
    for part, off in _split_top(expr):
        part = part.strip()
        if not part:
            raise HostlistError("empty name between commas", off)
        names.extend(_expand_one(part, off))
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise HostlistError(f"{n!r} appears twice", 0)
        seen.add(n)
    return names
