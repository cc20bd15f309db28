"""The check step: preflight over the run's connected nodes, the job's script on each, and the
`check --json` report of CONTRACTS.md built from what the step learned."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from ..diagnosis.merge import merge_by_id
from ..errors import StepFailed
from ..events import CheckResult, Event, FindingRaised
from ..launch.nodes import NodeRun, fan_out
from ..launch.plan import env_for, workdir_for
from ..playbook.model import Playbook
from ..redact import Redactor
from .preflight import NodeTarget, Preflight, PreflightResult


def run_checks(pb: Playbook, nodes: dict[str, NodeRun], master_addr: str,
               emit: Callable[[Event], None]) -> PreflightResult:
    """Run every check on every node at once; their results and findings go out as events."""
    targets = [NodeTarget(nr.name, "master" if nr.name == pb.master else "worker", nr.transport, nr.python,
                          env_for(pb, nr.spec), pb.nproc_of(nr.spec)) for nr in nodes.values()]
    result = Preflight(pb, targets, master_addr, emit, pb.ssh.command_timeout).run()
    if pb.on_slurm and pb.slurm is not None and pb.slurm.job:
        _allocation(pb, nodes, result, emit)
    for name, nf in result.facts.items():
        nodes[name].facts = nf
    for f in result.findings:
        emit(FindingRaised.of(f))
    return result


def _allocation(pb: Playbook, nodes: dict[str, NodeRun], result: PreflightResult, emit: Callable[[Event], None]) -> None:
    """The allocation's facts beside the probes': CPUs and GPUs granted per node, a step's SLURM_* env."""
    from .allocation import check_allocation

    needs_gpus = result.backend == "nccl" or bool(pb.slurm.gpus_per_node)
    rows, findings, facts = check_allocation(
        pb.slurm.job, {n: pb.nproc_of(nr.spec) for n, nr in nodes.items()},
        {n: getattr(nr.transport, "step_env", {}) for n, nr in nodes.items()}, needs_gpus, emit)
    for row in rows:
        result.checks.setdefault(row.node, []).append(row)
    result.findings = merge_by_id(result.findings + findings)  # one per cause, as the probes' are
    for n, f in facts.items():
        if n in result.facts:
            result.facts[n].slurm = f


def verdict(pb: Playbook, nodes: dict[str, NodeRun], result: PreflightResult, emit: Callable[[Event], None]) -> str:
    """The check step's words, after the job's script is looked for on each node; StepFailed says
    which checks failed and which error findings stand."""
    missing = {} if pb.job.script.startswith("builtin:") else fan_out(
        list(nodes.values()), lambda nr: _check_script(pb, nr, emit))
    failed, errors = result.failed(), result.errors()
    if failed or errors or missing:
        # a cell an error finding says already is the Checks tab's to show: the cause is said once
        parts = ([f"{c.node}: {c.check}: {c.summary}" for c in failed if not any(f.says(c) for f in errors)]
                 + [f"{f.id}: {f.summary}" for f in errors] + [f"{n}: {e}" for n, e in missing.items()])
        raise StepFailed(f"{_n(len(failed), 'check')} failed, {_n(len(errors), 'error finding')}: " + "; ".join(parts))
    warns = [f for f in result.findings if f.severity == "warning"]
    return f"all checks passed on {_n(len(nodes), 'node')}" + (f" ({_n(len(warns), 'warning')})" if warns else "")


def _n(k: int, word: str) -> str:
    return f"{k} {word}{'s' if k != 1 else ''}"


def _check_script(pb: Playbook, nr: NodeRun, emit: Callable[[Event], None]) -> None:
    script = pb.job.script
    cwd = workdir_for(pb, nr.spec, nr.transport.kind)
    shell = f"cd {shlex.quote(cwd)} && test -f {shlex.quote(script)}" if cwd else f"test -f {shlex.quote(script)}"
    r = nr.transport.run([], shell=shell, timeout=pb.ssh.command_timeout)
    ok = r.rc == 0
    emit(CheckResult(nr.name, "script", "pass" if ok else "fail",
                     f"{script} {'found' if ok else 'not found'}" + (f" in {cwd}" if cwd else ""), shell))
    if not ok:
        raise StepFailed(f"{script} not found")


def check_report(pb: Playbook, source: str, nodes: dict[str, NodeRun], pf: PreflightResult | None) -> dict:
    """The `check --json` object of CONTRACTS.md, its secret values hidden."""
    out = []
    for name, nr in nodes.items():
        reachable = nr.connected
        facts = pf.facts.get(name) if pf else None
        checks = [{"id": c.check, "status": c.status, "summary": c.summary, "command": c.command,
                   "output": c.output} for c in pf.checks.get(name, [])] if pf else []
        ssh = ({"id": "ssh", "status": "pass", "summary": f"connected ({nr.transport.kind})"} if reachable
               else {"id": "ssh", "status": "fail", "summary": nr.error or "not connected"})
        checks.insert(0, {**ssh, "command": "", "output": ""})
        out.append({
            "name": name, "host": nr.transport.address if nr.transport else None,
            "role": "master" if name == pb.master else "worker", "reachable": reachable, "error": nr.error,
            "facts": facts.to_json() if facts is not None and reachable else {}, "checks": checks,
        })
    report = {"playbook": source, "backend": pf.backend if pf else pb.job.backend,
              "master_addr": pf.master_addr if pf else None, "nodes": out,
              "findings": [f.to_json() for f in pf.findings] if pf else []}
    return Redactor.for_playbook(pb).obj(report, "check")
