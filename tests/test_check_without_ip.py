"""`check` on a node whose `ip` is missing (a container image without iproute2, as the lent GPU
machine's was: the check failed there with an empty message and the run never started) or too old
for `ip -j` (an iproute2 without JSON output: CentOS 7's 3.10). The local transport runs the same probe script
as SSH does, with the PATH given here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import ROOT, ddptui_exe, needs_torch

LOCAL = ROOT / "playbooks" / "local-smoke.yaml"

# TEST DOUBLE (named as such): iproute2 3.10's `ip` (CentOS 7) knows no -j and says so as it does
# (ip.c: 'Option "%s" is unknown, try "ip -help".', exit(-1)); everything else is the real `ip`
OLD_IP = """#!/bin/sh
case "$1" in -j|-json) echo "Option \\"$1\\" is unknown, try \\"ip -help\\"." >&2; exit 255;; esac
exec {real} "$@"
"""


def _path_without_ip(into: Path) -> str:
    """A PATH of one folder: a link to every program on ours but `ip`."""
    into.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        for exe in Path(d).glob("*") if Path(d).is_dir() else ():
            if exe.name != "ip" and not (into / exe.name).exists() and os.access(exe, os.X_OK):
                (into / exe.name).symlink_to(exe)
    return str(into)


def _check(path: str, runs_dir: Path) -> tuple[int, dict]:
    r = subprocess.run([ddptui_exe(), "check", str(LOCAL), "--json", "--runs-dir", str(runs_dir)],
                       capture_output=True, text=True, timeout=240, env={**os.environ, "PATH": path})
    assert r.stdout.startswith("{"), r.stdout + r.stderr
    (node,) = json.loads(r.stdout)["nodes"]
    return r.returncode, {c["id"]: c for c in node["checks"]}


@needs_torch
def test_a_node_without_ip_is_checked_and_the_run_is_not_held_for_it(runs_dir: Path, tmp_path: Path) -> None:
    assert shutil.which("ip"), "the test machine has iproute2"
    rc, checks = _check(_path_without_ip(tmp_path / "bin"), runs_dir)
    assert checks["interfaces"]["status"] == "warn"
    assert checks["interfaces"]["summary"] == ("`ip` is not installed on localhost (iproute2): its interfaces, and "
                                               "the ones NCCL and Gloo would take, are not checked")
    assert "not found" in checks["interfaces"]["output"]
    assert rc == 0 and checks["python"]["status"] == "pass"  # the rest of the preflight ran, and passed


@needs_torch
def test_a_node_with_an_iproute2_too_old_for_json_has_its_interfaces_read(runs_dir: Path, tmp_path: Path) -> None:
    bin_ = tmp_path / "old"
    bin_.mkdir()
    (bin_ / "ip").write_text(OLD_IP.format(real=shutil.which("ip")))
    (bin_ / "ip").chmod(0o755)
    rc, checks = _check(f"{bin_}{os.pathsep}{os.environ['PATH']}", runs_dir)
    assert checks["interfaces"]["status"] == "pass" and "lo 127.0.0.1" in checks["interfaces"]["summary"]
    assert rc == 0
