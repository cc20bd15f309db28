"""What the TUI draws, at the smallest supported size (100×30) and a roomy one (160×45).

pytest-textual-snapshot compares each screen with the SVG in __snapshots__/; after a deliberate
change, `pytest tests/ui/test_snapshots.py --snapshot-update` and look at the new pictures before
committing them. Everything drawn is fixed: recorded events with fixed times (tests/ui/scenes.py),
no clock, no temporary path, no pid of this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddptui.ui.app import DdptuiApp
from ddptui.ui.dialogs.host_key import HostKeyDialog
from ddptui.ui.dialogs.quit import QuitDialog
from tests.conftest import DATA, ROOT
from tests.ui import scenes

SIZES = [pytest.param((100, 30), id="100x30"), pytest.param((160, 45), id="160x45")]
FINGERPRINT = "SHA256:ZS/REswhmD6SA98/i7K7lmItat0Pu16ZrzqoHxJIN8g"


def run_app(tmp_path: Path) -> DdptuiApp:
    return DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")


def after(*keys: str, scene=scenes.finished, then=None):
    """A run_before for snap_compare: push the scene's events, let a frame drain them, press keys."""

    async def run_before(pilot) -> None:
        screen = pilot.app.screen
        scene(screen.bridge.push)
        await pilot.pause(0.2)
        if then is not None:
            then(pilot.app)
        if keys:
            await pilot.press(*keys)
        await pilot.pause(0.2)

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_picker(snap_compare, size, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)  # the file column is relative to here
    app = DdptuiApp(search_dirs=[("here", DATA / "picker"), ("config", DATA / "none")])
    assert snap_compare(app, terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_run_finished_logs(snap_compare, size, tmp_path) -> None:
    assert snap_compare(run_app(tmp_path), terminal_size=size, run_before=after("1"))


@pytest.mark.parametrize("size", SIZES)
def test_run_finished_results(snap_compare, size, tmp_path) -> None:
    assert snap_compare(run_app(tmp_path), terminal_size=size, run_before=after())


@pytest.mark.parametrize("size", SIZES)
def test_checks_matrix(snap_compare, size, tmp_path) -> None:
    def cell(app) -> None:  # the checks step shows the tab by itself; a cell's evidence shows below
        app.screen.query_one("#matrix").focus()

    assert snap_compare(run_app(tmp_path), terminal_size=size,
                        run_before=after(*["right"] * 6, "down", "down", scene=scenes.checked, then=cell))


@pytest.mark.parametrize("size", SIZES)
def test_findings(snap_compare, size, tmp_path) -> None:
    assert snap_compare(run_app(tmp_path), terminal_size=size, run_before=after("4"))


@pytest.mark.parametrize("size", SIZES)
def test_fix_dialog(snap_compare, size, tmp_path) -> None:
    assert snap_compare(run_app(tmp_path), terminal_size=size, run_before=after("4", "f"))


@pytest.mark.parametrize("size", SIZES)
def test_host_key_dialog(snap_compare, size, tmp_path) -> None:
    def ask(app) -> None:
        app.push_screen(HostKeyDialog("gamma", "10.213.0.4", "ssh-ed25519", FINGERPRINT))

    assert snap_compare(run_app(tmp_path), terminal_size=size, run_before=after(scene=scenes.checked, then=ask))


@pytest.mark.parametrize("size", SIZES)
def test_quit_dialog(snap_compare, size, tmp_path) -> None:
    def ask(app) -> None:
        app.push_screen(QuitDialog(list(scenes.NODES)))

    assert snap_compare(run_app(tmp_path), terminal_size=size, run_before=after("1", then=ask))


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare, size, tmp_path) -> None:
    assert snap_compare(run_app(tmp_path), terminal_size=size, run_before=after("1", "question_mark"))
