"""Faults mid-run on the real cluster, driven through headless `ddptui run` (issue 14's fault suite):
sshd killed on a worker, the master's torchrun SIGKILLed, ddptui itself SIGKILLed. Each asserts
the exit code, the node named, that nothing of the job is left on any node within the guard's
deadline, and that every line ddptui printed is in the node's log.

"sshd killed" here is every sshd of the node with SIGKILL (the listener and the connection's own,
as the OOM killer or `pkill -9 sshd` do): killing only the listener, as a restart does, leaves
open connections alone, and the test checks that the job indeed runs on through that first."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ddptui.core.transport.base import silence_limit
from tests.cluster.conftest import NODES
from tests.cluster.netns import Cluster
from tests.cluster.test_lifecycle import job_pids, long_playbook
from tests.conftest import ddptui_exe, needs_torch

pytestmark = [needs_torch, pytest.mark.torch]
KEEPALIVE, STOP_GRACE = 1, 5  # the playbook's: a guard deadline of silence_limit(1) = 10 s
GUARD_DEADLINE = silence_limit(KEEPALIVE) + STOP_GRACE
SLACK = 10  # ssh, python start-up and polling on a loaded 2-CPU machine
_LINE = re.compile(r"^(\S+)\s* │ (.*)$")


class Headless:
    """`ddptui run --headless` on a long job, its output in a file (kept whole when ddptui is killed)."""

    def __init__(self, cluster: Cluster, tmp_path: Path, runs_dir: Path, port: int, name: str) -> None:
        pb = long_playbook(tmp_path, port, extra=f"  keepalive: {KEEPALIVE}\n", name=name)
        self.out = tmp_path / "out.txt"
        self.runs_dir = runs_dir
        with self.out.open("w") as f:
            self.p = subprocess.Popen([ddptui_exe(), "run", str(pb), "--headless", "--runs-dir", str(runs_dir),
                                       "--ssh-config", str(cluster.ssh_config)], stdout=f, stderr=subprocess.STDOUT)

    def __enter__(self) -> Headless:
        return self

    def __exit__(self, *exc: object) -> None:  # a test that failed midway leaves no ddptui behind
        if self.p.poll() is None:
            self.p.kill()

    def text(self) -> str:
        return self.out.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, pred, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.p.poll() is None:
            if pred(self.text()):
                return
            time.sleep(0.2)
        if not pred(self.text()):
            raise AssertionError(f"timed out waiting for {what}:\n{self.text()[-3000:]}")

    def wait_running(self) -> None:
        """Every rank printed its result: the job runs on all nodes, in its sleep."""
        self.wait_for(lambda t: t.count("ddptui-smoke result") == 6, 180, "the 6 rank results")

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise AssertionError(f"ddptui still runs {timeout} s on:\n{self.text()[-3000:]}") from None

    @property
    def run(self) -> Path:
        (run,) = [d for d in self.runs_dir.iterdir() if d.is_dir()]
        return run

    def summary(self) -> dict:
        return json.loads((self.run / "summary.json").read_text())

    def assert_printed_lines_on_disk(self) -> None:
        """Each node's lines ddptui printed are its log's first lines, in order (the log may hold more:
        disk comes first)."""
        text = self.text()
        whole = text if text.endswith("\n") else text.rsplit("\n", 1)[0]  # a killed ddptui's last line may be cut
        printed: dict[str, list[str]] = {}
        for line in whole.splitlines():
            if (m := _LINE.match(line)) and m[1] in NODES:
                printed.setdefault(m[1], []).append(m[2])
        assert set(printed) == set(NODES), printed.keys()
        for node, lines in printed.items():
            log = (self.run / f"{node}.log").read_text().splitlines()
            assert log[:len(lines)] == lines, node


def wait_gone(cluster: Cluster, nodes: list[str], t0: float, budget: float) -> float:
    """Seconds from t0 until no process of the job is left on any of `nodes`; fails after budget."""
    while any(job_pids(cluster, n) for n in nodes) and time.monotonic() - t0 < budget:
        time.sleep(0.2)
    left = {n: job_pids(cluster, n) for n in nodes if job_pids(cluster, n)}
    assert not left, f"still running {time.monotonic() - t0:.1f} s after the fault: {left}"
    return time.monotonic() - t0


def pids_of(cluster: Cluster, node: str, word: str) -> list[int]:
    return [pid for pid in job_pids(cluster, node)
            if word in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")]


def test_sshd_killed_on_a_worker_names_that_node_and_leaves_nothing(cluster: Cluster, ssh_env: Path,
                                                                    tmp_path: Path, runs_dir: Path) -> None:
    with Headless(cluster, tmp_path, runs_dir, 29591, "sshd-killed") as run:
        try:
            run.wait_running()
            cluster.stop_sshd("node04")  # the listener only, as a restart of sshd: the open connection lives on
            time.sleep(3 * KEEPALIVE + 3)  # three keepalives would have been missed by now
            assert run.p.poll() is None and "lost" not in run.text() and job_pids(cluster, "node04")
            t0 = time.monotonic()
            assert cluster.kill_sshd("node04"), "node04's connection has its own sshd"
            rc = run.wait_exit(GUARD_DEADLINE + SLACK)
            stopped = wait_gone(cluster, NODES, t0, GUARD_DEADLINE + SLACK)
        finally:
            cluster.start_sshd("node04")
    out = run.text()
    assert rc == 1, out[-3000:]
    assert "first failure: node04 (the node stopped answering)" in out, out[-3000:]
    s = run.summary()
    assert s["first_failure"] == {"node": "node04", "lost": True}
    assert {n: d["state"] for n, d in s["nodes"].items()} == {"node02": "stopped", "node03": "stopped",
                                                               "node04": "lost"}
    run.assert_printed_lines_on_disk()
    print(f"sshd killed on node04 -> ddptui exit 1, every node's job gone {stopped:.1f} s after the kill")


def test_the_masters_torchrun_killed_is_the_first_failure(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                          runs_dir: Path) -> None:
    with Headless(cluster, tmp_path, runs_dir, 29592, "master-killed") as run:
        run.wait_running()
        (agent,) = pids_of(cluster, "node02", "torch.distributed.run")
        t0, killed = time.monotonic(), time.time()
        os.kill(agent, signal.SIGKILL)
        rc = run.wait_exit(GUARD_DEADLINE + SLACK)
        stopped = wait_gone(cluster, NODES, t0, GUARD_DEADLINE + SLACK)
    out = run.text()
    assert rc == 1, out[-3000:]
    assert "first failure: node02 exitcode 137 (SIGKILL)" in out, out[-3000:]
    s = run.summary()
    assert s["first_failure"] == {"node": "node02", "exitcode": 137, "signal": "SIGKILL"}
    assert s["nodes"]["node02"]["state"] == "failed"
    # its workers fail on their own once the master's store is gone ("a rank on another node died
    # first"), or are stopped by fail-fast: either way after it, and they are not blamed
    assert {s["nodes"][n]["state"] for n in ("node03", "node04")} <= {"failed", "stopped"}
    run.assert_printed_lines_on_disk()
    print(f"master's torchrun SIGKILLed -> node02 failed {s['nodes']['node02']['ended'] - killed:.1f} s after "
          f"the kill, ddptui exit 1, every node's job gone {stopped:.1f} s after the kill")


def test_ddptui_sigkilled_leaves_nothing_on_any_node(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                      runs_dir: Path) -> None:
    with Headless(cluster, tmp_path, runs_dir, 29593, "ddptui-killed") as run:
        run.wait_running()
        assert all(job_pids(cluster, n) for n in NODES)
        t0 = time.monotonic()
        run.p.send_signal(signal.SIGKILL)
        assert run.p.wait(10) == -signal.SIGKILL
        stopped = wait_gone(cluster, NODES, t0, GUARD_DEADLINE + SLACK)
    run.assert_printed_lines_on_disk()
    for node in NODES:
        assert (run.run / f"{node}.log").read_text().count("ddptui-smoke result") == 2, node
    print(f"ddptui SIGKILLed -> every node's job gone {stopped:.1f} s after the kill")
