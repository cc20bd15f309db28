"""A fix is data: an env change with a scope. Applying one makes a new playbook revision.

The YAML is edited with ruamel.yaml's round-trip mode, so the user's comments, order and
formatting survive; the original file is never touched.
"""

from __future__ import annotations

import difflib
import io
import re
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from .diagnosis.model import Fix
from .inventory import expand_hostlist


def _yaml() -> YAML:
    y = YAML()
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def apply_fix(text: str, fix: Fix) -> str:
    """The playbook text with the fix's env changes applied (all nodes, or the named nodes)."""
    if fix.scope == "manual":
        raise ValueError("this fix is manual: it says what to do, ddptui cannot do it for you")
    y = _yaml()
    data = y.load(text)
    if fix.scope == "all-nodes":
        job = data["job"]
        env = job.get("env")
        if env is None:
            env = job["env"] = CommentedMap()
        for k, v in fix.env.items():
            env[k] = str(v)
        # a node-level value would win over the job's: align those too
        for item in data.get("nodes") if isinstance(data.get("nodes"), list) else []:
            if isinstance(item, dict) and isinstance(item.get("env"), dict):
                for k, v in fix.env.items():
                    if k in item["env"]:
                        item["env"][k] = str(v)
    else:
        nodes = data["nodes"]
        if isinstance(nodes, str):
            nodes = CommentedSeq(expand_hostlist(nodes))
            data["nodes"] = nodes
        for target, env in fix.per_node.items():
            for i, item in enumerate(list(nodes)):
                names = expand_hostlist(item) if isinstance(item, str) else [item.get("name")]
                if target not in names:
                    continue
                if isinstance(item, str):  # split a hostlist item so the one node can carry env
                    node = CommentedMap([("name", target), ("env", CommentedMap())])
                    nodes.pop(i)
                    for j, n in enumerate(names):
                        nodes.insert(i + j, node if n == target else n)
                    item = node
                if item.get("env") is None:
                    item["env"] = CommentedMap()
                for k, v in env.items():
                    item["env"][k] = str(v)
                break
    out = io.StringIO()
    y.dump(data, out)
    return out.getvalue()


def diff(old: str, new: str, name: str = "playbook.yaml") -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{name}", f"b/{name}"))


def next_revision_path(path: Path) -> Path:
    """playbooks/x.yaml -> playbooks/x.rev1.yaml, x.rev1.yaml -> x.rev2.yaml (never overwrites)."""
    stem = re.sub(r"\.rev\d+$", "", path.stem)
    n = 1
    while True:
        p = path.with_name(f"{stem}.rev{n}{path.suffix}")
        if not p.exists():
            return p
        n += 1


def save_revision(path: Path, text: str) -> Path:
    target = next_revision_path(path)
    with open(target, "x", encoding="utf-8") as f:  # "x": never clobber a file that appeared meanwhile
        f.write(text)
    return target
