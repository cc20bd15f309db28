"""The finding model: one cause, its evidence on each node, a fix, and a state."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

SEVERITIES = ("error", "warning", "info")


def graver(a: str, b: str) -> bool:
    """Severity `a` is graver than `b` (an error than a warning, a warning than information)."""
    return SEVERITIES.index(a) < SEVERITIES.index(b)


@dataclass(frozen=True)
class Evidence:
    node: str
    line: int  # 1-based line in that node's log or in the command's output; 0: a fact, not a line
    text: str
    command: str = ""


@dataclass(frozen=True)
class Fix:
    """An env change with a scope, and its cost in words."""

    env: dict[str, str] = field(default_factory=dict)  # for scope all-nodes
    scope: str = "all-nodes"  # all-nodes | nodes | manual
    per_node: dict[str, dict[str, str]] = field(default_factory=dict)  # for scope nodes
    explain: str = ""
    alternatives: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Fix:
        return cls(env=dict(d.get("env") or {}), scope=d.get("scope") or "manual",
                   per_node={k: dict(v) for k, v in (d.get("per_node") or {}).items()},
                   explain=d.get("explain") or "", alternatives=tuple(d.get("alternatives") or ()))

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"env": self.env, "scope": self.scope, "explain": self.explain}
        if self.per_node:
            d["per_node"] = self.per_node
        if self.alternatives:
            d["alternatives"] = list(self.alternatives)
        return d


@dataclass
class Finding:
    id: str
    severity: str
    nodes: list[str]
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    explanation: str = ""
    fix: Fix | None = None
    state: str = "active"  # active | resolved

    @property
    def fixable(self) -> bool:
        """ddptui can apply the fix itself (an env change), not only say what to do."""
        return self.fix is not None and self.fix.scope != "manual" and bool(self.fix.env or self.fix.per_node)

    @property
    def active(self) -> bool:
        return self.state == "active"

    def says(self, check) -> bool:
        """This finding says what a check's result on one of its nodes says: the result names it
        (`GLOO_SOCKET_IFNAME=eth9 (the playbook sets it): bad-socket-ifname`), or its evidence is that
        check's command's answer (the taken port's listener). `check`: a CheckResult."""
        return check.node in self.nodes and (
            any(part.endswith(f": {self.id}") for part in check.summary.split("; "))
            or any(e.node == check.node and e.command and e.command == check.command for e in self.evidence))

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Finding:
        """The inverse of to_json (a summary.json's findings, a bundle's)."""
        ev = [Evidence(e.get("node", ""), int(e.get("line") or 0), e.get("text", ""), e.get("command", ""))
              for e in d.get("evidence") or ()]
        return cls(d["id"], d.get("severity", "error"), list(d.get("nodes") or ()), d.get("summary", ""), ev,
                   d.get("explanation", ""), Fix.from_json(d["fix"]) if d.get("fix") else None,
                   d.get("state", "active"))

    def snapshot(self) -> Finding:
        """A copy whose lists no later change of this finding touches."""
        return replace(self, nodes=list(self.nodes), evidence=list(self.evidence))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "severity": self.severity, "nodes": list(self.nodes), "summary": self.summary,
            "evidence": [asdict(e) for e in self.evidence], "explanation": self.explanation,
            "fix": self.fix.to_json() if self.fix else None, "state": self.state,
        }
