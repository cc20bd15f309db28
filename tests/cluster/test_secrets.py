"""Secrets on a real two-node run over ssh: never in any process's argv (the guard reads the env on
its stdin), never in the run folder, never in the headless output (issue 14, item 2)."""

from __future__ import annotations

import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import cluster_playbook
from tests.cluster.netns import Cluster
from tests.conftest import ddptui_exe, needs_torch

pytestmark = [needs_torch, pytest.mark.torch]

TOKEN = "tok-7c6d5e4f3a2b1c"
MY_VAR = "green-lantern-0815"  # innocent name, in redact:
AKIA = "AKIAJ7EXAMPLEQWERTYU"  # innocent name, AWS-shaped value
SECRETS = (TOKEN, MY_VAR, AKIA)

STEPS = """steps:
  - connect
  - {id: echo, kind: shell, run: 'echo "tok=$API_TOKEN v=$MY_VAR c=$CLOUD_ID"'}
  - launch-master
  - wait-master
  - launch-workers
  - watch
"""


def test_secrets_stay_out_of_argv_the_run_folder_and_the_output(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                                 runs_dir: Path) -> None:
    env = f"    API_TOKEN: {TOKEN}\n    MY_VAR: {MY_VAR}\n    CLOUD_ID: {AKIA}\n"
    pb = cluster_playbook(tmp_path, ["node02", "node03"], name="secret-cluster", port=29563, env=env,
                          args='["--steps", "3", "--sleep", "3", "--bw-seconds", "0.5"]',
                          extra_job="redact: [MY_VAR]\n", steps=STEPS)
    p = subprocess.Popen([ddptui_exe(), "run", str(pb), "--headless", "--runs-dir", str(runs_dir),
                          "--ssh-config", str(cluster.ssh_config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    snapshots: list[str] = []
    deadline = time.time() + 200
    while p.poll() is None and time.time() < deadline:
        # the node's view of every process's argv (the namespaces share one PID space: this sees all)
        snapshots.append(cluster.ns_exec("node03", "ps", "-ww", "-eo", "args", check=False).stdout)
        time.sleep(0.2)
    out = p.communicate(timeout=30)[0].decode("utf-8", "replace")
    assert any("torch.distributed.run" in s for s in snapshots), out[-3000:]  # it looked during the job
    for s in snapshots:
        assert not [x for x in SECRETS if x in s], "a secret in some process's argv"
    assert "tok=***REDACTED:API_TOKEN*** v=***REDACTED:MY_VAR*** c=***REDACTED:CLOUD_ID***" in out, out[-3000:]
    assert not [x for x in SECRETS if x in out]
    (run,) = list(runs_dir.iterdir())
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    for f in run.rglob("*"):
        assert stat.S_IMODE(f.stat().st_mode) == (0o700 if f.is_dir() else 0o600), f
        assert not [x for x in SECRETS if x.encode() in f.read_bytes()], f
    assert "***REDACTED:MY_VAR***" in (run / "playbook.yaml").read_text()
