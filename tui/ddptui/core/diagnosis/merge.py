"""One finding per id: the same cause found on several nodes, said once for all of them (the
preflight's checks, a stage's findings). The catalog says what a cause is; this only merges what
was found of it."""

from __future__ import annotations

from collections.abc import Iterable

from .model import SEVERITIES, Finding, Fix


def merge_by_id(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per id: the same cause found on several nodes becomes one finding that covers them.

    Nodes and evidence are kept per node, in order; the fixes for scope "nodes" merge into one
    per_node map (its env: what every node gets alike); the most severe severity wins. A finding's
    summary that starts with its node ("node02: ...") merges into "node02, node03: ..." when the
    rest is the same on every node.
    """
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.id, []).append(f)
    return [g[0] if len(g) == 1 else _merge(g) for g in groups.values()]


def _merge(group: list[Finding]) -> Finding:
    nodes = list(dict.fromkeys(n for f in group for n in f.nodes))
    return Finding(group[0].id, min((f.severity for f in group), key=SEVERITIES.index), nodes,
                   _merged_summary(group, nodes), list(dict.fromkeys(e for f in group for e in f.evidence)),
                   " ".join(dict.fromkeys(f.explanation for f in group if f.explanation)),
                   _merged_fix([f.fix for f in group if f.fix is not None]),
                   "active" if any(f.state == "active" for f in group) else group[0].state)


def _merged_summary(group: list[Finding], nodes: list[str]) -> str:
    rests = []
    for f in group:
        prefix = ", ".join(f.nodes) + ": "
        if not f.summary.startswith(prefix):
            break
        rests.append(f.summary[len(prefix):])
    else:
        if len(set(rests)) == 1:
            return f"{', '.join(nodes)}: {rests[0]}"
    return "; ".join(dict.fromkeys(f.summary for f in group))


def _merged_fix(fixes: list[Fix]) -> Fix | None:
    if not fixes:
        return None
    if all(f == fixes[0] for f in fixes):
        return fixes[0]
    explain = "; ".join(dict.fromkeys(f.explain for f in fixes if f.explain))
    alternatives = tuple(dict.fromkeys(a for f in fixes for a in f.alternatives))
    per_node: dict[str, dict[str, str]] = {}
    for f in fixes:
        if f.scope == "nodes":
            for node, env in f.per_node.items():
                per_node.setdefault(node, {}).update(env)
    if not per_node:  # differing manual (or conflicting all-nodes) fixes: say them all, apply none
        return Fix(scope="manual", explain=explain, alternatives=alternatives)
    envs = list(per_node.values())
    common = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
    return Fix(env=common, scope="nodes", per_node=per_node, explain=explain, alternatives=alternatives)
