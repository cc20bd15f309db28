"""A firewall that starts dropping TCP mid-run: no line says anything until torch's timeouts, minutes
later. ddptui asks a quiet worker whether it still reaches the master's port and names the one that
does not, with what it waits for; a quiet healthy job raises nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ddptui.core.events import FindingRaised
from ddptui.core.launch.reach import QUIET
from tests.cluster.netns import Cluster
from tests.cluster.test_lifecycle import start_long_job, wait_results
from tests.conftest import needs_torch

pytestmark = [needs_torch, pytest.mark.torch]
RULE = ("INPUT", "-i", "eth0", "-p", "tcp", "!", "--dport", "22", "-j", "DROP")  # every TCP port but ssh's


def firewall(cluster: Cluster, node: str, on: bool) -> None:
    cluster.ns_exec(node, "iptables", "-A" if on else "-D", *RULE, check=on)


def test_a_firewall_mid_run_is_named_long_before_the_timeouts(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                              runs_dir: Path) -> None:
    rb, rec = start_long_job(cluster, tmp_path, runs_dir, 29557, name="stall")
    try:
        wait_results(rb, 6)  # every rank is in its --sleep: the job is quiet from now on
        time.sleep(QUIET + 8)  # quiet long enough to be asked: a healthy job answers
        blocked = [e for e in rec.events if isinstance(e, FindingRaised) and e.finding.id == "firewall-or-unreachable"]
        assert blocked == [], blocked
        firewall(cluster, "node04", True)
        ev = rec.wait(lambda e: isinstance(e, FindingRaised) and e.finding.id == "firewall-or-unreachable", 60,
                      "the blocked worker to be named")  # within a minute, not torch's 600 s
        f = ev.finding
        assert f.nodes == ["node04"] and f.severity == "error"
        assert "node04 can no longer open a TCP connection to the master 10.213.0.2:29557" in f.summary
        assert "timed out" in f.evidence[0].text or "failed" in f.evidence[0].text
        assert rb.active("firewall-or-unreachable") and all(nr.running for nr in rb.launch.nodes.values())
    finally:
        firewall(cluster, "node04", False)
        rb.stop_job()
        rb.close()
