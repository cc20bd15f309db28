"""Issue 14: hostile strings in every playbook field, through the ssh and the local transports, with
an ssh config whose `Match exec` hands `%n` to a shell (paramiko, like OpenSSH, runs it through
one). A canary file is never created; each string is either refused in words (exit 2, the field
named) or reaches the job as literal text (the job prints back its arguments, env and cwd)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import paramiko
import pytest

from ddptui.cli import main
from ddptui.core.transport.ssh_config import _lookup
from tests.cluster.conftest import NODES
from tests.cluster.netns import Cluster
from tests.conftest import DATA, ddptui_exe, needs_torch


def hostile(canary: Path) -> list[str]:
    c = str(canary)
    return [f"$(touch {c})", f"`touch {c}`", f"; touch {c}", f"| touch {c}", f"&& touch {c}", f"|| touch {c}",
            f"\ntouch {c}", f"' ; touch {c} ; '", f'" ; touch {c} ; "', f"$(touch${{IFS}}{c})", f"> {c}",
            f"-oProxyCommand=touch {c}", f"x %n %h %d $(touch {c})", f"${{IFS}}touch${{IFS}}{c}",
            f"\\$(touch {c})", f"$'\\x74ouch' {c}", f"*; touch {c} #", f"{{touch,{c}}}", f"$((1))$(touch {c})",
            f"a\tb; touch {c}", "--help", "../../../etc/passwd", "~root", "ünïcödé ‮txt.exe", "$HOME", "%", "-"]


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue() + err.getvalue()


def match_exec_config(cluster: Cluster, tmp_path: Path) -> Path:
    """The cluster's ssh_config behind a `Match exec` that puts the node's name on a shell's line."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text('Match exec "test -n %n"\n    ServerAliveInterval 2\n\n' + cluster.ssh_config.read_text())
    return cfg


NODE_FIELDS = {
    "a node's name": lambda s: f"nodes:\n  - name: {json.dumps(s)}\n    host: node02\n",
    "a node's host": lambda s: f"nodes:\n  - name: n1\n    host: {json.dumps(s)}\n",
    "a node's user": lambda s: f"nodes:\n  - name: node02\n    user: {json.dumps(s)}\n",
    "a hostlist": lambda s: f"nodes: {json.dumps(s)}\n",
}


def test_hostile_node_names_hosts_and_users_never_reach_a_shell(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                                  runs_dir: Path) -> None:
    canary = tmp_path / "canary"
    cfg = match_exec_config(cluster, tmp_path)
    pb = tmp_path / "pb.yaml"
    seen = {"refused": 0, "tried": 0}
    for field, nodes in NODE_FIELDS.items():
        for s in hostile(canary):
            pb.write_text(f"name: hostile\n{nodes(s)}job:\n  script: builtin:smoke\nssh:\n  connect_timeout: 2\n")
            rc, out = cli("check", str(pb), "--ssh-config", str(cfg), "--runs-dir", str(runs_dir))
            assert not canary.exists(), (field, s, out)
            assert "Traceback" not in out, (field, s, out)
            if rc == 2:  # refused in words, at the field
                assert str(pb) in out and ("node" in out or "host" in out or "user" in out), (field, s, out)
                seen["refused"] += 1
            else:  # taken as a literal name: no such host, or the check ran against node02 itself
                assert rc in (0, 1), (field, s, rc, out)
                seen["tried"] += 1
    assert seen["refused"] >= 3 * len(hostile(canary)), seen  # shell characters are refused in every node field
    assert not canary.exists()
    # the config is armed: a name handed to paramiko unchecked runs the shell (what ddptui never does)
    _lookup(paramiko.SSHConfig.from_path(str(cfg)), f"x$(touch {canary})")
    assert canary.exists()


def job_playbook(tmp_path: Path, canary: Path, transport: str, nodes: list[str], port: int) -> tuple[Path, list[str], Path]:
    """Every hostile string as an argument and as an env value; the script and the workdir in a
    folder whose name is one too."""
    strings = hostile(canary)
    odd = tmp_path / f"w $(touch {canary.name}) ;`x` 'q\" {{a,b}} ~ %n"
    odd.mkdir()
    script = odd / "echo back $(id).py"
    shutil.copy(DATA / "workloads" / "echo_back.py", script)
    env = {f"H{i}": s for i, s in enumerate(strings)}
    env["ECHO_NAMES"] = ",".join(env)
    text = {
        "name": "hostile-job", "transport": transport, "nodes": nodes,
        "job": {"script": str(script), "args": strings, "workdir": str(odd), "nproc_per_node": 1,
                "master_port": port, "python": sys.executable, "rdzv_timeout": 60, "stop_grace": 5, "env": env},
        "ssh": {"connect_timeout": 3},
        "steps": ["launch-master", "wait-master", "launch-workers", "watch"],
    }
    pb = tmp_path / "job.yaml"
    pb.write_text(json.dumps(text, indent=1))  # JSON is YAML: every string exactly as written
    return pb, strings, odd


def assert_echoed_literally(stdout: str, strings: list[str], odd: Path, nodes: list[str]) -> None:
    got = [json.loads(x.split("echo-back ", 1)[1]) for x in stdout.splitlines() if "echo-back {" in x]
    assert len(got) == len(nodes), stdout[-3000:]
    for g in got:
        assert g["argv"] == strings
        assert g["env"] == {f"H{i}": s for i, s in enumerate(strings)}
        assert g["cwd"] == str(odd)


@needs_torch
@pytest.mark.torch
@pytest.mark.parametrize("transport", ["ssh", "local"])
def test_hostile_job_fields_reach_the_job_as_literal_text(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                          runs_dir: Path, transport: str) -> None:
    canary = tmp_path / "canary"
    nodes = NODES[:2] if transport == "ssh" else ["l1", "l2"]
    pb, strings, odd = job_playbook(tmp_path, canary, transport, nodes, 29571 if transport == "ssh" else 29572)
    cfg = match_exec_config(cluster, tmp_path)
    for _ in range(2):  # torch 2.13 may abort at exit after a good run: one retry
        r = subprocess.run([ddptui_exe(), "run", str(pb), "--headless", "--runs-dir", str(runs_dir),
                            "--ssh-config", str(cfg)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
        if r.returncode == 0:
            break
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    assert not canary.exists() and not (odd / "canary").exists()
    assert_echoed_literally(r.stdout, strings, odd, nodes)
    ours = [x for x in r.stdout.splitlines() if x.startswith("ddptui ")]  # not the job's own (torch's exit barrier)
    assert "Traceback" not in r.stderr and not any("Traceback" in x for x in ours)
