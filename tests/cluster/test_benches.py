"""The cluster's benchmarks, bench.fanout and bench.preflight, run once each on the test cluster's
nodes so that they do not rot: they connect, run what they measure and print their figures with
the ratio against their baseline. No time is asserted here (the figures are the benches' to print
and README's to quote); what is asserted is that each figure and ratio is there."""

from __future__ import annotations

import re
import shutil

import pytest

from bench import fanout, preflight
from tests.cluster.netns import Cluster

NAMES = ["node02", "node03", "node04"]
MS = r"\d+\.\d ms"


def test_fanout_prints_one_node_all_at_once_in_a_row_and_openssh(cluster: Cluster, ssh_env, capsys) -> None:
    fanout.measure(cluster, NAMES, reps=1)
    out = capsys.readouterr().out
    for row in (rf"1 node +{MS}", rf"3 nodes at once +{MS} +\d+\.\d\dx one node", rf"3 nodes one at a time +{MS}",
                rf"OpenSSH ssh, 3 at once +{MS}", r"ddptui 3 nodes / OpenSSH 3 nodes: \d+\.\d\dx"):
        assert re.search(row, out), f"no {row!r} in:\n{out}"


def test_preflight_prints_ddptui_pdsh_and_their_ratio(cluster: Cluster, ssh_env, capsys) -> None:
    if not shutil.which("pdsh"):
        pytest.skip("pdsh is not installed (scripts/test installs it as root)")
    preflight.measure(cluster, NAMES[:2], reps=1)  # a failed preflight raises, naming the node and check
    out = capsys.readouterr().out
    for row in (r"preflight of 2 nodes", rf"ddptui connect \+ check .* +{MS}", rf"pdsh, the same probe .* +{MS}",
                r"ratio ddptui / pdsh: \d+\.\d\dx",
                rf"login node's CPU: ddptui's process {MS}, pdsh and its ssh clients {MS}: \d+\.\d\dx",
                r"the whole machine's CPU \(the nodes' work included\): ddptui \d+\.\d\d s, pdsh \d+\.\d\d s"):
        assert re.search(row, out), f"no {row!r} in:\n{out}"
