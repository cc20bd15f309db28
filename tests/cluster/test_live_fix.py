"""End to end on the real cluster: split NCCL transports seen live, fixed from the TUI, relaunched healthy.

The workload is a named test double (tests/data/workloads/nccl_replay.py) that prints recorded
NCCL init lines: NET/IB on node 0 unless NCCL_IB_DISABLE=1, NET/Socket elsewhere.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ddptui.core.playbook.loader import load_playbook
from ddptui.core.transport.factory import SSHSettings
from ddptui.ui.app import DdptuiApp
from textual.widgets import TabbedContent

from ddptui.ui.dialogs.fix import FixDialog
from ddptui.ui.screens.playbook import PlaybookScreen
from tests.cluster.conftest import cluster_playbook
from tests.cluster.netns import Cluster
from tests.conftest import DATA, needs_torch

pytestmark = [needs_torch, pytest.mark.torch]
REPLAY = DATA / "workloads" / "nccl_replay.py"


def job_pids(cluster: Cluster, node: str) -> list[int]:
    out = []
    for pid in cluster.pids(node):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "nccl_replay" in cmd or "torch.distributed.run" in cmd:
            out.append(pid)
    return out


async def test_ib_socket_mismatch_is_fixed_from_the_tui(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                        runs_dir: Path) -> None:
    pb_path = cluster_playbook(tmp_path, ["node02", "node03"], port=29552, name="replay",
                               env="    REPLAY_HANG_SECONDS: 300\n", args="[]")
    pb_path.write_text(pb_path.read_text().replace("script: builtin:smoke", f"script: {REPLAY}")
                       .replace("nproc_per_node: 2", "nproc_per_node: 1"))
    app = DdptuiApp(playbook=pb_path, runs_dir=runs_dir, ssh_settings=SSHSettings(ssh_config=cluster.ssh_config))
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.screen
        assert isinstance(screen, PlaybookScreen)
        await pilot.press("a")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(f.id == "ib-socket-mismatch" for f in screen.findings):
            await pilot.pause(0.1)
        (f,) = [f for f in screen.findings if f.id == "ib-socket-mismatch"]
        assert f.state == "active" and sorted(f.nodes) == ["node02", "node03"]
        assert {e.node for e in f.evidence} == {"node02", "node03"}
        assert screen.runbook.job_running  # the job hangs, as NCCL would: not a timeout, a finding
        first_run = screen.runbook.run_path
        # jump from the finding to its evidence line in the node's pane
        await pilot.press("4", "j")
        assert screen.query_one(TabbedContent).active == "tab-logs"
        ev = next(e for e in f.evidence if e.line)
        assert f"{ev.node}: line {ev.line} of its log" in str(screen.query_one("#status").render())
        await pilot.press("4", "f")
        assert isinstance(app.screen, FixDialog)
        assert "+    NCCL_IB_DISABLE: '1'" in str(app.screen.query_one("#diff").render())
        columns = [str(c.render()) for c in app.screen.query(".evidence-column")]
        assert len(columns) == 2 and columns[0].startswith("node02") and columns[1].startswith("node03")
        assert "NET/IB" in columns[0] and "Socket" in columns[1]
        assert app.screen.copy_text() == "export NCCL_IB_DISABLE=1"
        await pilot.click("#apply")
        await pilot.pause(0.2)
        await app.workers.wait_for_complete()
        await pilot.pause()
        rb = screen.runbook
        assert rb.run_path != first_run
        assert rb.states["watch"] == "passed", (rb.states, screen.query_one("#step-detail").render())
        assert not [x for x in screen.findings if x.id == "ib-socket-mismatch"]
        assert screen.fixed == ["ib-socket-mismatch"]
        (rev,) = screen.saved_revisions
    assert load_playbook(rev).job.env_dict()["NCCL_IB_DISABLE"] == "1"
    assert "NCCL_IB_DISABLE" not in pb_path.read_text()  # the original is kept
    for node in ("node02", "node03"):
        assert job_pids(cluster, node) == []
    second = (rb.run_path / "node02.log").read_text()
    assert "Using network Socket" in second and "NET/IB : Using" not in second
