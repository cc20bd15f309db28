"""The check matrix, its evidence, and a finding's fix saved as a new playbook revision (Pilot)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from ddptui.core.playbook.loader import load_playbook
from ddptui.core.transport.factory import SSHSettings
from ddptui.ui.app import DdptuiApp
from ddptui.ui.dialogs.fix import FixDialog
from ddptui.ui.screens.playbook import PlaybookScreen
from ddptui.ui.widgets.checks import CheckMatrix
from tests.cluster.conftest import cluster_playbook
from tests.cluster.netns import Cluster


async def test_matrix_evidence_and_fix(cluster: Cluster, ssh_env: Path, tmp_path: Path, runs_dir: Path) -> None:
    pb_path = cluster_playbook(tmp_path, ["iba", "gpua"], port=29551, backend="nccl")
    original = pb_path.read_text()
    app = DdptuiApp(playbook=pb_path, runs_dir=runs_dir, ssh_settings=SSHSettings(ssh_config=cluster.ssh_config))
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.screen
        assert isinstance(screen, PlaybookScreen)
        await pilot.press("r")  # connect
        await app.workers.wait_for_complete()
        await pilot.press("r")  # check
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.history[-2:] == [("check", "running"), ("check", "failed")]
        matrix = screen.query_one(CheckMatrix)
        # checks × nodes: a row per check, a column per node
        assert str(matrix.get_cell("ib", "iba")) == "✓" and str(matrix.get_cell("gpus", "gpua")) == "✓"
        assert str(matrix.get_cell("backend", "iba")) == "✗"  # CPU torch cannot run nccl: true
        # selecting a cell shows the command that produced it and its output
        await pilot.press("3")
        matrix.focus()
        matrix.move_cursor(row=matrix.checks.index("ib"), column=1 + matrix.nodes.index("iba"))
        await pilot.pause()
        evidence = str(screen.query_one("#evidence", Static).render())
        assert "$ ibv_devinfo" in evidence and "PORT_ACTIVE" in evidence
        # the findings tab, newest first; the fix as a diff; saved only when asked
        assert [f.id for f in screen.findings] == ["ib-socket-mismatch"]
        assert "iba will use NET/IB, gpua NET/Socket" in str(screen.query_one("#finding-detail", Static).render())
        await pilot.press("4", "f")
        assert isinstance(app.screen, FixDialog)
        patch = str(app.screen.query_one("#diff", Static).render())
        assert "+    NCCL_IB_DISABLE: '1'" in patch
        await pilot.click("#cancel")
        assert not list(tmp_path.glob("*.rev*.yaml"))  # cancel saves nothing
        await pilot.press("f")
        await pilot.click("#save")
        await app.workers.wait_for_complete()
        (rev,) = screen.saved_revisions
    assert pb_path.read_text() == original
    assert rev.name == f"{pb_path.stem}.rev1.yaml"
    assert load_playbook(rev).job.env_dict()["NCCL_IB_DISABLE"] == "1"
