"""The Slurm allocation's own facts, for a `transport: slurm` run: what the job holds on each node.

`scontrol show job -d` lists, per group of nodes, the CPUs (CPU_IDs) and generic resources (GRES:
`gpu:4(IDX:0-3)`) granted; a job step's environment shows the SLURM_* variables a step sees. A
node granted fewer GPUs than nproc_per_node cannot run the job (gpu-count-short, before launch); fewer
CPUs than processes runs, slowly, with every rank sharing them (a warning).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..diagnosis.catalog import finding
from ..diagnosis.model import Evidence, Finding, Fix
from ..events import CheckResult, Event
from ..slurm import commands

_GPUS = re.compile(r"gpu(?::[^:(,]+)?:(\d+)")


def allocation_facts(job_id: str) -> tuple[dict[str, dict], str, str]:
    """Per node {cpus, gpus, cpu_ids, gres}, and the command and its output (the evidence)."""
    argv = ["scontrol", "show", "job", "-d", str(job_id)]
    r = commands.run(argv, timeout=15)
    out: dict[str, dict] = {}
    for line in r.stdout.splitlines():
        line = line.strip()
        if not (line.startswith("Nodes=") and "CPU_IDs=" in line):
            continue
        rec = commands.parse_record(line)
        for node in commands.hostnames(rec.get("Nodes", "")):
            out[node] = {"cpu_ids": rec.get("CPU_IDs", ""), "cpus": count_ids(rec.get("CPU_IDs", "")),
                         "gres": rec.get("GRES", ""), "gpus": gpus_in(rec.get("GRES", "")), "line": line}
    return out, " ".join(argv), r.stdout


def count_ids(ids: str) -> int:
    """`0-3,8` → 5."""
    n = 0
    for part in filter(None, ids.split(",")):
        lo, _, hi = part.partition("-")
        n += (int(hi) - int(lo) + 1) if hi.isdigit() and lo.isdigit() else (1 if lo.isdigit() else 0)
    return n


def gpus_in(gres: str) -> int:
    """`gpu:4(IDX:0-3)`, `gpu:a100:2(IDX:0-1),nic:1` → the GPUs granted (0 when none)."""
    return sum(int(m.group(1)) for m in _GPUS.finditer(gres or ""))


def check_allocation(job_id: str, nodes: dict[str, int], step_env: dict[str, dict[str, str]], needs_gpus: bool,
                     emit: Callable[[Event], None]) -> tuple[list[CheckResult], list[Finding], dict[str, dict]]:
    """One `slurm` check per node (nodes: name → nproc), the findings, and each node's facts."""
    try:
        granted, cmd, out = allocation_facts(job_id)
    except commands.SlurmError as e:
        rows = [CheckResult(n, "slurm", "warn", f"job {job_id}: cannot read the allocation: {e}", "scontrol", "")
                for n in nodes]
        for row in rows:
            emit(row)
        return rows, [], {}
    rows, findings, facts = [], [], {}
    for node, nproc in nodes.items():
        g = granted.get(node)
        env = step_env.get(node, {})
        facts[node] = {"job_id": str(job_id), "cpus": g["cpus"] if g else None, "gpus": g["gpus"] if g else None,
                       "gres": g["gres"] if g else None, "step_env": env}
        if g is None:
            row = CheckResult(node, "slurm", "fail", f"{node} is not in job {job_id}'s allocation", cmd, out)
        else:
            status, notes = "pass", []
            if needs_gpus and g["gpus"] < nproc:
                status = "fail"
                findings.append(finding(
                    "gpu-count-short", [node], f"{node}: Slurm granted {g['gpus']} GPUs, nproc_per_node is {nproc}",
                    [Evidence(node, 0, g["line"], cmd)],
                    fix=Fix(scope="manual", explain=f"ask for {nproc} GPUs per node (slurm.gpus_per_node: {nproc}), "
                                                    f"or set nproc_per_node to {g['gpus']}")))
            if g["cpus"] < nproc:
                status = "warn" if status == "pass" else status
                notes.append(f"{nproc} processes share {g['cpus']} CPU{'s' if g['cpus'] != 1 else ''}")
            summary = f"job {job_id}: {g['cpus']} CPUs, {g['gpus']} GPUs granted" + (f"; {'; '.join(notes)}" if notes else "")
            row = CheckResult(node, "slurm", status, summary, cmd, g["line"])
        rows.append(row)
        emit(row)
    return rows, findings, facts
