"""Bandwidth on the namespace cluster: a 2-node gloo job measures its inter-node all_reduce busbw
(one rank per node, over the veth pair and the bridge); with one node's link shaped to 20 Mbit/s
the same job raises slow-interconnect against the playbook's bandwidth.min_busbw_gbps."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ddptui.core.logs.results import parse_bandwidth_line
from tests.cluster.conftest import cluster_playbook
from tests.cluster.netns import Cluster
from tests.conftest import ddptui_exe, needs_torch

pytestmark = [needs_torch, pytest.mark.torch]
NODES = ["node02", "node03"]
# 20 Mbit/s is 0.0025 GB/s; an unshaped veth carries gloo at well over 0.1 GB/s here: in between
MIN_BUSBW = 0.02


def run_job(cluster: Cluster, tmp_path: Path, runs_dir: Path, port: int) -> tuple[subprocess.CompletedProcess, dict]:
    pb = cluster_playbook(tmp_path, NODES, name=f"bw-{port}", port=port, args='["--steps", "1", "--size", "1024"]')
    pb.write_text(pb.read_text() + f"bandwidth:\n  min_busbw_gbps: {MIN_BUSBW}\n")
    for _ in range(2):  # torch 2.13 may abort at exit after a good run: one retry
        r = subprocess.run([ddptui_exe(), "run", str(pb), "--headless", "--json", "--runs-dir", str(runs_dir),
                            "--ssh-config", str(cluster.ssh_config)], capture_output=True, text=True, timeout=240)
        if r.returncode == 0:
            break
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines()]
    return r, events


def inter_node(events: list[dict]) -> dict[str, dict]:
    """node -> its inter-node bandwidth line (local rank 0 of each node prints one)."""
    out = {}
    for e in events:
        if e["event"] == "output" and (d := parse_bandwidth_line(e["text"])) and d["scope"] == "inter-node":
            out[e["node"]] = d
    return out


def slow_findings(events: list[dict]) -> list[dict]:
    return [e["finding"] for e in events if e["event"] == "finding" and e["finding"]["id"] == "slow-interconnect"]


def test_a_two_node_job_reports_its_bandwidth(cluster: Cluster, ssh_env: Path, tmp_path: Path, runs_dir: Path) -> None:
    r, events = run_job(cluster, tmp_path, runs_dir, 29571)
    lines = inter_node(events)
    assert sorted(lines) == NODES, r.stdout[-3000:]
    d = lines["node02"]
    assert d["ranks"] == 2 and d["backend"] == "gloo" and d["busbw_gbps"] == d["algbw_gbps"] > MIN_BUSBW
    assert lines["node03"]["busbw_gbps"] == d["busbw_gbps"]  # the group's agreed figure, on both nodes
    summary = events[-1]["summary"]
    bw = summary["bandwidth"]
    assert bw["inter_node"]["busbw_gbps"] == d["busbw_gbps"] and bw["inter_node"]["nodes"] == NODES
    assert bw["world"]["ranks"] == 4 and bw["single_node"] is False and bw["min_busbw_gbps"] == MIN_BUSBW
    watch = [e for e in events if e["event"] == "step" and e["step"] == "watch" and e["state"] == "passed"]
    assert watch[0]["message"].startswith("every node exited 0, 4 rank results ok; inter-node busbw ")
    assert not slow_findings(events)
    print(f"\nunshaped: inter-node busbw {d['busbw_gbps']} GB/s at {d['size']} B, world {bw['world']['busbw_gbps']}")


def test_a_slowed_link_raises_slow_interconnect(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                runs_dir: Path) -> None:
    cluster.shape_link("node03", "20mbit")
    try:
        r, events = run_job(cluster, tmp_path, runs_dir, 29572)
    finally:
        cluster.unshape_link("node03")
    d = inter_node(events)["node02"]
    assert d["busbw_gbps"] < 0.0025 * 1.2, d  # the token bucket's rate, give or take the burst
    (f,) = {x["summary"]: x for x in slow_findings(events)}.values()
    assert f["severity"] == "warning" and f["nodes"] == NODES
    assert f"below the playbook's bandwidth.min_busbw_gbps ({MIN_BUSBW:g} GB/s)" in f["summary"]
    assert "gloo, 2 nodes" in f["summary"] and "wrong interface" in f["explanation"]
    summary = events[-1]["summary"]
    # the run's one problem; torch 2.13's torchrun may add its exit barrier race, information only
    # (seen once in CI, 2026-12-05: the agents' exit barrier failed after both nodes' workers succeeded)
    assert [x["id"] for x in summary["findings"] if x["severity"] != "info"] == ["slow-interconnect"]
    assert {x["id"] for x in summary["findings"] if x["severity"] == "info"} <= {"exit-barrier-race"}
    assert summary["bandwidth"]["inter_node"]["busbw_gbps"] == d["busbw_gbps"]
    print(f"\nshaped 20mbit: inter-node busbw {d['busbw_gbps']} GB/s at {d['size']} B, "
          f"world {summary['bandwidth']['world']['busbw_gbps']}")
