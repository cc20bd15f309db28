"""A fix is data (an env change with a scope); applying it writes a new playbook revision.

The YAML is edited with ruamel.yaml's round-trip mode, so the user's comments, order and
formatting survive; the original file is never touched. The TUI's Fix dialog and `ddptui fix`
both come here, and `Runbook.relaunch` runs the revision.

Where a cause lives decides where it is fixed: a variable every node gets from `job.env` is
changed in `job.env` (one line), never split into per-node copies; a node-level value that
would override the job's is aligned too.
"""

from __future__ import annotations

import difflib
import io
import re
from dataclasses import dataclass
from pathlib import Path

from .diagnosis.model import Finding, Fix
from .errors import DdptuiError
from .hostlist import expand_hostlist
from .playbook.model import Playbook


class NotFixable(DdptuiError):
    """The finding's fix is manual (words), or there is no playbook file to revise."""


@dataclass(frozen=True)
class Proposal:
    """What applying fixes would change: the new text and its diff against the playbook as loaded."""

    findings: tuple[Finding, ...]
    old_text: str
    new_text: str
    path: Path

    @property
    def diff(self) -> str:
        return diff(self.old_text, self.new_text, self.path.name)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(f.id for f in self.findings)


def propose(pb: Playbook, findings: list[Finding] | Finding) -> Proposal:
    """The playbook with these findings' fixes applied, in order; NotFixable says why not."""
    fs = [findings] if isinstance(findings, Finding) else list(findings)
    if pb.path is None:
        raise NotFixable(f"{pb.name}: the playbook has no file to revise")
    text = pb.source or Path(pb.path).read_text(encoding="utf-8")
    for f in fs:
        if not f.fixable:
            raise NotFixable(f"{f.id}: {f.fix.explain if f.fix else 'no fix is known'} (ddptui cannot do this for you)")
    new = text
    for fix in merged(f.fix for f in fs):
        new = apply_fix(new, fix, [n.name for n in pb.nodes])
    return Proposal(tuple(fs), text, new, Path(pb.path))


def merged(fixes) -> list[Fix]:
    """Job-wide fixes as they are, and every per-node change folded into one fix: the same change
    found on each node separately is still one change of job.env."""
    out, per_node = [], {}
    for fix in fixes:
        if fix.scope == "all-nodes":
            out.append(fix)
        else:
            for node, env in fix.per_node.items():
                per_node.setdefault(node, {}).update(env)
    if per_node:
        out.append(Fix(scope="nodes", per_node=per_node))
    return out


def write_revision(proposal: Proposal) -> Path:
    """Save the proposal next to the playbook as x.revN.yaml (never overwrites); return its path."""
    return save_revision(proposal.path, proposal.new_text)


def job_wide(fix: Fix, all_nodes: list[str]) -> dict[str, str] | None:
    """The env to put in job.env when a per-node fix gives every node the same values."""
    if fix.scope == "all-nodes":
        return dict(fix.env)
    if not fix.per_node or set(fix.per_node) != set(all_nodes):
        return None
    values = list(fix.per_node.values())
    return dict(values[0]) if all(v == values[0] for v in values) else None


def _yaml():
    from ruamel.yaml import YAML  # imported when a fix is made, not when the app starts

    y = YAML()
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def apply_fix(text: str, fix: Fix, all_nodes: list[str] | None = None) -> str:
    """The playbook text with the fix's env changes applied: in job.env when every node gets the
    same values (or the fix says all-nodes), else on the named nodes."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if fix.scope == "manual":
        raise NotFixable("this fix is manual: it says what to do, ddptui cannot do it for you")
    y = _yaml()
    data = y.load(text)
    wide = job_wide(fix, all_nodes or [])
    if wide is not None:
        job = data["job"]
        if job.get("env") is None:
            job["env"] = CommentedMap()
        for k, v in wide.items():
            job["env"][k] = str(v)
        for item in data.get("nodes") if isinstance(data.get("nodes"), list) else []:
            if isinstance(item, dict) and isinstance(item.get("env"), dict):  # a node's value would win
                for k, v in wide.items():
                    if k in item["env"]:
                        item["env"][k] = str(v)
    else:
        nodes = data["nodes"]
        if isinstance(nodes, str):
            nodes = data["nodes"] = CommentedSeq(expand_hostlist(nodes))
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
