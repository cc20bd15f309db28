"""A real 3-node torchrun (gloo, 2 processes per node) over ssh, headless and in the TUI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ddptui.core.logs.results import parse_result_line
from ddptui.core.transport.factory import SSHSettings
from ddptui.ui.app import DdptuiApp
from ddptui.ui.screens.playbook import PlaybookScreen
from ddptui.ui.widgets.panes import NodePane
from tests.cluster.conftest import NODES, cluster_playbook
from tests.cluster.netns import Cluster
from tests.conftest import ddptui_exe, needs_torch

pytestmark = [needs_torch, pytest.mark.torch]


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([ddptui_exe(), *args], capture_output=True, text=True, timeout=timeout)


def results(text: str) -> list[dict]:
    return [r for r in (parse_result_line(x) for x in text.splitlines()) if r]


def test_three_node_smoke_job_headless(cluster: Cluster, ssh_env: Path, tmp_path: Path, runs_dir: Path) -> None:
    pb = cluster_playbook(tmp_path)
    for _ in range(2):  # torch 2.13 may abort at exit after a good run: one retry
        r = run_cli("run", str(pb), "--headless", "--runs-dir", str(runs_dir), "--ssh-config", str(cluster.ssh_config))
        if r.returncode == 0:
            break
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    by_node: dict[str, list[dict]] = {}
    for line in r.stdout.splitlines():
        if "ddptui-smoke result" in line:
            prefix, _, rest = line.partition(" │ ")
            by_node.setdefault(prefix.strip(), []).append(parse_result_line(rest))
    assert sorted(by_node) == NODES
    # node ranks follow the playbook order, master first: node02 has ranks 0-1, node03 2-3, node04 4-5
    for i, node in enumerate(NODES):
        got = by_node[node]
        assert sorted(x["rank"] for x in got) == [2 * i, 2 * i + 1]
        assert all(x["host"] == node and x["world_size"] == 6 and x["all_reduce"] == "ok" and x["sum"] == "15"
                   for x in got), got
    run = next(p for p in sorted(runs_dir.iterdir()) if json.loads((p / "summary.json").read_text())["ok"])
    summary = json.loads((run / "summary.json").read_text())
    for i, node in enumerate(NODES):
        log = (run / f"{node}.log").read_text()
        assert sorted(x["rank"] for x in results(log)) == [2 * i, 2 * i + 1]
        assert summary["nodes"][node]["exit_code"] == 0
        assert summary["nodes"][node]["node_rank"] == i
    assert "--master-addr=10.213.0.2" in summary["nodes"]["node04"]["command"]
    # the start order is in the events: master running before any worker launches
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    order = [(e["node"], e["state"]) for e in events if e["event"] == "node" and e["state"] in ("launching", "running")]
    assert order[:2] == [("node02", "launching"), ("node02", "running")]
    steps = [e["step"] for e in events if e["event"] == "step" and e["state"] == "passed"]
    assert steps.index("wait-master") < steps.index("launch-workers")


def test_a_down_node_stops_the_run_before_anything_is_launched(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                               runs_dir: Path) -> None:
    pb = cluster_playbook(tmp_path, ["node02", "dead", "node03"], port=29541)
    r = run_cli("run", str(pb), "--headless", "--runs-dir", str(runs_dir), "--ssh-config", str(cluster.ssh_config))
    assert r.returncode == 1
    assert f"dead: unreachable — timed out after 3 s connecting to {cluster.nodes['dead'].ip}:22" in r.stdout
    assert "✗ connect: failed — 1 of 3 nodes unreachable" in r.stdout
    assert "launch-master: running" not in r.stdout
    for node in ("node02", "node03"):
        procs = [open(f"/proc/{p}/cmdline").read() for p in cluster.pids(node) if Path(f"/proc/{p}").exists()]
        assert not any("torch.distributed.run" in c for c in procs)


async def test_three_node_job_in_the_tui_one_pane_per_node(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                           runs_dir: Path) -> None:
    pb = cluster_playbook(tmp_path, port=29542)
    for _ in range(2):
        app = DdptuiApp(playbook=pb, runs_dir=runs_dir, ssh_settings=SSHSettings(ssh_config=cluster.ssh_config))
        async with app.run_test(size=(200, 60)) as pilot:
            screen = app.screen
            assert isinstance(screen, PlaybookScreen)
            assert [p.node for p in screen.query(NodePane)] == NODES
            await pilot.press("a")
            await app.workers.wait_for_complete()
            await pilot.pause()
            panes = {p.node: list(p.log.lines) for p in screen.query(NodePane)}
            roles = {p.node: (p.role, p.ranks, p.state) for p in screen.query(NodePane)}
            ok = screen.runbook.states["watch"] == "passed"
        if ok:
            break
    assert ok, screen.history
    assert roles == {"node02": ("master", "0-1", "exited"), "node03": ("worker", "2-3", "exited"),
                     "node04": ("worker", "4-5", "exited")}
    for i, node in enumerate(NODES):
        assert sorted(x["rank"] for x in results("\n".join(panes[node]))) == [2 * i, 2 * i + 1]
