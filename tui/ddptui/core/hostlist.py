"""Node names from hostlist expressions: `node[02-04]`, `gpu[1,3-4]-ib`, `a,b`.

Written by hand rather than taken from ClusterShell: we need only expansion, and we need the
column of the bad character so `ddptui validate` can point at it; ClusterShell's NodeSet is a large
dependency whose errors carry no position.

An expression expands to at most MAX_NAMES names, counted before anything is expanded: 52 bytes
of `n[0-100000][0-100000]` must not become ten billion strings.
"""

from __future__ import annotations

import math
import re

from .errors import DdptuiError

MAX_NAMES = 4096  # names one expression may expand to
MAX_HOST_LEN = 253  # DNS's limit on a host name

# The characters OpenSSH accepts in a host name (anything else: "hostname contains invalid characters").
HOST_CHARS = "A-Za-z0-9._:%@-"
_BAD_HOST_CHAR = re.compile(f"[^{HOST_CHARS}]")


class HostlistError(DdptuiError, ValueError):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset  # 0-based offset into the expression


def host_problem(name: str, what: str = "host name", max_len: int = MAX_HOST_LEN) -> tuple[str, int] | None:
    """Why OpenSSH would refuse `name` as a host name, with the 0-based offset; None when it is fine.

    Names end up in ssh_config lookups (`%h`/`%n` in a `Match exec` line runs through a shell),
    file names and command lines, so the rule is an allowlist, not a list of shell characters."""
    if not name:
        return f"{what} is empty", 0
    m = _BAD_HOST_CHAR.search(name)
    if m:
        return (f"{what} {name!r} contains {m.group()!r}, which OpenSSH refuses in a host name "
                f"(allowed: letters, digits and . _ : % @ -)"), m.start()
    if name.startswith("-"):
        return f"{what} {name!r} starts with '-', which ssh would take for an option", 0
    if len(name) > max_len:
        return f"{what} is {len(name)} characters long; at most {max_len} are allowed", max_len
    return None


_RANGE = re.compile(r"^(\d{1,12})(?:-(\d{1,12}))?$")


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


def _parse_ranges(body: str, offset: int) -> list[tuple[int, int, int]]:
    """`1,3-4` -> [(lo, hi, width)], checked but not expanded."""
    out: list[tuple[int, int, int]] = []
    pos = offset
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise HostlistError(f"bad range {item[:40]!r}: expected N or N-M", pos)
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise HostlistError(f"range {item!r} goes backwards", pos)
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        out.append((int(lo), int(hi), width))
        pos += len(item) + 1
    return out


def _parse_part(part: str, offset: int) -> list[str | list[tuple[int, int, int]]]:
    """A part as literal strings and bracketed range lists, its characters checked."""
    pieces: list[str | list[tuple[int, int, int]]] = []
    i = 0
    while i < len(part):
        j = part.find("[", i)
        lit = part[i:] if j < 0 else part[i:j]
        m = _BAD_HOST_CHAR.search(lit)
        if m:
            raise HostlistError(f"{m.group()!r} is not allowed in a host name "
                                f"(allowed: letters, digits and . _ : % @ -)", offset + i + m.start())
        pieces.append(lit)
        if j < 0:
            break
        k = part.index("]", j)
        pieces.append(_parse_ranges(part[j + 1 : k], offset + j + 1))
        i = k + 1
    return pieces


def _count(pieces: list[str | list[tuple[int, int, int]]]) -> int:
    return math.prod(sum(hi - lo + 1 for lo, hi, _ in p) for p in pieces if isinstance(p, list))


def _expand(pieces: list[str | list[tuple[int, int, int]]]) -> list[str]:
    results = [""]
    for p in pieces:
        if isinstance(p, str):
            results = [r + p for r in results]
        else:
            nums = [str(n).zfill(w) for lo, hi, w in p for n in range(lo, hi + 1)]
            results = [r + n for r in results for n in nums]
    return results


def expand_hostlist(expr: str) -> list[str]:
    """Expand a hostlist expression into names, keeping order and dropping nothing.

    >>> expand_hostlist("node[02-04]")
    ['node02', 'node03', 'node04']
    """
    if not expr.strip():
        raise HostlistError("empty hostlist", 0)
    parsed = []
    total = 0
    for part, off in _split_top(expr):
        stripped = part.strip()
        if not stripped:
            raise HostlistError("empty name between commas", off)
        off += len(part) - len(part.lstrip())
        pieces = _parse_part(stripped, off)
        total += _count(pieces)
        if total > MAX_NAMES:
            raise HostlistError(f"expands to at least {total:,} names; at most {MAX_NAMES} are allowed", off)
        parsed.append((pieces, off))
    names: list[str] = []
    for pieces, off in parsed:
        for name in _expand(pieces):
            bad = host_problem(name)
            if bad:
                raise HostlistError(bad[0], off)
            names.append(name)
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise HostlistError(f"{n!r} appears twice", 0)
        seen.add(n)
    return names
