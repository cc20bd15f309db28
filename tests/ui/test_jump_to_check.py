"""`j` on a finding that a check raised: its evidence is a command's answer, no log line, and `j`
said "this finding has no log line to jump to". It now shows that check's cell on the node, with
the command and its output below the matrix."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static, TabbedContent

from ddptui.core import events as E
from ddptui.core.diagnosis.model import Evidence, Finding
from ddptui.ui.app import DdptuiApp
from ddptui.ui.widgets.checks import ChecksTab
from ddptui.ui.widgets.findings import finding_text
from tests.ui import scenes

ROUTE = Finding("bad-master-addr", "error", ["beta"], "beta: no route to the master address",
                [Evidence("beta", 0, "route: fine", "check-route --node beta")], "made up for the screen test")


async def test_j_on_a_checks_finding_shows_its_cell(tmp_path: Path) -> None:
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        scenes.checked(screen.bridge.push)
        screen.bridge.push(E.FindingRaised(ROUTE, t=scenes.T0 + 3.5))
        await pilot.pause(0.2)
        await pilot.press("4")  # newest first: the one whose evidence quotes the route check's command
        assert "press j to see the check's command and output" in finding_text(ROUTE).plain
        await pilot.press("j")
        await pilot.pause()
        matrix = screen.query_one(ChecksTab).matrix
        assert screen.query_one(TabbedContent).active == "tab-checks" and matrix.has_focus
        assert matrix.selected().node == "beta" and matrix.selected().check == "route"
        assert "$ check-route --node beta" in str(screen.query_one("#evidence", Static).render())
        assert not app._notifications  # no "no log line to jump to"
        await pilot.press("4", "down", "j")  # the /dev/shm warning: no command quoted, the node's warned cell
        await pilot.pause()
        assert screen.query_one(TabbedContent).active == "tab-checks"
        assert (matrix.selected().node, matrix.selected().check) == ("gamma", "shm")


async def test_j_prefers_the_failed_cell_that_names_the_finding(tmp_path: Path) -> None:
    """A bad GLOO_SOCKET_IFNAME: the finding's evidence quotes the interfaces check's command (its
    list proves the name is absent), but the ✗ behind it is the env cell, which names the finding."""
    f = Finding("bad-socket-ifname", "error", ["alpha"], "alpha: GLOO_SOCKET_IFNAME=eth9 names no usable interface",
                [Evidence("alpha", 0, "GLOO_SOCKET_IFNAME=eth9: no such interface", "check-interfaces --node alpha")],
                "made up for the screen test")
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        scenes.checked(screen.bridge.push)
        screen.bridge.push(E.CheckResult("alpha", "env", "fail", "GLOO_SOCKET_IFNAME=eth9 (the playbook sets it): "
                                         "bad-socket-ifname", "check-env --node alpha", "", t=scenes.T0 + 3.4))
        screen.bridge.push(E.FindingRaised(f, t=scenes.T0 + 3.5))
        await pilot.pause(0.2)
        await pilot.press("4", "j")
        await pilot.pause()
        matrix = screen.query_one(ChecksTab).matrix
        assert (matrix.selected().node, matrix.selected().check) == ("alpha", "env")
