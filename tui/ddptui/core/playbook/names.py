"""Node names, hosts and users as OpenSSH would take them, and as the run folder will write them.

A node's name is an ssh_config alias (paramiko expands it into `%n`/`%h` of a `Match exec` line,
which a shell runs), a host name and the stem of its log files. So names and hosts hold only what
OpenSSH accepts in a host name, never start with `-`, fit a file name, and no two of them may
name one log file (`a:b` and `a_b` are both written as `a_b.log`).
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from yaml.nodes import Node

from ..hostlist import host_problem
from ..paths import safe_name
from .fields import MAX_NAME, _Ctx
from .model import NodeSpec

MAX_NODE_NAME = 200  # "<name>.times" and the bundle's "<name>.yaml" must fit NAME_MAX (255)
MAX_NODES = 4096
_USER = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._@-]*$")


def host_check(v: Any) -> str | None:
    """For _typed: why `host:` cannot be used, or None."""
    bad = host_problem(v, "")
    return bad[0].lstrip() if bad else None


def user_check(v: Any) -> str | None:
    if len(v) > MAX_NAME:
        return f"is {len(v):,} characters long; at most {MAX_NAME} are allowed"
    if not _USER.match(v):
        return (f"{v!r} is not a user name OpenSSH would pass on: letters, digits and . _ @ -, "
                "not starting with - or @")
    return None


def check_nodes(ctx: _Ctx, items: list[tuple[NodeSpec, Node]]) -> dict[str, Node]:
    """Each node's name is usable and its own; returns name -> the YAML node that names it."""
    names: dict[str, Node] = {}
    files: dict[str, str] = {}
    twice: dict[int, tuple[Node, str, int]] = {}  # per YAML node: a hostlist repeated repeats every name
    for spec, at in items:
        if spec.name in names:
            first = twice.get(id(at), (at, spec.name, 0))
            twice[id(at)] = (at, first[1], first[2] + 1)
            continue
        names[spec.name] = at
        bad = host_problem(spec.name, "node name", MAX_NODE_NAME)
        if bad:
            ctx.add(at, bad[0], "a node's name is its ssh alias and its log file's name")
            continue
        stem = safe_name(spec.name)
        other = files.setdefault(stem.casefold(), spec.name)
        if other != spec.name:
            ctx.add(at, f"nodes {other!r} and {spec.name!r} would write the same log file ({stem}.log)",
                    "rename one: names that differ only in case or in : % @ _ share a file")
    for at, name, n in twice.values():
        ctx.add(at, f"node {name!r} is listed twice" + (f" (and {n - 1:,} more names from here)" if n > 1 else ""),
                "each node may appear once")
    return names


def master_hint(master: str, names: list[str]) -> str:
    """What to write for a master that is not a node. A name one typo away ('Node02', 'node-02') gets a
    "did you mean"; one that differs in its number is not a typo of another node (node9 is not node04),
    so the hint names the nodes to choose from."""
    digits = re.sub(r"\D", "", master)
    close = [n for n in difflib.get_close_matches(master, names, n=3, cutoff=0.7) if re.sub(r"\D", "", n) == digits]
    if close:
        return f"did you mean {close[0]!r}?"
    shown = ", ".join(names[:4]) + (f", … ({len(names)} nodes)" if len(names) > 4 else "")
    return f"write one of the nodes' names: {shown}; the master runs rank 0 and the rendezvous, usually {names[0]!r}"
