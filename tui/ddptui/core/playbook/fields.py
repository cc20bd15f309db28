"""The loader's field readers: each reads one YAML node, checks its type and value, and records a
problem with its `path:line:col` (and a hint) instead of raising, so every problem is found at once."""

from __future__ import annotations

import difflib
import math
import re
from typing import Any
from collections.abc import Callable

from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import Problem
from ..hostlist import HostlistError, expand_hostlist

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_ARG = 131072  # Linux's MAX_ARG_STRLEN: one argument or one NAME=value


class _Ctx:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.problems: list[Problem] = []
        self._constructor = SafeConstructor()

    def add(self, node: Node | None, message: str, hint: str = "", width: int | None = None) -> None:
        line = col = 1
        if node is not None:
            line, col = node.start_mark.line + 1, node.start_mark.column + 1
            if width is None:
                end = node.end_mark
                width = end.column - node.start_mark.column if end.line == node.start_mark.line else 1
        src = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        self.problems.append(Problem(self.path, line, col, message, hint, src, max(1, width or 1)))

    def value(self, node: Node) -> Any:
        return self._constructor.construct_object(node, deep=True)


_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               list: "a list", dict: "a mapping"}


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    tag = node.tag.rsplit(":", 1)[-1]
    return {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
            "null": "empty"}.get(tag, tag)


def _mapping(ctx: _Ctx, node: Node, where: str, allowed: tuple[str, ...],
             required: tuple[str, ...] = (), owner: Node | None = None) -> dict[str, tuple[Node, Node]]:
    """Keys of a mapping with their key and value nodes; reports unknown, duplicate, missing."""
    if not isinstance(node, MappingNode):
        ctx.add(node, f"{where} must be a mapping, not {_kind(node)}")
        return {}
    out: dict[str, tuple[Node, Node]] = {}
    for knode, vnode in node.value:
        if not isinstance(knode, ScalarNode):
            ctx.add(knode, f"a key in {where} must be a plain name")
            continue
        key = str(knode.value)
        if key in out:
            first = out[key][0].start_mark.line + 1
            ctx.add(knode, f"duplicate key {key!r} in {where} (first set on line {first})",
                    "YAML keeps only the last value; remove one of them")
            continue
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else "known keys: " + ", ".join(allowed)
            msg = f"unknown key {key!r} in {where}"
            if close:
                msg += f" (did you mean {close[0]!r}?)"
                hint = f"rename it to {close[0]!r}"
            ctx.add(knode, msg, hint)
            continue
        out[key] = (knode, vnode)
    for key in required:
        if key not in out:
            at = owner if owner is not None else node
            ctx.add(at, f"missing required key {key!r} in {where}", f"add `{key}:` to {where}",
                    len(str(getattr(at, "value", ""))) if owner is not None else 1)
    return out


def _typed(ctx: _Ctx, node: Node, where: str, typ: type | tuple[type, ...],
           check: Callable[[Any], str | None] | None = None) -> Any:
    """The value of a scalar of the given type, or None after reporting a problem."""
    types = typ if isinstance(typ, tuple) else (typ,)
    want = " or ".join(_TYPE_WORDS[t] for t in types)
    if not isinstance(node, ScalarNode):
        ctx.add(node, f"{where} must be {want}, not {_kind(node)}")
        return None
    val = ctx.value(node)
    ok = isinstance(val, types) and not (isinstance(val, bool) and bool not in types)
    if not ok and float in types and isinstance(val, int) and not isinstance(val, bool):
        val, ok = (float(val), True) if abs(val) < 1e300 else (math.copysign(math.inf, val), True)
    if not ok:
        ctx.add(node, f"{where} must be {want}, not {_kind(node)} ({node.value!r})", type_hint(where, want, node.value))
        return None
    if check:
        msg = check(val)
        if msg:
            ctx.add(node, f"{where} {msg}")
            return None
    return val


# What each number field holds, an example of it, and its unit: a hint names what to write there
# (a port of 2, or a timeout with "s" after it, would be no help).
FIELD_HINTS = {
    "master_port": ("a free TCP port on the master", "29500", ""),
    "port": ("the node's SSH port", "22", ""),
    "nproc_per_node": ("the processes to start per node (one per GPU)", "2", ""),
    "rdzv_timeout": ("how long the nodes wait for each other", "900", "seconds"),
    "rdzv_read_timeout": ("how long a read from the rendezvous store may take", "60", "seconds"),
    "master_wait_timeout": ("how long the workers wait for the master to listen", "60", "seconds"),
    "stop_grace": ("how long a stopped job gets before it is killed", "10", "seconds"),
    "connect_timeout": ("how long an SSH connection may take", "10", "seconds"),
    "command_timeout": ("how long one command on a node may take", "60", "seconds"),
    "keepalive": ("the SSH keepalive interval", "15", "seconds"),
    "timeout": ("how long the step may take", "300", "seconds"),
    "pending_timeout": ("how long to wait for the allocation", "300", "seconds"),
    "nodes": ("how many nodes to allocate", "2", ""),
    "gpus_per_node": ("the GPUs to allocate on each node", "8", ""),
    "min_busbw_gbps": ("the all_reduce bus bandwidth below which the run warns", "20", "GB/s"),
}
_SECONDS = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|second|seconds)\s*", re.IGNORECASE)


