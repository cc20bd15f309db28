"""Real local runs (2-process gloo torchrun on this machine) with seeded secrets, made once per session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT

HF = "hf_FAKEfakeFAKEfake0123456789"
MY_VAR = "blue-harbor-4711"  # innocent-looking; hidden only because the playbook lists it in redact:
AKIA = "AKIAIOSFODNN7EXAMPLE"  # under an innocent name
GHP = "ghp_" + "R2d2C3poBB8Leia0Luke1Han2Solo3Yoda4Q"  # literally on a shell step's command line
SECRETS = (HF, MY_VAR, AKIA, GHP)

PLAYBOOK = """\
name: secret-smoke
transport: local
nodes: localhost
redact: [MY_VAR]
job:
  script: builtin:smoke
  args: ["--steps", "2"]
  nproc_per_node: 2
  master_port: {port}
  backend: gloo
  rdzv_timeout: 60
  env:
    OMP_NUM_THREADS: 1
    GLOO_SOCKET_IFNAME: lo
    TORCH_CPP_LOG_LEVEL: WARNING
    HF_TOKEN: {hf}
    MY_VAR: {my}
    CLOUD_ID: {akia}
    NCCL_DEBUG: {debug}
steps:
  - connect
{check}  - id: echo
    kind: shell
    run: 'echo "my var is $MY_VAR"; echo "token $HF_TOKEN"; echo "cloud=$CLOUD_ID"; printf "\\033[31mred\\033[0m\\n"; echo "push with {ghp}"'
  - launch-master
  - wait-master
  - launch-workers
  - watch
"""


def env(**extra: str) -> dict[str, str]:
    e = {**os.environ, **extra}
    e["PYTHONPATH"] = str(ROOT / "tui") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def ddptui(*args: str, cwd: Path | None = None, timeout: float = 120, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddptui", *args], capture_output=True, text=True,
                          env=env(**extra_env), cwd=cwd, timeout=timeout)


def _real_run(base: Path, port: int, debug: str, check: bool) -> Path:
    pb = base / "secret.yaml"
    pb.write_text(PLAYBOOK.format(port=port, hf=HF, my=MY_VAR, akia=AKIA, ghp=GHP, debug=debug,
                                  check="  - check\n" if check else ""))
    for attempt in range(2):  # torch can abort at exit after a good run (see tests/test_local_run.py)
        runs = base / f"runs{attempt}"
        r = ddptui("run", str(pb), "--headless", "--runs-dir", str(runs), timeout=240)
        (run,) = list(runs.iterdir())
        if r.returncode == 0:
            return run
    pytest.fail(f"the local run failed twice: {r.stdout[-2000:]}{r.stderr[-2000:]}")


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _real_run(tmp_path_factory.mktemp("run-a"), 29547, "WARN", check=True)


@pytest.fixture(scope="session")
def real_run_b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _real_run(tmp_path_factory.mktemp("run-b"), 29548, "INFO", check=False)


def fake_run(root: Path, logs: dict[str, str], *, findings: list | None = None, checks: list | None = None,
             playbook: str = "name: fake\nnodes: [node02, node03]\njob: {script: train.py}\n") -> Path:
    """A run directory written by hand: what `ddptui run` leaves, without running anything."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "playbook.yaml").write_text(playbook)
    nodes = {n: {"role": "master" if i == 0 else "worker", "node_rank": i, "state": "failed", "exit_code": 1,
                 "started": 1000.0, "ended": 1010.0 + i} for i, n in enumerate(logs)}
    (root / "summary.json").write_text(json.dumps({"playbook": "fake", "run_id": root.name, "ok": False,
                                                   "started": 999.0, "ended": 1020.0, "nodes": nodes,
                                                   "findings": findings or []}))
    events = [{"event": "run-started", "t": 999.0}] + [{**c, "event": "check"} for c in checks or []]
    (root / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    for n, text in logs.items():
        (root / f"{n}.log").write_text(text)
    return root


def corpus(name: str) -> str:
    return (DATA / "corpus" / "nccl" / name).read_text()
