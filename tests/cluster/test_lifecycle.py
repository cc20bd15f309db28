"""Process lifecycle on the real cluster: stop leaves nothing, a killed worker and a cut link are
named at once (the cut node's guard stops its job by itself while the link is still down), and a
worker started before the master is explained while it waits."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from ddptui.core.events import FindingRaised, NodeState
from ddptui.core.playbook.loader import load_playbook
from ddptui.core.runbook import Runbook
from ddptui.core.transport.base import silence_limit
from ddptui.core.transport.factory import SSHSettings, make_factory
from tests.cluster.conftest import NODES, cluster_playbook
from tests.cluster.netns import Cluster

from tests.conftest import needs_torch

pytestmark = [needs_torch, pytest.mark.torch]


def job_pids(cluster: Cluster, node: str) -> list[int]:
    out = []
    for pid in cluster.pids(node):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
                continue
        except OSError:
            continue
        if "torch.distributed.run" in cmd or "smoke-" in cmd or "ddptui-guard" in cmd or "node-side guard" in cmd:
            out.append(pid)
    return out


class Recorder:
    def __init__(self) -> None:
        self.events: list = []
        self.lock = threading.Lock()

    def __call__(self, ev) -> None:
        with self.lock:
            self.events.append(ev)

    def wait(self, pred, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for ev in self.events:
                    if pred(ev):
                        return ev
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")


def runbook(cluster: Cluster, pb_path: Path, runs_dir: Path, rec: Recorder) -> Runbook:
    return Runbook(load_playbook(pb_path), rec, runs_dir, make_factory(SSHSettings(ssh_config=cluster.ssh_config)))


def long_playbook(tmp_path: Path, port: int, nodes=NODES, extra: str = "", name: str = "long") -> Path:
    """Every rank prints its result, then sleeps 300 s: a job that is quiet and running. `extra`: more
    `ssh:` settings (`  keepalive: 1\n`)."""
    pb = cluster_playbook(tmp_path, nodes, port=port, name=name, args='["--steps", "2", "--sleep", "300"]')
    if extra:
        pb.write_text(pb.read_text().replace("ssh:\n", "ssh:\n" + extra))
    return pb


def start_long_job(cluster, tmp_path, runs_dir, port, nodes=NODES, extra="", name="long") -> tuple[Runbook, Recorder]:
    pb = long_playbook(tmp_path, port, nodes, extra, name)
    rec = Recorder()
    rb = runbook(cluster, pb, runs_dir, rec)
    for step in ("connect", "launch-master", "wait-master", "launch-workers"):
        assert rb.run_step(step), rb.states
    return rb, rec


def wait_results(rb: Runbook, n: int, timeout: float = 240) -> None:
    """Until `n` ranks printed their result: the job started everywhere (6 torch imports on a
    loaded 2-core CI box can take minutes: this is how long to wait, not a speed claim)."""
    deadline = time.monotonic() + timeout
    while len(rb.launch.results) < n and time.monotonic() < deadline:
        time.sleep(0.1)
    got = sorted((r["node"], r.get("rank")) for r in rb.launch.results)
    states = {name: nr.state for name, nr in rb.launch.nodes.items()}
    assert len(got) >= n, (got, states)  # which rank is missing, and how its node stands


def test_stop_leaves_no_process_and_frees_the_port(cluster: Cluster, ssh_env: Path, tmp_path: Path, runs_dir: Path) -> None:
    rb, rec = start_long_job(cluster, tmp_path, runs_dir, 29553)
    wait_results(rb, 6)  # all 6 ranks are in their --sleep now
    for node in NODES:
        assert job_pids(cluster, node), node
    pgids = {n: nr.process.pgid for n, nr in rb.launch.nodes.items()}
    assert all(pgids.values())
    rb.stop_job()
    rb.close()
    time.sleep(0.5)
    for node in NODES:
        assert job_pids(cluster, node) == [], node
    ss = cluster.ns_exec("node02", "ss", "-Hltn", "sport = :29553").stdout
    assert ss.strip() == ""
    summary = json.loads((rb.run_path / "summary.json").read_text())
    assert {n: d["pgid"] for n, d in summary["nodes"].items()} == pgids
    assert all(d["state"] == "stopped" for d in summary["nodes"].values())


def test_kill_9_of_one_nodes_workers(cluster: Cluster, ssh_env: Path, tmp_path: Path, runs_dir: Path) -> None:
    rb, rec = start_long_job(cluster, tmp_path, runs_dir, 29554, name="kill")
    wait_results(rb, 6)
    victims = [pid for pid in cluster.pids("node04")
               if "smoke-" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
               and "torch.distributed.run" not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")]
    assert len(victims) == 2
    os.kill(victims[0], signal.SIGKILL)
    failed = rec.wait(lambda e: isinstance(e, NodeState) and e.node == "node04" and e.state == "failed", 60,
                      "node04 to be marked failed")
    assert failed.rc != 0
    ok = rb.run_step("watch")
    assert not ok
    ff = rb.first_failure()
    assert ff["node"] == "node04" and ff["exitcode"] == -9 and ff["signal"] == "SIGKILL"
    rb.close()
    summary = json.loads((rb.run_path / "summary.json").read_text())
    assert summary["first_failure"]["node"] == "node04"
    assert summary["nodes"]["node04"]["root_cause"]["signal"] == "SIGKILL"
    time.sleep(0.5)
    for node in NODES:
        assert job_pids(cluster, node) == [], node


def test_a_cut_link_marks_the_node_lost_and_its_guard_stops_the_job_there(cluster: Cluster, ssh_env: Path,
                                                                          tmp_path: Path, runs_dir: Path) -> None:
    rb, rec = start_long_job(cluster, tmp_path, runs_dir, 29555, name="cut", extra="  keepalive: 1\n")
    wait_results(rb, 6)
    before = (rb.run_path / "node04.log").read_text()
    assert job_pids(cluster, "node04")
    # the guard on node04 hears nothing from ddptui once the link is cut: it stops the job by itself
    budget = silence_limit(1) + rb.pb.job.stop_grace + 10  # its deadline, TERM's grace, and some slack
    cluster.cut_link("node04")
    try:
        t0 = time.monotonic()
        rec.wait(lambda e: isinstance(e, NodeState) and e.node == "node04" and e.state == "lost", 30, "node04 lost")
        for node in ("node02", "node03"):
            rec.wait(lambda e, n=node: isinstance(e, NodeState) and e.node == n and e.state in ("stopped", "failed", "exited"),
                     40, f"{node} to stop")
        steps = [e for e in rec.events if getattr(e, "kind", "") == "step"]
        assert not rb.run_step("watch")
        watch_failed = [e for e in rec.events if getattr(e, "kind", "") == "step" and e.step == "watch"
                        and e.state == "failed"][-1]
        assert "node04 lost" in watch_failed.message and len(steps) >= 8
        assert rb.summary()["nodes"]["node04"]["state"] == "lost"
        assert (rb.run_path / "node04.log").read_text().startswith(before)  # what arrived is kept
        assert sum("ddptui-smoke result" in x for x in before.splitlines()) == 2
        for node in ("node02", "node03"):
            assert job_pids(cluster, node) == [], node
        while job_pids(cluster, "node04") and time.monotonic() - t0 < budget:
            time.sleep(0.2)
        gone_after = time.monotonic() - t0
        assert job_pids(cluster, "node04") == [], f"node04's job still runs {gone_after:.1f} s after the cut"
        print(f"link cut -> node04's guard, torchrun and ranks gone: {gone_after:.1f} s")
    finally:
        cluster.restore_link("node04")
        rb.close()


def test_a_worker_started_first_is_explained_while_it_waits(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                            runs_dir: Path) -> None:
    pb = cluster_playbook(tmp_path, ["node02", "node03"], port=29556, name="order",
                          steps="steps: [connect, launch-workers, launch-master, wait-master, watch]")
    rec = Recorder()
    rb = runbook(cluster, pb, runs_dir, rec)
    try:
        assert rb.run_step("connect") and rb.run_step("launch-workers")
        f = rec.wait(lambda e: isinstance(e, FindingRaised) and e.finding.id == "master-not-started", 60,
                     "master-not-started")
        before = rec.events[:rec.events.index(f)]  # said while node03 waits, not after torch's rendezvous timeout
        assert not [e for e in before if isinstance(e, NodeState) and e.node == "node03"
                    and e.state in ("exited", "failed", "lost", "stopped")]
        assert rb.node_state("node03") == "running"
        assert f.finding.nodes == ["node03"] and f.finding.state == "active"
        assert "Rendezvous'ing worker group" in f.finding.evidence[0].text
        assert rb.run_step("launch-master") and rb.run_step("wait-master")
        for _ in range(2):
            if rb.run_step("watch"):
                break
        rec.wait(lambda e: isinstance(e, FindingRaised) and e.finding.id == "master-not-started"
                 and e.finding.state == "resolved", 60, "the finding to be resolved")
    finally:
        rb.close()
