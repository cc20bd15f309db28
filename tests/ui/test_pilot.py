"""Pilot tests of the picker and the step-through: they assert the sequence of step states."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from textual.widgets._footer import FooterKey

import ddptui
from ddptui.ui.app import DdptuiApp
from ddptui.ui.dialogs.quit import QuitDialog
from ddptui.ui.screens.picker import PickerScreen
from ddptui.ui.screens.playbook import PlaybookScreen
from ddptui.ui.screens.problems import ProblemsScreen
from tests.conftest import DATA

SHELL_PB = """\
name: shell-steps
description: three shell steps on this machine
transport: local
nodes: localhost
job: {script: builtin:smoke}
steps:
  - {id: one, kind: shell, run: "echo step-one-output"}
  - {id: two, kind: shell, run: "echo failing >&2; exit 3"}
  - {id: three, kind: shell, run: "echo step-three-output"}
"""


async def settle(app: DdptuiApp, pilot) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


def write_pb(tmp_path: Path, text: str = SHELL_PB, name: str = "shell.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


async def test_picker_lists_playbooks_and_opens_them(tmp_path: Path, runs_dir: Path) -> None:
    here = tmp_path / "here"
    here.mkdir()
    write_pb(here, SHELL_PB, "a-good.yaml")
    (here / "b-bad.yaml").write_text((DATA / "playbooks/bad/unknown-key.yaml").read_text())
    app = DdptuiApp(runs_dir=runs_dir, search_dirs=[("here", here), ("examples", DATA / "none")])
    async with app.run_test(size=(140, 40)) as pilot:
        assert isinstance(app.screen, PickerScreen)
        table = app.screen.query_one("#picker", DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [r[0] for r in rows] == ["shell-steps", "✗ b-bad"]  # a playbook that does not load is marked
        assert rows[1][3].startswith("does not load: 6:3: unknown key 'nprocs_per_node'")  # its row names the file
        await pilot.press("down", "enter")
        assert isinstance(app.screen, ProblemsScreen)
        problems = app.screen.query_one("#problems", DataTable)
        assert str(problems.get_row_at(0)[0]) == "6:3"  # the file is the title's: the message gets the width
        assert "b-bad.yaml" in str(app.screen.query_one("#problems-title").render())
        await pilot.pause()
        assert "escape" in {k.key for k in app.screen.query(FooterKey)} and app.sub_title == "playbook problems"
        await pilot.press("escape")
        assert isinstance(app.screen, PickerScreen)
        assert app.sub_title == "pick a playbook"  # not the problems' title left over
        await pilot.press("up", "enter")
        assert isinstance(app.screen, PlaybookScreen) and app.screen.pb.name == "shell-steps"


async def test_picker_shows_the_shipped_examples(runs_dir: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./playbooks here: only the config folder and the examples
    app = DdptuiApp(runs_dir=runs_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.screen.query_one("#picker", DataTable)
        rows = {str(table.get_row_at(i)[0]): [str(c) for c in table.get_row_at(i)] for i in range(table.row_count)}
        assert {"local-smoke", "three-nodes"} <= set(rows)
        # an example by its name (its path is the installed package's, 50-90 characters): the
        # description still fits at 100 columns; the line under the table gives the whole path
        assert rows["local-smoke"][1:3] == ["local-smoke.yaml", "examples"]
        ahead = sum(c.get_render_width(table) for c in list(table.columns.values())[:3])
        assert ahead + 40 <= table.size.width, ahead  # 40 columns of description to read
        await pilot.pause()
        detail = str(app.screen.query_one("#picker-detail").render())
        assert str(Path(ddptui.__file__).parent / "data" / "playbooks") in detail.replace("\n", "")


async def test_bad_playbook_shows_problems_instead_of_starting(runs_dir: Path) -> None:
    app = DdptuiApp(playbook=DATA / "playbooks/bad/many-problems.yaml", runs_dir=runs_dir)
    async with app.run_test(size=(140, 40)) as pilot:
        assert isinstance(app.screen, ProblemsScreen)
        assert app.screen.query_one("#problems", DataTable).row_count == 6
        await pilot.pause()
        footer = {k.key for k in app.screen.query(FooterKey)}  # what the footer draws
        assert "escape" not in footer and "q" in footer  # no picker under it: no `esc Back` offered
        await pilot.press("escape")  # and the key does nothing: the problems stay
        assert isinstance(app.screen, ProblemsScreen)
    assert not list(runs_dir.iterdir())  # nothing ran


async def test_a_playbook_given_is_the_first_screen_and_a_wrong_start_step_is_said(tmp_path: Path,
                                                                                  runs_dir: Path) -> None:
    pb = write_pb(tmp_path, SHELL_PB, "shell.yaml")
    app = DdptuiApp(playbook=pb, runs_dir=runs_dir, start_step="no-such-step")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause(0.1)
        # the playbook's screen is the app's first, not pushed over Textual's blank one
        assert [type(s) for s in app.screen_stack] == [PlaybookScreen]
        assert [n.message for n in app._notifications] == ["no step 'no-such-step' in shell-steps"]
        assert app.screen.start_step is None


async def test_step_through_run_next_skip_rerun(tmp_path: Path, runs_dir: Path) -> None:
    app = DdptuiApp(playbook=write_pb(tmp_path), runs_dir=runs_dir)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, PlaybookScreen)
        assert screen.runbook.states == {"one": "pending", "two": "pending", "three": "pending"}
        await pilot.press("r")  # run the selected (first) step
        await settle(app, pilot)
        assert screen.history == [("one", "running"), ("one", "passed")]
        await pilot.press("n")  # the next pending step fails
        await settle(app, pilot)
        assert screen.history[2:] == [("two", "running"), ("two", "failed")]
        assert "rc=3" in str(screen.query_one("#step-detail").render())
        await pilot.press("s")  # skip the failed step; the cursor moves on
        await settle(app, pilot)
        assert screen.history[4:] == [("two", "skipped")]
        await pilot.press("n")
        await settle(app, pilot)
        assert screen.history[5:] == [("three", "running"), ("three", "passed")]
        await pilot.press("up", "up", "r")  # rerun the first step
        await settle(app, pilot)
        assert screen.history[7:] == [("one", "running"), ("one", "passed")]
        assert screen.runbook.states == {"one": "passed", "two": "skipped", "three": "passed"}
        log = screen.query_one("#pane-localhost").log
        assert sum("step-one-output" in line for line in log.lines) == 2
        run = screen.runbook.run_path
    assert (run / "localhost.log").read_text().count("step-one-output") == 2


async def test_run_all_from_a_step(tmp_path: Path, runs_dir: Path) -> None:
    app = DdptuiApp(playbook=write_pb(tmp_path, SHELL_PB.replace("exit 3", "exit 0")), runs_dir=runs_dir)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = app.screen
        await pilot.press("down", "a")  # start from "two"
        await settle(app, pilot)
        assert screen.history == [("two", "running"), ("two", "passed"), ("three", "running"), ("three", "passed")]
        assert screen.runbook.states["one"] == "pending"


async def test_run_all_stops_at_the_first_failure(tmp_path: Path, runs_dir: Path) -> None:
    app = DdptuiApp(playbook=write_pb(tmp_path), runs_dir=runs_dir)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("a")
        await settle(app, pilot)
        assert app.screen.history == [("one", "running"), ("one", "passed"), ("two", "running"), ("two", "failed")]
        assert app.screen.runbook.states["three"] == "pending"


async def test_command_palette_offers_the_step_actions(tmp_path: Path, runs_dir: Path) -> None:
    app = DdptuiApp(playbook=write_pb(tmp_path), runs_dir=runs_dir)
    async with app.run_test(size=(140, 40)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert {"Run step", "Next step", "Skip step", "Run all from here", "Stop job", "Filter", "Find", "Fix",
                "Jump to evidence", "Open next pane", "Logs", "All nodes", "Checks", "Findings", "Results"} <= set(titles)


SLEEP_PB = """\
name: sleeper
transport: local
nodes: localhost
job:
  script: {script}
  nproc_per_node: 1
  master_port: {port}
  stop_grace: 3
