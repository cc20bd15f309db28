"""What a run leaves behind besides its logs: summary.json, and the playbooks a fixed run came from."""

from __future__ import annotations

import time
from pathlib import Path

from ..diagnosis.model import Finding
from ..logs.rundir import RunDir
from ..playbook.model import Playbook
from ..states import StepState
from .nodes import NodeRun
from .orchestrator import Orchestrator


def run_summary(pb: Playbook, nodes: dict[str, NodeRun], states: dict[str, StepState], run_dir: RunDir | None,
                started: float, launch: Orchestrator, findings: list[Finding]) -> dict:
    """summary.json: each node's role, ranks, state, exit code, times, log and command; the steps,
    the results, the measured bandwidth, who failed first, what was left running, the findings, and
    which files of the run could not be written in full."""
    out = {}
    for nr in nodes.values():
        p, plan = nr.process, nr.plan
        out[nr.name] = {
            "role": plan.role if plan else ("master" if nr.name == pb.master else "worker"),
            "node_rank": plan.node_rank if plan else None,
            "ranks": [plan.ranks.start, plan.ranks.stop - 1] if plan else None,
            "state": nr.state, "error": nr.error,
            "exit_code": p.returncode if p else None, "pid": p.pid if p else None,
            "pgid": p.pgid if p else None, "lost": p.lost if p else False,
            "started": nr.started_at, "ended": nr.ended_at,
            "log": str(run_dir.log_path(nr.name)) if run_dir else None,
            "command": plan.shell_line() if plan else None,
            "root_cause": nr.agent.root_cause, "world_size": nr.agent.world_size,
        }
    return {"playbook": pb.name, "run_id": run_dir.run_id if run_dir else None,
            "started": started, "ended": time.time(), "ok": all(s.done for s in states.values()),
            "stopped_by_user": launch.stopped_by_user,  # not ok, and not a failure either
            "steps": dict(states), "nodes": out, "results": list(launch.results),
            "bandwidth": launch.bandwidth.summary(),
            "first_failure": launch.first_failure(), "detached": dict(launch.detached),
            "findings": [f.to_json() for f in findings],
            # what could not be written (a full disk): those logs end early, the run went on
            "logs_incomplete": dict(run_dir.write_errors) if run_dir else {}}


def record_revisions(new: RunDir, old: RunDir | None, pb: Playbook) -> None:
    """The new run's revisions/ holds every playbook it was made from, oldest first, the one just
    fixed last, so a bundle of it carries the whole history."""
    if old is not None and (old.path / "revisions").is_dir():
        for f in sorted((old.path / "revisions").glob("*.yaml")):
            new.write_playbook(f.read_text(encoding="utf-8"), f"revisions/{f.name}")
    new.write_playbook(pb.source, f"revisions/{Path(pb.path or 'playbook.yaml').name}")
