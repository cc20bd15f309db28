"""What a playbook's local nodes need from this machine, checked before anything runs: the job's
script, the working folder (a `~user` in it must be a user here) and the python that starts the job."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from yaml.nodes import Node

from .fields import _Ctx
from .model import BUILTIN_SCRIPTS, Job, NodeSpec


def _expand(ctx: _Ctx, at: Node, what: str, value: str) -> Path | None:
    """`value` with its `~`/`~user` expanded, or None after reporting why it cannot be."""
    try:
        return Path(value).expanduser()
    except RuntimeError:  # ~nosuchuser: Path.expanduser() raises rather than leaving it be
        user = value[1:].split("/", 1)[0]
        ctx.add(at, f"{what} {value!r} starts with ~{user}, and there is no user {user!r} on this machine",
                "write the folder's full path")
        return None


def _python(ctx: _Ctx, at: Node, where: str, python: str) -> None:
    path = _expand(ctx, at, where, python)
    if path is None:
        return
    found = str(path) if os.sep in python else shutil.which(python)
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        ctx.add(at, f"{where} {python!r}: no such program on this machine",
                "give the path of a python with torch installed, or leave python out to use ddptui's own")


def check_local(ctx: _Ctx, job: Job, keys: dict[str, tuple[Node, Node]], base: Path,
                nodes: list[tuple[NodeSpec, Node]]) -> None:
    """A script we can see from here (builtin, or a local node's file) must exist; so must a local
    node's python and its workdir's ~user. Problems go to `ctx`, each once."""
    vnode = keys["script"][1]
    if job.script.startswith("builtin:") and job.script not in BUILTIN_SCRIPTS:
        ctx.add(vnode, f"unknown builtin script {job.script!r}", "the bundled workloads are: " + ", ".join(BUILTIN_SCRIPTS))
    local = [(n, at) for n, at in nodes if n.transport == "local"]
    if job.python and any(not n.python for n, _ in local):
        _python(ctx, keys["python"][1], "job.python", job.python)
    for n, at in local:
        if n.python:
            _python(ctx, at, f"the python of node {n.name!r}", n.python)
    if not local or job.script.startswith("builtin:"):
        return
    n, at = local[0]  # the script is looked for once: every local node sees the same files
    where, wnode = (f"the workdir of node {n.name!r}", at) if n.workdir else ("job.workdir", keys.get("workdir", (vnode, vnode))[1])
    workdir = _expand(ctx, wnode, where, n.workdir or job.workdir or str(base))
    script = _expand(ctx, vnode, "job.script", job.script)
    if workdir is None or script is None:
        return
    if not workdir.is_absolute():
        workdir = base / workdir
    script = script if script.is_absolute() else workdir / script
    try:
        found = script.is_file()
    except OSError as e:  # a name too long for the file system, a folder we may not enter...
        ctx.add(vnode, f"job.script {str(script)[:200]!r}: cannot look at it: {e.strerror or e}")
        return
    if not found:
        ctx.add(vnode, f"script not found: {str(script)!r} (job.script on local node {n.name!r})",
                "job.script is relative to job.workdir, or to the playbook's folder without one; "
                "or use builtin:smoke")
