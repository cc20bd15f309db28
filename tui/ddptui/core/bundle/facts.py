"""What report and diff read out of a Bundle: versions, env, transports, exit codes, durations.

Everything here works on what was recorded (check events, summary facts, logs); nothing is run.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .read import Bundle

VERSION_KEYS = ("python", "torch", "cuda", "nccl", "driver")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_TRANSPORT = re.compile(r"(?:Using network|NET/)(IB|Socket|[A-Za-z0-9_]+)")
_ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "CUDA_", "MASTER_", "OMP_", "PYTORCH_", "SLURM_", "WORLD_SIZE")


def _facts(b: Bundle, node: str) -> dict[str, Any]:
    f = (b.summary.get("facts") or {}).get(node)
    return f if isinstance(f, dict) else {}


def _checks(b: Bundle, node: str) -> list[dict[str, Any]]:
    return [c for c in b.checks if c.get("node") == node]


def versions(b: Bundle, node: str) -> dict[str, str | None]:
    out: dict[str, str | None] = dict.fromkeys(VERSION_KEYS)
    sw = _facts(b, node).get("software") or {}
    for k in VERSION_KEYS:
        out[k] = sw.get(k) if isinstance(sw, dict) else None
    for c in _checks(b, node):
        text = str(c.get("output") or "")
        if c.get("check") in ("python", "torch", "backend") and text.startswith("{"):
            try:
                probe = json.loads(text)
            except ValueError:
                probe = {}
            for k in ("python", "torch", "cuda", "nccl"):
                out[k] = out[k] or (str(probe[k]) if probe.get(k) else None)
        if c.get("check") == "gpus" and c.get("status") != "skip":
            for row in text.splitlines():
                cols = [x.strip() for x in row.split(",")]
                if len(cols) >= 5 and cols[0].isdigit():
                    out["driver"] = out["driver"] or cols[4]
    if not out["nccl"]:
        for _, line in b.node_logs.get(node, []):
            if m := _NCCL_VERSION.search(line):
                out["nccl"] = m.group(1)
                break
    return out


def env(b: Bundle, node: str) -> dict[str, str]:
    """The job's env on that node: the recorded facts, else the launch command's `env K=V ...`."""
    fenv = _facts(b, node).get("env")
    out: dict[str, str] = dict(fenv) if isinstance(fenv, dict) else {}
    for p in b.plan:
        if p.get("node") == node and isinstance(p.get("command"), str):
            out.update(command_env(p["command"]))
    return out


def command_env(command: str) -> dict[str, str]:
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return {}
    if "&&" in words:
        words = words[words.index("&&") + 1:]
    out = {}
    if words and words[0] == "env":
        for w in words[1:]:
            m = _ENV_LINE.match(w)
            if not m:
                break
            out[m.group(1)] = m.group(2)
    return out


def transport(b: Bundle, node: str) -> str | None:
    """What NCCL said it used (`Using network IB`), else what the checks predicted."""
    for _, line in b.node_logs.get(node, []):
        if "Using network" in line or "NET/IB : Using" in line or "NET/Socket : Using" in line:
            m = re.search(r"Using network (\w+)", line) or re.search(r"NET/(\w+) : Using", line)
            if m:
                return m.group(1)
    pred = _facts(b, node).get("predicted_transport")
    if pred:
        return f"{pred} (predicted)"
    for c in _checks(b, node):
        if c.get("check") == "ib" and "→ NET/" in str(c.get("summary", "")):
            return str(c["summary"]).split("→ NET/", 1)[1].split()[0] + " (predicted)"
    return None


def node_summary(b: Bundle, node: str) -> dict[str, Any]:
    d = (b.summary.get("nodes") or {}).get(node) or {}
    started, ended = d.get("started"), d.get("ended")
    dur = round(ended - started, 1) if isinstance(started, (int, float)) and isinstance(ended, (int, float)) else None
    return {"state": d.get("state"), "exit_code": d.get("exit_code"), "duration_s": dur, "role": d.get("role"),
            "node_rank": d.get("node_rank"), "lines": len(b.node_logs.get(node, []))}


def first_warn(b: Bundle, node: str) -> tuple[int, str] | None:
    """The first `NCCL WARN` line of a node (what NCCL's maintainers ask for), with its line number."""
    for i, (_, line) in enumerate(b.node_logs.get(node, [])):
        if "NCCL WARN" in line:
            return (b.line_number(node, i) or 0, line)
    return None


def check_facts(b: Bundle, node: str) -> dict[str, str]:
    """Each check's status and summary, as one comparable map."""
    return {str(c.get("check")): f"{c.get('status')}: {c.get('summary')}" for c in _checks(b, node)}


def finding_ids(findings: list[dict[str, Any]], active_only: bool = True) -> list[str]:
    return sorted({f.get("id", "?") for f in findings if not active_only or f.get("state", "active") == "active"})
