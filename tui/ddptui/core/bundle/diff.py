"""`ddptui diff A B`: two runs or bundles side by side, per node (before and after a fix, say)."""

from __future__ import annotations

from typing import Any

from . import facts as F
from .read import OUTCOME_WORDS, Bundle


def _pairs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, list[Any]]:
    """Only what differs: key -> [value in A, value in B] (None where absent)."""
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def diff(a: Bundle, b: Bundle) -> dict[str, Any]:
    nodes = a.nodes + [n for n in b.nodes if n not in a.nodes]
    per_node = {}
    for n in nodes:
        sa, sb = F.node_summary(a, n), F.node_summary(b, n)
        per_node[n] = {
            "in": [n in a.nodes, n in b.nodes],
            "env": _pairs(F.env(a, n), F.env(b, n)),
            "versions": _pairs(F.versions(a, n), F.versions(b, n)),
            "checks": _pairs(F.check_facts(a, n), F.check_facts(b, n)),
            "transport": [F.transport(a, n), F.transport(b, n)],
            "state": [sa["state"], sb["state"]],
            "exit_code": [sa["exit_code"], sb["exit_code"]],
            "duration_s": [sa["duration_s"], sb["duration_s"]],
            "lines": [sa["lines"], sb["lines"]],
        }
    fa, fb = set(F.finding_ids(a.findings)), set(F.finding_ids(b.findings))
    return {
        "a": _side(a),
        "b": _side(b),
        "findings": {"only_a": sorted(fa - fb), "only_b": sorted(fb - fa), "both": sorted(fa & fb)},
        "nodes": per_node,
    }


def _side(x: Bundle) -> dict[str, Any]:
    return {"source": str(x.source), "kind": x.kind, "playbook": x.name, "ok": x.summary.get("ok"),
            "outcome": x.outcome}


def render(d: dict[str, Any], width: int = 44) -> str:
    def row(label: str, va: Any, vb: Any) -> str:
        mark = " " if va == vb else "≠"
        return f"  {mark} {label:<28} {_s(va):<{width}} {_s(vb)}"

    out = [f"{k.upper()}: {d[k]['source']} ({d[k]['kind']}, {OUTCOME_WORDS[d[k]['outcome']]})" for k in ("a", "b")]
    f = d["findings"]
    out.append(f"findings: only in A: {', '.join(f['only_a']) or '—'} · only in B: {', '.join(f['only_b']) or '—'}"
               f" · both: {', '.join(f['both']) or '—'}")
    for n, nd in d["nodes"].items():
        out.append(f"\n{n}" + ("" if all(nd["in"]) else f"  (only in {'A' if nd['in'][0] else 'B'})"))
        out.append(f"    {'':<28} {'A':<{width}} B")
        for key in ("state", "exit_code", "duration_s", "transport", "lines"):
            out.append(row(key, *nd[key]))
        for group in ("env", "versions", "checks"):
            for k, (va, vb) in nd[group].items():
                out.append(row(f"{group}.{k}"[:28], va, vb))
        if not any(nd[g] for g in ("env", "versions", "checks")):
            out.append("    (env, versions and checks are the same)")
    return "\n".join(out) + "\n"


def _s(v: Any) -> str:
    return "—" if v is None else str(v)
