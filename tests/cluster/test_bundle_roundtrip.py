"""Round trip on the real cluster: a 2-node run that raises ib-socket-mismatch, run headless, bundled,
then opened read-only; the viewer shows what the live run recorded, and replays the finding when it
was raised.

The workload is the named test double tests/data/workloads/nccl_replay.py: NET/IB lines on node 0,
NET/Socket on node 1; node 0 hangs a few seconds (REPLAY_HANG_SECONDS), then the job completes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddptui.core.bundle import open_bundle
from ddptui.ui.app import DdptuiApp
from ddptui.ui.dialogs.fix import FixDialog
from ddptui.ui.screens.bundle import BundleScreen
from ddptui.ui.widgets.checks import CHECK_COLUMNS, ChecksTab
from tests.bundle.conftest import ddptui
from tests.cluster.conftest import cluster_playbook
from tests.cluster.netns import Cluster
from tests.conftest import DATA, needs_torch

pytestmark = [needs_torch, pytest.mark.torch]
REPLAY = DATA / "workloads" / "nccl_replay.py"


def replay_playbook(tmp_path: Path, port: int, hang: int = 6) -> Path:
    p = cluster_playbook(tmp_path, ["node02", "node03"], port=port, name="replay-roundtrip",
                         env=f"    REPLAY_HANG_SECONDS: {hang}\n", args="[]")
    p.write_text(p.read_text().replace("script: builtin:smoke", f"script: {REPLAY}")
                 .replace("nproc_per_node: 2", "nproc_per_node: 1"))
    return p


async def test_a_cluster_run_opens_as_it_ran(cluster: Cluster, ssh_env: Path, tmp_path: Path, runs_dir: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    pb = replay_playbook(tmp_path, 29556)
    r = ddptui("run", str(pb), "--headless", "--runs-dir", str(runs_dir), "--ssh-config", str(cluster.ssh_config),
               timeout=240)
    assert "ib-socket-mismatch" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    (run,) = list(runs_dir.iterdir())
    live = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    summary = json.loads((run / "summary.json").read_text())
    out = tmp_path / "replay.ddpt"
    assert ddptui("bundle", str(run), "-o", str(out)).returncode == 0
    b = open_bundle(out)
    monkeypatch.chdir(tmp_path)
    app = DdptuiApp(bundle=b)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause(0.3)
        s = app.screen
        assert isinstance(s, BundleScreen) and s.note == ""
        # the steps, as the live run went through them
        assert s.history == [(e["step"], e["state"]) for e in live if e["event"] == "step"]
        assert {k: str(v) for k, v in s.history} == summary["steps"]
        # each node's pane: its state, its command, every line of its log
        for node in ("node02", "node03"):
            pane = s.pane_grid.pane(node)
            assert str(pane.state) == summary["nodes"][node]["state"]
            log = (run / f"{node}.log").read_text().splitlines()
            assert pane.total_lines == len(log) and list(pane.buffer)[1:] == b.lines(node)
            assert list(pane.buffer)[0].startswith("$ ") and "nccl_replay.py" in list(pane.buffer)[0]
        assert "NET/IB" in "\n".join(s.pane_grid.pane("node02").buffer)
        assert "NET/Socket" in "\n".join(s.pane_grid.pane("node03").buffer)
        # the checks matrix, with each cell's evidence
        checks = [e for e in live if e["event"] == "check"]
        cells = {(c["node"], c["check"] if c["check"] in CHECK_COLUMNS else "probe") for c in checks}
        assert set(s.query_one(ChecksTab).matrix.results) == cells
        # the findings, as the run ended
        assert sorted(f.id for f in s.findings) == sorted(f["id"] for f in summary["findings"])
        (f,) = [f for f in s.findings if f.id == "ib-socket-mismatch"]
        assert sorted(f.nodes) == ["node02", "node03"]

        # replay: the finding appears at the moment the live run raised it, with its evidence in the panes
        (raised,) = [e for e in live if e["event"] == "finding" and e["finding"]["id"] == "ib-socket-mismatch"]
        # before it, node02's replayed NCCL (corpus 92) said "GPU Direct RDMA Disabled ... (no module)": information
        word = next(e for e in live if e["event"] == "finding" and e["finding"]["id"] == "gpudirect-rdma-missing")
        assert word["t"] < raised["t"] and word["finding"]["severity"] == "info"
        await pilot.press("0")
        assert s.findings == [] and s.pane_grid.pane("node02").total_lines == 0
        await pilot.press("full_stop")  # the next finding worth stopping at: information is not one
        assert s.t == raised["t"] and sorted(x.id for x in s.findings) == ["gpudirect-rdma-missing", "ib-socket-mismatch"]
        (mismatch,) = [x for x in s.findings if x.id == "ib-socket-mismatch"]
        for e in mismatch.evidence:
            if e.line:
                assert e.text in s.pane_grid.pane(e.node).buffer
        assert str(s.pane_grid.pane("node02").state) == "running"  # it was still hanging then
        # its fix as a diff; applying it needs a cluster, and says so
        await pilot.press("4", "f")
        assert isinstance(app.screen, FixDialog)
        assert "+    NCCL_IB_DISABLE: '1'" in str(app.screen.query_one("#diff").render())
        await pilot.click("#apply")
        await pilot.pause(0.2)
        assert any(n.message.startswith("read-only: this is a bundle from") for n in app._notifications)
        assert s.runbook.run_path is None
    assert [p.name for p in runs_dir.iterdir()] == [run.name]  # opening ran nothing
