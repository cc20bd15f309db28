"""Secrets at rest: a run folder is private to its user, and no secret value the run knows is ever
written into it or printed, headless or --json (issue 14, item 2)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from ddptui.core.launch.plan import NodePlan
from ddptui.core.logs.rundir import RunDir
from ddptui.core.playbook.loader import parse_playbook
from ddptui.core.redact import Redactor
from tests.conftest import ROOT

TOKEN = "tok-3f9a8b7c6d5e4f"  # secret by its name
MY_VAR = "blue-harbor-4711"  # innocent name, listed in redact:
AKIA = "AKIAIOSFODNN7EXAMPLE"  # innocent name, AWS-shaped value
LOGIN = "login-only-9q8w7e6r5t"  # in ddptui's own (login) environment: the local job inherits it
SECRETS = (TOKEN, MY_VAR, AKIA, LOGIN)

PLAYBOOK = f"""\
name: secrets
transport: local
nodes: localhost
redact: [MY_VAR]
job:
  script: builtin:smoke
  env:
    API_TOKEN: {TOKEN}
    MY_VAR: {MY_VAR}
    CLOUD_ID: {AKIA}
    NCCL_DEBUG: WARN
steps:
  - connect
  - id: echo
    kind: shell
    run: 'echo "t=$API_TOKEN v=$MY_VAR c=$CLOUD_ID l=$AWS_SECRET_ACCESS_KEY"; env'
  - check
"""


def ddptui(*args: str, runs: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "AWS_SECRET_ACCESS_KEY": LOGIN, "NCCL_SOCKET_IFNAME": "lo",
           "PYTHONPATH": str(ROOT / "tui") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "ddptui", *args, "--runs-dir", str(runs)], capture_output=True,
                          text=True, env=env, timeout=120, preexec_fn=lambda: os.umask(0o022))


def assert_clean(data: bytes | str, where: str) -> None:
    data = data.encode() if isinstance(data, str) else data
    leaked = [s for s in SECRETS if s.encode() in data]
    assert not leaked, f"{where} holds {leaked}"


def assert_private_and_clean(runs: Path) -> list[Path]:
    assert stat.S_IMODE(runs.stat().st_mode) == 0o700  # ddptui created the runs root: private too
    files = []
    for p in sorted(runs.rglob("*")):
        mode = stat.S_IMODE(p.stat().st_mode)
        if p.is_dir():
            assert mode == 0o700, f"{p} is {mode:o}"
        else:
            assert mode == 0o600, f"{p} is {mode:o}"
            assert_clean(p.read_bytes(), str(p))
            files.append(p)
    return files


def test_a_local_run_keeps_every_secret_out_of_its_folder_and_its_output(tmp_path: Path) -> None:
    pb = tmp_path / "secrets.yaml"
    pb.write_text(PLAYBOOK)
    runs = tmp_path / "new" / "runs"  # does not exist yet
    r = ddptui("run", str(pb), "--headless", runs=runs)
    assert "│ ✓ echo: passed" in r.stdout, r.stdout + r.stderr
    assert "t=***REDACTED:API_TOKEN*** v=***REDACTED:MY_VAR***" in r.stdout
    assert_clean(r.stdout + r.stderr, "headless output")
    rj = ddptui("run", str(pb), "--headless", "--json", runs=runs)
    assert any(json.loads(x).get("event") == "output" for x in rj.stdout.splitlines())
    assert_clean(rj.stdout + rj.stderr, "--json output")
    rc = ddptui("check", str(pb), "--json", runs=runs)
    report = json.loads(rc.stdout)
    assert_clean(rc.stdout + rc.stderr, "check --json")
    env_check = next(c for c in report["nodes"][0]["checks"] if c["id"] == "env")
    assert "NCCL_SOCKET_IFNAME=lo" in env_check["output"]  # what the env fact is for stays
    assert "AWS_" not in env_check["output"] and "HOME=" not in env_check["output"]  # nothing else
    assert set(report["nodes"][0]["facts"]["shell_env"]) == {"NCCL_SOCKET_IFNAME"}
    files = assert_private_and_clean(runs)
    names = {p.name for p in files}
    assert {"playbook.yaml", "events.jsonl", "summary.json", "localhost.log"} <= names
    copy = next(p for p in files if p.name == "playbook.yaml")
    loaded = parse_playbook(copy.read_text(), "playbook.yaml")  # masked, and still a playbook
    assert loaded.job.env_dict()["MY_VAR"] == "***REDACTED:MY_VAR***" and loaded.redact == ("MY_VAR",)


def test_rundir_masks_what_it_writes_and_the_hot_path_is_untouched_without_secrets(tmp_path: Path) -> None:
    pb = parse_playbook(PLAYBOOK.replace("transport: local", "transport: ssh"), "pb.yaml")
    r = Redactor.for_playbook(pb)
    assert set(r.values) == {TOKEN, MY_VAR, AKIA}  # ssh: the login environment is not the job's
    rd = RunDir(tmp_path / "runs", "x", pb.source, r)
    rd.append("n1", [f"value {TOKEN}", "plain"])
    rd.event({"event": "notice", "text": f"saw {AKIA} and {MY_VAR}"})
    rd.write_summary({"nodes": {"n1": {"command": f"env MY_VAR={MY_VAR} x"}}})
    rd.close()
    assert_private_and_clean(tmp_path / "runs")
    assert "value ***REDACTED:API_TOKEN***" in rd.log_path("n1").read_text()
    batch = ["nothing secret here"] * 3
    assert r.lines(batch) is batch and Redactor().lines(batch) is batch


def test_the_shown_command_masks_by_name_by_redact_list_and_by_shape() -> None:
    p = NodePlan("n1", "master", 0, 1, 0, "python", ("python", "t.py"),
                 {"API_TOKEN": TOKEN, "MY_VAR": MY_VAR, "CLOUD_ID": AKIA, "NCCL_DEBUG": "WARN"}, redact=("MY_VAR",))
    line = p.shell_line()
    assert not any(s in line for s in SECRETS) and "NCCL_DEBUG=WARN" in line and line.count("'***'") == 3
    assert TOKEN in p.shell_line(reveal_secrets=True)
