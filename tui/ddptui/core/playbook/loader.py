"""Load a playbook from YAML, reporting every problem at once with its `path:line:col`.

PyYAML's composer gives each node its position; we walk the node tree ourselves so that unknown
keys, duplicate keys, wrong types and missing fields are all found in one pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yaml.nodes import Node, ScalarNode, SequenceNode

from ..errors import PlaybookError, Problem
from .bandwidth import parse_bandwidth
from .fields import (
    MAX_NAME, _at_most, _choice, _Ctx, _env, _hostlist, _kind, _mapping, _nproc, _path, _port, _seconds, _str_list,
    _typed,
)
from .local import check_local
from .names import MAX_NODE_NAME, MAX_NODES, check_nodes, host_check, master_hint, user_check
from .slurm import check_slurm_nodes, parse_slurm
from .source import compose, fail, read_text
from .model import (
    BUILTIN_SCRIPTS,
    DEFAULT_STEPS,
    SLURM_STEPS,
    STEP_KINDS,
    Job,
    NodeSpec,
    Playbook,
    SSHOptions,
    Step,
)

TOP_KEYS = ("name", "description", "nodes", "master", "transport", "job", "steps", "ssh", "redact", "bandwidth",
            "slurm")
JOB_KEYS = (
    "script", "args", "nproc_per_node", "master_port", "rendezvous", "backend", "workdir",
    "python", "env", "rdzv_id", "rdzv_timeout", "rdzv_read_timeout", "master_wait_timeout",
    "stop_grace", "tee",
)
NODE_KEYS = ("name", "host", "user", "port", "transport", "nproc_per_node", "env", "python", "workdir")
STEP_KEYS = ("id", "kind", "title", "timeout", "run", "nodes")
SSH_KEYS = ("connect_timeout", "command_timeout", "keepalive")
TRANSPORTS = ("ssh", "local", "slurm")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_PROBLEMS = 100  # shown at once; past that, a count
STEP_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def workloads_dir() -> Path:
    return Path(__file__).resolve().parent.parent.parent / "workloads"


def resolve_builtin(script: str) -> Path | None:
    name = BUILTIN_SCRIPTS.get(script)
    return workloads_dir() / name if name else None


def _nodes(ctx: _Ctx, node: Node, default_transport: str) -> list[tuple[NodeSpec, Node]]:
    out: list[tuple[NodeSpec, Node]] = []
    if isinstance(node, ScalarNode):
        if not isinstance(ctx.value(node), str):
            ctx.add(node, f"nodes must be a hostlist or a list, not {_kind(node)}")
            return []
        return [(NodeSpec(name=n, transport=default_transport), node) for n in _hostlist(ctx, node, "nodes")]
    if not isinstance(node, SequenceNode):
        ctx.add(node, f"nodes must be a hostlist or a list, not {_kind(node)}")
        return []
    if not node.value:
        ctx.add(node, "nodes is empty", "name at least one node")
    for i, item in enumerate(node.value):
        where = f"nodes[{i}]"
        if len(out) > MAX_NODES:
            ctx.add(item, f"more than {MAX_NODES} nodes", "split the job into several playbooks")
            break
        if isinstance(item, ScalarNode):
            for n in _hostlist(ctx, item, where):
                out.append((NodeSpec(name=n, transport=default_transport), item))
            continue
        keys = _mapping(ctx, item, where, NODE_KEYS, ("name",))
        if "name" not in keys:
            continue
        name = _typed(ctx, keys["name"][1], f"{where}.name", str)
        if not name:
            continue
        kw: dict[str, Any] = {"name": name, "transport": default_transport}
        for key, (_, v) in keys.items():
            w = f"{where}.{key}"
            if key in ("host", "user", "python", "workdir"):
                kw[key] = _typed(ctx, v, w, str, {"host": host_check, "user": user_check}.get(key, _path))
            elif key == "port":
                kw[key] = _typed(ctx, v, w, int, _port)
            elif key == "nproc_per_node":
                kw[key] = _typed(ctx, v, w, int, _nproc)
            elif key == "transport":
                kw[key] = _choice(ctx, v, w, TRANSPORTS) or default_transport
                if (kw[key] == "slurm") != (default_transport == "slurm"):
                    ctx.add(v, f"{w}: a job runs either all in one Slurm allocation or not at all",
                            "set `transport: slurm` at the top level, for every node")
            elif key == "env":
                kw[key] = _env(ctx, v, w)
        out.append((NodeSpec(**{k: v for k, v in kw.items() if v is not None}), keys["name"][1]))
    return out


def _job(ctx: _Ctx, node: Node, owner: Node) -> tuple[Job | None, dict[str, tuple[Node, Node]]]:
    keys = _mapping(ctx, node, "job", JOB_KEYS, ("script",), owner)
    kw: dict[str, Any] = {}
    for key, (_, v) in keys.items():
        w = f"job.{key}"
        if key in ("script", "workdir", "python", "rdzv_id"):
            kw[key] = _typed(ctx, v, w, str, _at_most(MAX_NAME) if key == "rdzv_id" else _path)
        elif key == "args":
            kw[key] = _str_list(ctx, v, w)
        elif key == "nproc_per_node":
            kw[key] = _typed(ctx, v, w, int, _nproc)
        elif key in ("rdzv_timeout", "rdzv_read_timeout"):
            kw[key] = _typed(ctx, v, w, int, _seconds)
        elif key == "master_port":
            kw[key] = _typed(ctx, v, w, int, _port)
        elif key in ("master_wait_timeout", "stop_grace"):
            kw[key] = _typed(ctx, v, w, float, _seconds)
        elif key == "rendezvous":
            kw[key] = _choice(ctx, v, w, ("static", "c10d"))
        elif key == "backend":
            kw[key] = _choice(ctx, v, w, ("auto", "gloo", "nccl"))
        elif key == "env":
            kw[key] = _env(ctx, v, w)
        elif key == "tee":
            kw[key] = _typed(ctx, v, w, bool)
    if not kw.get("script"):
        return None, keys
    return Job(**{k: v for k, v in kw.items() if v is not None}), keys


def _steps(ctx: _Ctx, node: Node, node_names: set[str]) -> tuple[Step, ...]:
    if not isinstance(node, SequenceNode):
        ctx.add(node, f"steps must be a list, not {_kind(node)}")
        return ()
    steps: list[Step] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(node.value):
        where = f"steps[{i}]"
        if isinstance(item, ScalarNode):  # shorthand: `- connect`
            kind = _choice(ctx, item, where, STEP_KINDS)
            if kind == "shell":
                ctx.add(item, f"{where}: a shell step needs `run:`", "write it as {kind: shell, run: ...}")
                continue
            if kind:
                sid = kind if kind not in seen else f"{kind}-{i + 1}"
                seen[sid] = item.start_mark.line + 1
                steps.append(Step(id=sid, kind=kind, title=dict((k, t) for k, _, t in DEFAULT_STEPS).get(kind, kind)))
            continue
        keys = _mapping(ctx, item, where, STEP_KEYS, ("kind",))
        kind = _choice(ctx, keys["kind"][1], f"{where}.kind", STEP_KINDS) if "kind" in keys else None
        sid = _typed(ctx, keys["id"][1], f"{where}.id", str) if "id" in keys else kind
        if sid and not STEP_ID.match(sid):
            ctx.add(keys["id"][1], f"{where}.id {sid!r} must be lowercase letters, digits, - or _")
            sid = None
        if sid and sid in seen:
            ctx.add(keys["id"][1] if "id" in keys else item,
                    f"duplicate step id {sid!r} (first on line {seen[sid]})", "give each step its own `id:`")
            sid = None
        title = _typed(ctx, keys["title"][1], f"{where}.title", str) if "title" in keys else None
        timeout = _typed(ctx, keys["timeout"][1], f"{where}.timeout", float, _seconds) if "timeout" in keys else None
        run = _typed(ctx, keys["run"][1], f"{where}.run", str) if "run" in keys else None
        nodes: tuple[str, ...] = ()
        if "nodes" in keys:
            v = keys["nodes"][1]
            nodes = tuple(_hostlist(ctx, v, f"{where}.nodes")) if isinstance(v, ScalarNode) else _str_list(ctx, v, f"{where}.nodes")
            for n in nodes:
                if n not in node_names:
                    ctx.add(v, f"{where}.nodes names {n!r}, which is not among the playbook's nodes")
        if kind == "shell" and not run:
            ctx.add(item, f"{where}: a shell step needs `run:`", "add `run: <command>`")
            continue
        if kind and sid:
            seen[sid] = item.start_mark.line + 1
            default_title = dict((k, t) for k, _, t in DEFAULT_STEPS).get(kind, run or kind)
            steps.append(Step(id=sid, kind=kind, title=title or default_title, timeout=timeout, run=run, nodes=nodes))
    return tuple(steps)


def parse_playbook(text: str, path: str = "<playbook>", base: Path | None = None,
                   check_files: bool = True) -> Playbook:
    """Parse playbook text; raise PlaybookError with every problem found. `check_files=False` (a
    playbook only viewed, from a bundle made elsewhere) skips looking for the job's script here."""
    ctx = _Ctx(path, text)
    base = base or Path.cwd()
    root = compose(text, path)
    if root is None:
        raise PlaybookError(path, [Problem(path, 1, 1, "the playbook is empty", "start from playbooks/local-smoke.yaml")])
    top = _mapping(ctx, root, "the playbook", TOP_KEYS, ("name", "job"))
    name = _typed(ctx, top["name"][1], "name", str, _at_most(MAX_NODE_NAME)) if "name" in top else None
    description = (_typed(ctx, top["description"][1], "description", str) or "") if "description" in top else ""
    transport = (_choice(ctx, top["transport"][1], "transport", TRANSPORTS) or "ssh") if "transport" in top else "ssh"
    if "nodes" not in top and transport != "slurm":  # on Slurm the allocation may name them
        ctx.add(root, "missing required key 'nodes' in the playbook", "add `nodes:` to the playbook")
    node_items = _nodes(ctx, top["nodes"][1], transport) if "nodes" in top else []
    names = check_nodes(ctx, node_items)
    nodes = [spec for spec, _ in node_items]
    master = None
    if "master" in top:
        master = _typed(ctx, top["master"][1], "master", str)
        if master and names and master not in names:
            ctx.add(top["master"][1], f"master {master!r} is not among the nodes ({', '.join(names)})",
                    master_hint(master, list(names)))
            master = None
    job, job_keys = _job(ctx, top["job"][1], top["job"][0]) if "job" in top else (None, {})
    ssh = SSHOptions()
    if "ssh" in top:
        sk = _mapping(ctx, top["ssh"][1], "ssh", SSH_KEYS)
        kw = {}
        for key, (_, v) in sk.items():
            typ = int if key == "keepalive" else float
            val = _typed(ctx, v, f"ssh.{key}", typ, _seconds)
            if val is not None:
                kw[key] = val
        ssh = SSHOptions(**kw)
    slurm, slurm_keys = parse_slurm(ctx, top["slurm"][1] if "slurm" in top else None)
    check_slurm_nodes(ctx, slurm, slurm_keys, transport, len(names), top.get("transport", (None, None))[1], root)
    if master and not names and "nodes" not in top:  # nodes given but unreadable: that is the problem said
        ctx.add(top["master"][1], "master is named but the nodes are not: the allocation names them",
                "drop `master:` (the first node allocated is the master), or name the nodes")
        master = None
    steps = _steps(ctx, top["steps"][1], set(names)) if "steps" in top else tuple(
        Step(id=i, kind=k, title=t) for i, k, t in (SLURM_STEPS if transport == "slurm" else DEFAULT_STEPS))
    if job is not None and check_files:
        check_local(ctx, job, job_keys, base, node_items)
    redact = _redact(ctx, top["redact"][1]) if "redact" in top else ()
    bandwidth = parse_bandwidth(ctx, top["bandwidth"][1] if "bandwidth" in top else None)
    if ctx.problems:
        ctx.problems.sort(key=lambda p: (p.line, p.col))
        raise fail(path, ctx.problems, MAX_PROBLEMS)
    assert name is not None and job is not None
    return Playbook(name=name, description=description, nodes=tuple(nodes),
                    master=master or (nodes[0].name if nodes else ""), job=job, steps=steps, ssh=ssh,
                    path=Path(path) if path != "<playbook>" else None, source=text, redact=redact, bandwidth=bandwidth,
                    transport=transport, slurm=slurm)


