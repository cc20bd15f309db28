"""`ddptui attach JOBID` against the real Slurm of the namespace cluster (tests/cluster/slurm.py:
munged, slurmctld, slurmd on node02..node04): jobs submitted with the real sbatch, followed by the
real scontrol. The `slurm` fixture (conftest.py): `slurm.submit(script_text) -> job_id` (sbatch),
`slurm.env` (SLURM_CONF) and `slurm.workdir` (where the job's output is written).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


HEADER = ('hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)\n'
          'echo "ddptui: slurm job $SLURM_JOB_ID nodes $hosts master ${hosts%%,*}"\n')


def script(body: str, nodes: int = 2, out: str = "") -> str:
    return ("#!/bin/bash\n"
            f"#SBATCH --nodes={nodes}\n#SBATCH --ntasks-per-node=1\n#SBATCH --job-name=ddptui-attach-test\n"
            + (f"#SBATCH --output={out}\n" if out else "") + HEADER + body)


def attach(slurm, job_id: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **(getattr(slurm, "env", None) or {})}
    return subprocess.run([sys.executable, "-m", "ddptui", "attach", str(job_id), "--headless",
                           "--runs-dir", str(tmp_path / "runs"), *extra],
                          capture_output=True, text=True, timeout=180, env=env)


def out_path(slurm) -> str:
    wd = getattr(slurm, "workdir", None)
    return f"{wd}/slurm-%j.out" if wd else ""


def test_a_completed_job_is_followed_per_node(slurm, tmp_path: Path) -> None:
    job = slurm.submit(script("srun --label bash -c 'for i in 1 2 3; do echo \"line $i on $(hostname)\"; "
                              "sleep 0.3; done'\necho batch done\n", out=out_path(slurm)))
    r = attach(slurm, job, tmp_path, "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines()]
    lines: dict[str, list[str]] = {}
    for ev in events:
        if ev["event"] == "output":
            lines.setdefault(ev["node"], []).append(ev["text"])
    assert len(lines) == 2
    for node, got in lines.items():
        assert [x for x in got if x.startswith("line ")] == [f"line {i} on {node}" for i in (1, 2, 3)]
    assert "batch done" in lines[sorted(lines)[0]]  # the batch shell runs on the allocation's first node
    run_dir = Path(next(ev["run_dir"] for ev in events if ev["event"] == "run-started"))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["slurm"]["state"].startswith("COMPLETED") and summary["ok"]
    d = subprocess.run([sys.executable, "-m", "ddptui", "diagnose", str(run_dir)], capture_output=True, text=True,
                       timeout=60)
    assert d.returncode == 0, d.stdout


def test_a_failing_task_fails_the_attach_and_names_its_node(slurm, tmp_path: Path) -> None:
    job = slurm.submit(script("srun --label bash -c 'echo started; [ \"$SLURM_PROCID\" = 1 ] && exit 3; sleep 1'\n",
                              out=out_path(slurm)))
    r = attach(slurm, job, tmp_path)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr
    second = next(ln.split(" │ ")[0].strip() for ln in r.stdout.splitlines() if "│ srun: error:" in ln)
    assert "Exited with exit code 3" in r.stdout and second.startswith("node")


def test_a_job_that_does_not_exist_is_bad_input(slurm, tmp_path: Path) -> None:
    r = attach(slurm, "999999", tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr
