"""Load a playbook from YAML, reporting every problem at once with its `path:line:col`.

PyYAML's composer gives each node its position; we walk the node tree ourselves so that unknown
keys, duplicate keys, wrong types and missing fields are all found in one pass.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import PlaybookError, Problem
from ..hostlist import HostlistError, expand_hostlist
from .model import (
    BUILTIN_SCRIPTS,
    DEFAULT_STEPS,
    STEP_KINDS,
    Job,
    NodeSpec,
    Playbook,
    SSHOptions,
    Step,
)

TOP_KEYS = ("name", "description", "nodes", "master", "transport", "job", "steps", "ssh", "redact")
JOB_KEYS = (
    "script", "args", "nproc_per_node", "master_port", "rendezvous", "backend", "workdir",
    "python", "env", "rdzv_id", "rdzv_timeout", "rdzv_read_timeout", "master_wait_timeout",
    "stop_grace", "tee",
)
NODE_KEYS = ("name", "host", "user", "port", "transport", "nproc_per_node", "env", "python", "workdir")
STEP_KEYS = ("id", "kind", "title", "timeout", "run", "nodes")
SSH_KEYS = ("connect_timeout", "command_timeout", "keepalive")
TRANSPORTS = ("ssh", "local")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
STEP_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def workloads_dir() -> Path:
    return Path(__file__).resolve().parent.parent.parent / "workloads"


def resolve_builtin(script: str) -> Path | None:
    name = BUILTIN_SCRIPTS.get(script)
    return workloads_dir() / name if name else None


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
        val, ok = float(val), True
    if not ok:
        ctx.add(node, f"{where} must be {want}, not {_kind(node)} ({node.value!r})",
                f"write {want}" + (", e.g. 2" if int in types else ""))
        return None
    if check:
        msg = check(val)
        if msg:
            ctx.add(node, f"{where} {msg}")
            return None
    return val


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
    return None if v > 0 else "must be greater than 0"


def _port(v: Any) -> str | None:
    return None if 1 <= v <= 65535 else "must be a port number between 1 and 65535"


def _env(ctx: _Ctx, node: Node, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(node, MappingNode):
        ctx.add(node, f"{where} must be a mapping of NAME: value, not {_kind(node)}")
        return ()
    out: dict[str, str] = {}
    for knode, vnode in node.value:
        key = str(getattr(knode, "value", ""))
        if not ENV_NAME.match(key):
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
        out[key] = ("1" if val else "0") if isinstance(val, bool) else str(val)
    return tuple(out.items())


def _str_list(ctx: _Ctx, node: Node, where: str) -> tuple[str, ...]:
    if not isinstance(node, SequenceNode):
        ctx.add(node, f"{where} must be a list, not {_kind(node)}", f'write it as [{node.value!r}]'
                if isinstance(node, ScalarNode) else "")
        return ()
    out = []
    for item in node.value:
        if isinstance(item, ScalarNode) and ctx.value(item) is not None:
            out.append(str(ctx.value(item)))
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
                kw[key] = _typed(ctx, v, w, str)
            elif key == "port":
                kw[key] = _typed(ctx, v, w, int, _port)
            elif key == "nproc_per_node":
                kw[key] = _typed(ctx, v, w, int, _positive)
            elif key == "transport":
                kw[key] = _choice(ctx, v, w, TRANSPORTS) or default_transport
            elif key == "env":
                kw[key] = _env(ctx, v, w)
        out.append((NodeSpec(**{k: v for k, v in kw.items() if v is not None}), item))
    return out


def _job(ctx: _Ctx, node: Node, owner: Node) -> tuple[Job | None, dict[str, tuple[Node, Node]]]:
    keys = _mapping(ctx, node, "job", JOB_KEYS, ("script",), owner)
    kw: dict[str, Any] = {}
    for key, (_, v) in keys.items():
        w = f"job.{key}"
        if key in ("script", "workdir", "python", "rdzv_id"):
            kw[key] = _typed(ctx, v, w, str)
        elif key == "args":
            kw[key] = _str_list(ctx, v, w)
        elif key in ("nproc_per_node", "rdzv_timeout", "rdzv_read_timeout"):
            kw[key] = _typed(ctx, v, w, int, _positive)
        elif key == "master_port":
            kw[key] = _typed(ctx, v, w, int, _port)
        elif key in ("master_wait_timeout", "stop_grace"):
            kw[key] = _typed(ctx, v, w, float, _positive)
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
        timeout = _typed(ctx, keys["timeout"][1], f"{where}.timeout", float, _positive) if "timeout" in keys else None
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


def _check_script(ctx: _Ctx, job: Job, keys: dict[str, tuple[Node, Node]], base: Path,
                  nodes: list[NodeSpec]) -> None:
    """A script we can see from here (builtin, or a local node's file) must exist."""
    vnode = keys["script"][1]
    if job.script.startswith("builtin:"):
        if job.script not in BUILTIN_SCRIPTS:
            ctx.add(vnode, f"unknown builtin script {job.script!r}",
                    "the bundled workloads are: " + ", ".join(BUILTIN_SCRIPTS))
        return
    for n in nodes:
        if n.transport != "local":
            continue
        workdir = Path(n.workdir or job.workdir or base).expanduser()
        if not workdir.is_absolute():
            workdir = base / workdir
        script = Path(job.script).expanduser()
        script = script if script.is_absolute() else workdir / script
        if not script.is_file():
            ctx.add(vnode, f"script not found: {str(script)!r} (job.script on local node {n.name!r})",
                    "job.script is relative to job.workdir, or to the playbook's folder without one; "
                    "or use builtin:smoke")
        return


def parse_playbook(text: str, path: str = "<playbook>", base: Path | None = None,
                   check_files: bool = True) -> Playbook:
    """Parse playbook text; raise PlaybookError with every problem found. `check_files=False` (a
    playbook only viewed, from a bundle made elsewhere) skips looking for the job's script here."""
    ctx = _Ctx(path, text)
    base = base or Path.cwd()
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        src = ctx.lines[line - 1] if 0 < line <= len(ctx.lines) else ""
        msg = f"YAML syntax error: {e.problem or e.context}"
        raise PlaybookError(path, [Problem(path, line, col, msg, "check the indentation and quoting", src)]) from None
    if root is None:
        raise PlaybookError(path, [Problem(path, 1, 1, "the playbook is empty", "start from playbooks/local-smoke.yaml")])
    top = _mapping(ctx, root, "the playbook", TOP_KEYS, ("name", "nodes", "job"))
    name = _typed(ctx, top["name"][1], "name", str) if "name" in top else None
    description = (_typed(ctx, top["description"][1], "description", str) or "") if "description" in top else ""
    transport = (_choice(ctx, top["transport"][1], "transport", TRANSPORTS) or "ssh") if "transport" in top else "ssh"
    node_items = _nodes(ctx, top["nodes"][1], transport) if "nodes" in top else []
    names: dict[str, Node] = {}
    for spec, n in node_items:
        if spec.name in names:
            ctx.add(n, f"node {spec.name!r} is listed twice", "each node may appear once")
        names.setdefault(spec.name, n)
    nodes = [spec for spec, _ in node_items]
    master = None
    if "master" in top:
        master = _typed(ctx, top["master"][1], "master", str)
        if master and names and master not in names:
            close = difflib.get_close_matches(master, list(names), n=1)
            ctx.add(top["master"][1], f"master {master!r} is not among the nodes ({', '.join(names)})",
                    f"did you mean {close[0]!r}?" if close else "master must be one of the nodes")
            master = None
    job, job_keys = _job(ctx, top["job"][1], top["job"][0]) if "job" in top else (None, {})
    ssh = SSHOptions()
    if "ssh" in top:
        sk = _mapping(ctx, top["ssh"][1], "ssh", SSH_KEYS)
        kw = {}
        for key, (_, v) in sk.items():
            typ = int if key == "keepalive" else float
            val = _typed(ctx, v, f"ssh.{key}", typ, _positive)
            if val is not None:
                kw[key] = val
        ssh = SSHOptions(**kw)
    steps = _steps(ctx, top["steps"][1], set(names)) if "steps" in top else tuple(
        Step(id=i, kind=k, title=t) for i, k, t in DEFAULT_STEPS)
    if job is not None and check_files:
        _check_script(ctx, job, job_keys, base, nodes)
    redact = _redact(ctx, top["redact"][1]) if "redact" in top else ()
    if ctx.problems:
        ctx.problems.sort(key=lambda p: (p.line, p.col))
        raise PlaybookError(path, ctx.problems)
    assert name is not None and job is not None
    return Playbook(name=name, description=description, nodes=tuple(nodes),
                    master=master or nodes[0].name, job=job, steps=steps, ssh=ssh,
                    path=Path(path) if path != "<playbook>" else None, source=text, redact=redact)


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
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlaybookError(str(path), [Problem(str(path), 1, 1, "no such file")]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise PlaybookError(str(path), [Problem(str(path), 1, 1, f"cannot read: {e}")]) from None
    return parse_playbook(text, str(path), base=p.resolve().parent)


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