steps: [launch-master, watch]
"""


async def test_quit_while_a_job_runs_asks_then_stops_it(tmp_path: Path, runs_dir: Path) -> None:
    import psutil

    script = tmp_path / "sleep.py"
    script.write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n")
    pb = write_pb(tmp_path, SLEEP_PB.format(script=script, port=29631))
    app = DdptuiApp(playbook=pb, runs_dir=runs_dir)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = app.screen
        await pilot.press("r")  # launch-master: torchrun + sleep.py start
        await settle(app, pilot)
        assert screen.history[-1] == ("launch-master", "passed")
        proc = screen.runbook.launch.nodes["localhost"].process
        assert proc.running
        job = psutil.Process(proc.pid)
        await pilot.press("q")
        assert isinstance(app.screen, QuitDialog)
        await pilot.press("escape")  # cancel: still running
        assert isinstance(app.screen, PlaybookScreen) and proc.running
        await pilot.press("q")
        await pilot.click("#stop")
        assert proc.wait(30) is not None
    assert not job.is_running() or job.status() == psutil.STATUS_ZOMBIE


async def test_quit_can_leave_the_job_running(tmp_path: Path, runs_dir: Path, monkeypatch) -> None:
    import os
    import signal

    import psutil

    monkeypatch.setenv("HOME", str(tmp_path))  # the node-side log goes under ~/.cache/ddptui
    script = tmp_path / "sleep.py"
    script.write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n")
    pb = write_pb(tmp_path, SLEEP_PB.format(script=script, port=29632))
    app = DdptuiApp(playbook=pb, runs_dir=runs_dir)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("r")
        await settle(app, pilot)
        proc = app.screen.runbook.launch.nodes["localhost"].process
        assert proc.running
        await pilot.press("q")
        assert isinstance(app.screen, QuitDialog)
        await pilot.click("#leave")
        for _ in range(100):
            await pilot.pause(0.05)
            if app.left_running:
                break
    try:
        left = app.left_running["localhost"]
        assert left["pgid"] == proc.pgid and left["log"].endswith("/localhost.log")
        job = psutil.Process(proc.pid)
        assert job.is_running() and job.status() != psutil.STATUS_ZOMBIE
        assert Path(os.path.expanduser(left["log"])).parent.parent.name == "runs"
    finally:
        os.killpg(proc.pgid, signal.SIGTERM)


async def test_a_worker_error_becomes_words_and_the_app_keeps_running(tmp_path: Path, runs_dir: Path) -> None:
    from ddptui.core.errors import PlaybookError, Problem

    app = DdptuiApp(playbook=write_pb(tmp_path), runs_dir=runs_dir)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = app.screen
        problem = Problem("fixed.yaml", 4, 3, "unknown key 'nprocs'", hint="did you mean nproc_per_node?")

        def raise_playbook_error(step_id: str) -> None:
            raise PlaybookError("fixed.yaml", [problem])

        screen.runbook.run_step = raise_playbook_error
        await pilot.press("r")
        await settle(app, pilot)
        assert app.is_running and app.screen is screen
        assert not screen.busy.is_set()
        texts = [n.message for n in app._notifications]
        assert any("fixed.yaml: 1 problem" in t and "fixed.yaml:4:3: unknown key 'nprocs'" in t for t in texts), texts

        def raise_bug(step_id: str) -> None:
            raise KeyError("oops")

        screen.runbook.run_step = raise_bug
        await pilot.press("r")
        await settle(app, pilot)
        assert app.is_running and app.screen is screen
        assert any(n.message == "internal error: KeyError: 'oops'" and n.severity == "error"
                   for n in app._notifications), [n.message for n in app._notifications]
        del screen.runbook.run_step  # the real one again: the screen still works after both
        await pilot.press("r")
        await settle(app, pilot)
        assert screen.history == [("one", "running"), ("one", "passed")]


FIRST_FRAME = """\
import asyncio, sys
from pathlib import Path
from ddptui.ui.app import DdptuiApp