def type_hint(where: str, want: str, raw: str) -> str:
    """What to write instead of `raw` in the field `where` (job.master_port, nodes[1].port, ...)."""
    known = FIELD_HINTS.get(re.sub(r"\[\d+\]", "", where).rsplit(".", 1)[-1])
    if known is None:
        return f"write {want}"
    what, example, unit = known
    m = _SECONDS.fullmatch(str(raw))
    if unit == "seconds" and m and (float(m.group(1)).is_integer() or "integer" not in want):
        return f"write {m.group(1)} without the unit: {where} is in seconds"
    return f"write {what}" + (f", in {unit}," if unit else "") + f" as {want}, e.g. {example}"


def _choice(ctx: _Ctx, node: Node, where: str, choices: tuple[str, ...]) -> str | None:
    val = _typed(ctx, node, where, str)
    if val is None:
        return None
    if val not in choices:
        close = difflib.get_close_matches(val, choices, n=1)
        hint = f"did you mean {close[0]!r}?" if close else ""
        ctx.add(node, f"{where} must be one of {', '.join(choices)}, not {val!r}", hint)
        return None
    return val


def _positive(v: Any) -> str | None:
    if isinstance(v, float) and not math.isfinite(v):
        return f"must be a finite number, not {v}"
    return None if v > 0 else "must be greater than 0"


WEEK = 7 * 24 * 3600
MAX_NPROC = 1024
MAX_PATH = 4096  # PATH_MAX
MAX_NAME = 255  # NAME_MAX, and what a user or a rendezvous id needs


def _seconds(v: Any) -> str | None:
    """A timeout or a grace period: finite, above 0, at most a week (a bigger one overflows a sleep)."""
    return _positive(v) or (None if v <= WEEK else f"must be at most {WEEK} seconds (a week), not {_shown(v)}")


def _shown(v: float | int) -> str:
    text = f"{v:g}" if isinstance(v, float) else str(v)
    return text if len(text) <= 20 else f"a {len(text)}-digit number"


def _nproc(v: Any) -> str | None:
    return _positive(v) or (None if v <= MAX_NPROC else f"must be at most {MAX_NPROC} processes per node, not {_shown(v)}")


def _at_most(n: int, what: str = "characters") -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        return None if len(v) <= n else f"is {len(v):,} {what} long; at most {n:,} are allowed"
    return check


def _path(v: Any) -> str | None:
    if not v:
        return "is empty"
    return _at_most(MAX_PATH)(v)


def _port(v: Any) -> str | None:
    return None if 1 <= v <= 65535 else "must be a port number between 1 and 65535"


def _env(ctx: _Ctx, node: Node, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(node, MappingNode):
        ctx.add(node, f"{where} must be a mapping of NAME: value, not {_kind(node)}")
        return ()
    out: dict[str, str] = {}
    for knode, vnode in node.value:
        key = str(knode.value) if isinstance(knode, ScalarNode) else ""
        if not ENV_NAME.match(key) or len(key) > MAX_NAME:
            ctx.add(knode, f"{key!r} in {where} is not a valid environment variable name")
            continue
        if key in out:
            ctx.add(knode, f"duplicate key {key!r} in {where}", "remove one of them")
            continue
        if not isinstance(vnode, ScalarNode):
            ctx.add(vnode, f"{where}.{key} must be a string or number, not {_kind(vnode)}")
            continue
        val = ctx.value(vnode)
        if val is None:
            ctx.add(vnode, f"{where}.{key} is empty", "quote an empty value: \"\"")
            continue
        text = ("1" if val else "0") if isinstance(val, bool) else str(val)
        if len(f"{key}={text}".encode()) >= MAX_ARG:
            ctx.add(vnode, f"{where}.{key} is {len(text):,} characters long; the kernel refuses a variable "
                           f"of {MAX_ARG:,} bytes or more")
            continue
        out[key] = text
    return tuple(out.items())


def _str_list(ctx: _Ctx, node: Node, where: str) -> tuple[str, ...]:
    if not isinstance(node, SequenceNode):
        ctx.add(node, f"{where} must be a list, not {_kind(node)}", f'write it as [{node.value!r}]'
                if isinstance(node, ScalarNode) else "")
        return ()
    out = []
    for item in node.value:
        if isinstance(item, ScalarNode) and ctx.value(item) is not None:
            text = str(ctx.value(item))
            if len(text.encode()) >= MAX_ARG:
                ctx.add(item, f"an item of {where} is {len(text):,} characters long; the kernel refuses an "
                              f"argument of {MAX_ARG:,} bytes or more")
            out.append(text)
        else:
            ctx.add(item, f"each item of {where} must be a string, not {_kind(item)}")
    return tuple(out)


def _hostlist(ctx: _Ctx, node: ScalarNode, where: str) -> list[str]:
    expr = str(node.value)
    try:
        return expand_hostlist(expr)
    except HostlistError as e:
        line, col = node.start_mark.line + 1, node.start_mark.column + 1
        quoted = node.style in ("'", '"')
        col += e.offset + (1 if quoted else 0)
        src = ctx.lines[line - 1] if line <= len(ctx.lines) else ""
        ctx.problems.append(Problem(ctx.path, line, col, f"bad hostlist {expr!r} in {where}: {e}",
                                    "write names as node[02-04] or node02,node03", src, 1))
        return []
