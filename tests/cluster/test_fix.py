"""`ddptui fix` on the namespace cluster: a cause that lives in job.env is fixed in job.env."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cluster.conftest import cluster_playbook
from tests.cluster.netns import Cluster
from tests.conftest import ddptui_exe


def ddptui(cluster: Cluster, *args: str, runs_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([ddptui_exe(), *args, "--runs-dir", str(runs_dir), "--ssh-config", str(cluster.ssh_config)],
                          capture_output=True, text=True, timeout=180)


def test_fix_a_job_wide_bad_interface_in_job_env(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                 runs_dir: Path) -> None:
    pb = cluster_playbook(tmp_path, "node[02-04]", port=29561, env="    GLOO_SOCKET_IFNAME: eth9\n")
    before = pb.read_text()
    shown = ddptui(cluster, "fix", str(pb), runs_dir=runs_dir)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "bad-socket-ifname" in shown.stdout and "-    GLOO_SOCKET_IFNAME: eth9" in shown.stdout
    assert "+    GLOO_SOCKET_IFNAME: eth0" in shown.stdout and "not written" in shown.stdout
    assert not list(tmp_path.glob("*.rev*.yaml")) and pb.read_text() == before

    applied = ddptui(cluster, "fix", str(pb), "--id", "bad-socket-ifname", "--apply", runs_dir=runs_dir)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    rev = Path(applied.stdout.strip().splitlines()[-1])
    assert rev == tmp_path / "cluster-smoke.rev1.yaml" and pb.read_text() == before
    text = rev.read_text()
    assert "nodes: node[02-04]" in text  # one change of job.env, no node split out
    changed = [(a, b) for a, b in zip(before.splitlines(), text.splitlines()) if a != b]
    assert changed == [("    GLOO_SOCKET_IFNAME: eth9", "    GLOO_SOCKET_IFNAME: eth0")]

    check = ddptui(cluster, "check", str(rev), runs_dir=runs_dir)
    assert check.returncode == 0, check.stdout + check.stderr

    nothing = ddptui(cluster, "fix", str(rev), "--apply", runs_dir=runs_dir)
    assert nothing.returncode == 1 and "nothing that ddptui can fix" in nothing.stdout
    assert not (tmp_path / "cluster-smoke.rev2.yaml").exists()


def test_fix_with_an_id_the_checks_did_not_raise(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                 runs_dir: Path) -> None:
    pb = cluster_playbook(tmp_path, ["node02", "node03"], port=29562)
    r = ddptui(cluster, "fix", str(pb), "--id", "ib-socket-mismatch", runs_dir=runs_dir)
    assert r.returncode == 1 and "raised no ib-socket-mismatch" in r.stdout and "Traceback" not in r.stderr