async def main():
    app = DdptuiApp(playbook=Path(sys.argv[1]), runs_dir=Path(sys.argv[2]))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        print("before a step:", "ddptui.core.runbook" in sys.modules)
        await pilot.press("n")
        await app.workers.wait_for_complete()
        await pilot.pause()
        print("after one:", app.screen.runbook.states["one"])

asyncio.run(main())
"""


def test_the_playbook_screen_draws_before_the_runbook_is_imported(tmp_path: Path, runs_dir: Path) -> None:
    """README's first command opens a playbook: its screen needs no launch, checks or diagnosis code
    until a step runs (importing them was a fifth of its first frame); the first step still runs."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", FIRST_FRAME, str(write_pb(tmp_path)), str(runs_dir)],
                       capture_output=True, text=True, timeout=120)
    assert "before a step: False" in r.stdout and "after one: passed" in r.stdout, r.stdout + r.stderr


async def test_the_playbook_screen_freezes_the_heap_once_drawn_and_thaws_it_when_it_goes(tmp_path: Path,
                                                                                        runs_dir: Path) -> None:
    """The objects alive once the run screen is drawn (Textual's, Rich's, its widgets) are left out of
    Python's full collections while it shows (the pauses a key waited out under a flood:
    bench.tui_flood); they are handed back when the screen goes, or a screen's cycles would stay."""
    import gc

    assert gc.get_freeze_count() == 0
    app = DdptuiApp(playbook=write_pb(tmp_path), runs_dir=runs_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(100):  # once the screen is drawn
            await pilot.pause(0.05)
            if gc.get_freeze_count():
                break
        assert isinstance(app.screen, PlaybookScreen)
        assert gc.get_freeze_count() > 10_000
        await pilot.press("n")  # a step runs: the app works as before
        await settle(app, pilot)
        assert app.screen.runbook.states["one"] == "passed"
    assert gc.get_freeze_count() == 0