def _redact(ctx: _Ctx, node: Node) -> tuple[str, ...]:
    """`redact: [NAME, ...]`: env names whose values are hidden wherever a run is handed on."""
    if not isinstance(node, SequenceNode):
        ctx.add(node, f"redact must be a list of environment variable names, not {_kind(node)}",
                f"write it as [{node.value}]" if isinstance(node, ScalarNode) and node.value else "")
        return ()
    out: list[str] = []
    for item in node.value:
        val = ctx.value(item) if isinstance(item, ScalarNode) else None
        if not isinstance(val, str) or not ENV_NAME.match(val):
            shown = repr(val) if isinstance(item, ScalarNode) else _kind(item)
            ctx.add(item, f"{shown} in redact is not an environment variable name",
                    "names are letters, digits and _, not starting with a digit")
        elif val not in out:
            out.append(val)
    return tuple(out)


def load_playbook(path: str | Path) -> Playbook:
    """Load a playbook file; relative paths in it are relative to its folder."""
    p = Path(path)
    return parse_playbook(read_text(p), str(path), base=p.resolve().parent)


@dataclass(frozen=True)
class PlaybookEntry:
    """A playbook found for the picker."""

    path: Path
    name: str
    description: str
    origin: str  # "here", "config", "examples"
    error: str = ""


def discover_playbooks(folders: list[tuple[str, Path]]) -> list[PlaybookEntry]:
    """Every *.yaml in the given folders, with its name (or why it does not load)."""
    out: list[PlaybookEntry] = []
    seen: set[Path] = set()
    for origin, folder in folders:
        if not folder.is_dir():
            continue
        for f in sorted(folder.glob("*.y*ml")):
            real = f.resolve()
            if real in seen:
                continue
            seen.add(real)
            try:
                pb = load_playbook(f)
                out.append(PlaybookEntry(f, pb.name, pb.description, origin))
            except PlaybookError as e:
                first = e.problems[0].render().splitlines()[0] if e.problems else str(e)
                out.append(PlaybookEntry(f, f.stem, "", origin, error=first))
    return out
