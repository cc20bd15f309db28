"""Every key the footer shows, and every key `?` lists, does what it says (Pilot, on the recorded
3-node run of tests/ui/scenes.py); the palette offers every action; mouse clicks focus a pane and
select a finding; a filter that matches nothing says so; enter reads a pane's lines whole; a copy
also lands in the clipboard file; the Results tab has every rank."""

from __future__ import annotations

from pathlib import Path

from textual.command import CommandPalette
from textual.widgets import DataTable, Input, TabbedContent
from textual.widgets._footer import FooterKey

from ddptui.core import events as E
from ddptui.core.events import NodeOutput
from ddptui.core.states import NodeStatus
from ddptui.core.paths import clipboard_file
from ddptui.ui.app import DdptuiApp
from ddptui.ui.dialogs.fix import FixDialog
from ddptui.ui.dialogs.help import HelpDialog
from ddptui.ui.dialogs.lines import LinesDialog
from ddptui.ui.keys import screen_keys
from ddptui.ui.screens.playbook import PlaybookScreen
from ddptui.ui.widgets.footer import KeysFooter
from ddptui.ui.widgets.panes import NodePane, enclosing_pane
from ddptui.ui.widgets.results import ResultsTab
from tests.ui import scenes


def footer_keys(screen) -> set[str]:
    return {key for key, ab in screen.active_bindings.items() if ab.binding.show}


def focused_node(app) -> str | None:
    pane = enclosing_pane(app.focused)
    return pane.node if pane else None


async def start(pilot, scene=scenes.finished) -> PlaybookScreen:
    screen = pilot.app.screen
    assert isinstance(screen, PlaybookScreen)
    scene(screen.bridge.push)
    await pilot.pause(0.2)
    return screen


async def test_every_key_in_the_footer_does_what_it_says(tmp_path: Path) -> None:
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await start(pilot)
        tabs = screen.query_one(TabbedContent)
        assert tabs.active == "tab-results"  # the job ended: its results
        tested: set[str] = set()
        for key, tab in zip("12345", ("tab-logs", "tab-merged", "tab-checks", "tab-findings", "tab-results")):
            await pilot.press(key)
            assert tabs.active == tab, key
            tested.add(key)
        await pilot.press("1")
        logs_footer = footer_keys(screen)
        assert {"1", "2", "3", "4", "5", "tab", "v", "h", "slash", "c", "question_mark", "q"} <= logs_footer
        assert not {"x", "o", "f", "j"} & logs_footer  # no job runs, 3 nodes fit, findings are another tab's
        await pilot.press("tab")
        assert focused_node(app) == "alpha"
        tested.add("tab")
        await pilot.press("c")
        assert app.clipboard.startswith("cd ~ && NCCL_DEBUG=INFO torchrun") and "--node-rank=0" in app.clipboard
        assert clipboard_file().read_text().strip() == app.clipboard  # for terminals that ignore OSC 52
        assert any(str(clipboard_file().name) in n.message for n in app._notifications)
        tested.add("c")
        await pilot.press("v")
        assert all(p.filter == "no launcher INFO" for p in screen.pane_grid.panes)
        await pilot.press("v")
        assert all(p.filter == "NCCL" for p in screen.pane_grid.panes)
        assert "showing: NCCL (v for the next filter)" in str(screen.query_one("#status").render())
        await pilot.press("v", "v", "v", "v")  # warnings+errors, rank 0, rank 1, all
        assert all(p.filter == "all" for p in screen.pane_grid.panes)
        tested.add("v")
        # h: torchrun's own INFO lines leave the panes; the line count still says how many came
        alpha = screen.pane_grid.pane("alpha")
        came, shown = alpha.total_lines, alpha.log.line_count
        assert any("Using nproc_per_node" in x for x in alpha.log.lines)  # folded: I0101 12:00:00 distributed/run] ...
        await pilot.press("h")
        assert all(p.filter == "no launcher INFO" for p in screen.pane_grid.panes)
        assert "launcher INFO lines hidden (h shows them" in str(screen.query_one("#status").render())
        assert not any("Using nproc_per_node" in x for x in alpha.log.lines)
        assert alpha.log.line_count == shown - 1 and alpha.total_lines == came
        assert alpha.border_subtitle == f"{came} lines · {shown - 1} shown · filter: no launcher INFO"
        assert any("ddptui-smoke result" in x for x in alpha.log.lines)  # the job's lines stay
        await pilot.press("h")
        assert all(p.filter == "all" for p in screen.pane_grid.panes) and alpha.log.line_count == shown
        assert alpha.border_subtitle == f"{came} lines"
        tested.add("h")
        await pilot.press("slash")
        assert screen.query_one("#find", Input).has_focus
        await pilot.press(*"bandwidth", "enter")
        assert "has 'bandwidth'" in str(screen.query_one("#status").render())
        await pilot.pause()
        log = alpha.log  # the pane searched (alpha's: focused by tab above): the line found is drawn marked
        assert log.marked is not None and "bandwidth" in log.lines[log.marked]
        row = log.marked - int(log.scroll_offset.y)
        assert 0 <= row < log.size.height and all(seg.style and seg.style.reverse for seg in log.render_line(row)
                                                   if seg.text.strip())
        assert not any(seg.style and seg.style.reverse for seg in log.render_line(row + 1) if seg.text.strip())
        await pilot.press("escape")
        assert log.marked is None  # the search is over: no mark left
        tested.add("slash")
        await pilot.press("4")
        findings_footer = footer_keys(screen)
        assert {"f", "j"} <= findings_footer and not {"v", "h", "slash"} & findings_footer
        await pilot.press("j")
        assert tabs.active == "tab-logs" and focused_node(app) == "beta"
        beta = screen.pane_grid.pane("beta").log  # the evidence line is the one marked
        assert beta.marked is not None and "NET/Socket : Using [0]lo" in beta.lines[beta.marked]
        tested.add("j")
        await pilot.press("4", "f")
        assert isinstance(app.screen, FixDialog)
        await pilot.press("escape")
        tested.add("f")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpDialog)
        await pilot.press("escape")
        tested.add("question_mark")
        await pilot.press("s")  # the selected step (connect) is skipped
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.runbook.states["connect"] == "skipped"
        tested.update({"s", "q"})  # q: test_quit_and_the_step_keys; r, n, a: there too
        assert logs_footer | findings_footer <= tested | {"r", "n", "a"}, (logs_footer | findings_footer) - tested
        await pilot.press("q")
    assert not app.is_running


async def test_help_lists_every_key_of_the_screen_and_the_palette_has_every_action(tmp_path: Path) -> None:
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await start(pilot)
        await pilot.press("question_mark")
        listed = {k.key: k for _, keys in screen_keys(screen) for k in keys}
        for key in ("r", "n", "s", "a", "x", "c", "f", "j", "v", "h", "/", "o", "1", "2", "3", "4", "5", "tab",
                    "shift+tab", "q", "?", "^p"):
            assert key in listed, key
        assert not listed["x"].now and listed["r"].now  # no job runs: x does nothing now, and says so
        shown = {k.key: k for _, keys in app.screen.sections for k in keys}  # what the dialog draws
        assert shown["j"].description.startswith("Jump to evidence") and not shown["x"].now
        await pilot.press("question_mark")
        assert app.screen is screen
        await pilot.press("1", "tab")  # a pane focused: its own keys come first, under a name a user reads
        assert [title for title, _ in screen_keys(screen)][0] == "in the focused node pane"
        titles = {c.title for c in app.get_system_commands(screen)}
        assert {"Filter", "Chatter", "Find", "Fix", "Jump to evidence", "Open next pane", "Logs", "All nodes", "Checks",
                "Findings", "Results", "Next pane", "Previous pane", "Run step", "Copy command"} <= titles
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Checks")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert screen.query_one(TabbedContent).active == "tab-checks"


async def test_quit_and_the_step_keys(tmp_path: Path) -> None:
    pb = tmp_path / "shell.yaml"
    pb.write_text("name: steps\ntransport: local\nnodes: [alpha]\njob: {script: builtin:smoke}\nsteps:\n"
                  "  - {id: one, kind: shell, run: 'echo one'}\n  - {id: two, kind: shell, run: 'echo two'}\n"
                  "  - {id: three, kind: shell, run: 'echo three'}\n")
    app = DdptuiApp(playbook=pb, runs_dir=tmp_path / "runs")
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        for keys, states in ((("r",), ["passed", "pending", "pending"]), (("n",), ["passed", "passed", "pending"]),
                             (("up", "up", "a"), ["passed", "passed", "passed"])):
            await pilot.press(*keys)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert list(screen.runbook.states.values()) == states, keys
        await pilot.press("q")
    assert not app.is_running


async def test_mouse_filter_note_whole_lines_and_results(tmp_path: Path) -> None:
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await start(pilot)
        results = screen.query_one(ResultsTab)
        assert [(r["node"], r["rank"], r["all_reduce"]) for r in sorted(results.results, key=lambda r: r["rank"])] == [
            ("alpha", 0, "ok"), ("alpha", 1, "ok"), ("beta", 2, "ok"), ("beta", 3, "ok"), ("gamma", 4, "ok"),
            ("gamma", 5, "ok")]
        assert "busbw 0.81 GB/s" in str(screen.query_one("#bandwidth").render())
        assert screen.query_one("#results", DataTable).row_count == 6
        # a click on a pane (its header too) focuses it
        await pilot.press("1")
        assert await pilot.click("#pane-gamma .pane-header")
        assert focused_node(app) == "gamma"
        assert await pilot.click("#pane-beta Log")
        assert focused_node(app) == "beta"
        # enter on the focused pane: the lines it shows, whole (the pane cuts them at its width)
        await pilot.press("enter")
        assert isinstance(app.screen, LinesDialog)
        assert any("will be the only storage class" in line for line in app.screen.lines)
        await pilot.press("escape")
        # a filter that matches nothing says so, and the note goes when a line matches
        screen.bridge.push(NodeOutput("gamma", ("[default0]:only rank zero speaks",), 10))
        await pilot.pause(0.1)
        await pilot.press("v", "v", "v", "v", "v")  # no launcher INFO, NCCL, warnings+errors, rank 0, rank 1
        gamma = screen.pane_grid.pane("gamma")
        assert gamma.filter == "rank 1"
        assert gamma.note == "" and "no line matches" not in str(gamma.query_one(".pane-header").render())
        await pilot.press("v", "v", "v")  # all, NCCL, warnings+errors
        screen.pane_grid.pane("alpha").set_filter("rank 7")
        alpha_header = screen.pane_grid.pane("alpha").query_one(".pane-header")
        assert "no line matches filter rank 7 (v for the next one)" in str(alpha_header.render())
        # a number key leaves a tab whose widget has the focus (it used to switch straight back)
        await pilot.press("3")
        screen.query_one("#matrix").focus()
        await pilot.press("4")
        assert screen.query_one(TabbedContent).active == "tab-findings"
        # a click on a finding's row selects it
        table = screen.query_one("#findings", DataTable)
        assert await pilot.click("#findings", offset=(3, 2))  # the header, then the second row
        assert table.cursor_row == 1 and screen.query_one("FindingsTab").selected().id == "small-shm"
        assert "small-shm" in str(screen.query_one("#finding-detail").render())
        assert isinstance(screen.pane_grid.pane("alpha"), NodePane)


def drawn_keys(screen) -> list[tuple[str, bool]]:
    """What the footer draws: each key, and whether it is enabled."""
    return [(k.key, not k.disabled) for k in screen.query_one(KeysFooter).query(FooterKey)]


def bound_keys(screen) -> list[tuple[str, bool]]:
    return [(ab.binding.key, ab.enabled) for ab in screen.active_bindings.values() if ab.binding.show]


async def test_the_footer_draws_the_keys_that_apply_and_is_rebuilt_only_when_they_change(tmp_path: Path) -> None:
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await start(pilot)
        await pilot.press("1")
        await pilot.pause(0.1)
        logs = drawn_keys(screen)
        assert logs == bound_keys(screen) and ("v", True) in logs and ("f", True) not in logs
        widgets = list(screen.query_one(KeysFooter).query(FooterKey))
        screen.refresh_bindings()  # nothing changed: the same keys, not a rebuilt footer
        await pilot.pause(0.1)
        assert list(screen.query_one(KeysFooter).query(FooterKey)) == widgets
        await pilot.press("4")  # the findings tab: its keys (fix, jump) replace the logs' filter keys
        await pilot.pause(0.1)
        findings = drawn_keys(screen)
        assert findings == bound_keys(screen) and findings != logs
        assert ("f", True) in findings and "v" not in [k for k, _ in findings]


async def test_quit_and_keys_stay_in_the_footer_at_80_columns(tmp_path: Path) -> None:
    """The footer's keys overflow on the right: at 80 columns `q Quit` and `? Keys` were the ones
    cut (the Logs tab's keys end at "12345 Ta"). They are docked at its right end, inside the screen."""
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start(pilot)
        await pilot.press("1")  # the Logs tab: its filter and find keys too
        await pilot.pause()
        footer = screen.query_one(KeysFooter)
        keys = {k.action: k for k in footer.query(FooterKey)}
        quit_, help_ = keys["app.quit"].region, keys["help"].region
        assert quit_.width and help_.width and quit_.right <= help_.x and help_.right <= 80  # Quit, Keys, on screen
        # more keys than the width holds: those that do not fit are dropped whole, never cut mid-word
        # ("12345 Ta", "/ Fin", "j Ju"), a group of keys with its label ("12345 Tabs") as one
        units = footer._units()
        shown = [u for u in units if all(w.display for w in u)]
        assert len(shown) < len(units) and all(not any(w.display for w in u) for u in units[len(shown):])
        assert all(max(w.region.right for w in u) <= quit_.x for u in shown)
        await pilot.resize_terminal(160, 45)  # wider: they come back
        await pilot.pause(0.2)
        assert all(w.display for u in footer._units() for w in u)


async def test_an_unreachable_nodes_pane_says_why(tmp_path: Path) -> None:
    """A node that could not be reached has an empty pane: its reason is written there, wrapped to
    the pane, besides the step's message and the toast."""
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    why = ("timed out after 3 s connecting to 10.213.0.6:22 (is the node up? is its sshd listening, and does a "
           "firewall allow port 22 from the login node?)")
    async with app.run_test(size=(100, 30)) as pilot:
        screen = pilot.app.screen
        await pilot.pause(0.2)  # laid out: the breakpoint's rail, then the grid's columns for the width left
        screen.bridge.push(E.NodeState("beta", NodeStatus.UNREACHABLE, why))
        await pilot.pause(0.2)
        pane = screen.pane_grid.pane("beta")
        text = " ".join(pane.buffer)
        assert text == f"ddptui: no connection to beta: {why}"  # the why may be a host key refused: it answered
        assert len(pane.buffer) > 1 and max(map(len, pane.buffer)) <= pane.log.scrollable_content_region.width
        assert pane.total_lines == 0  # not a line of the node's output
        assert not list(screen.pane_grid.pane("alpha").buffer)  # the other panes are untouched


async def test_the_checks_grid_and_the_findings_are_reached_from_the_keyboard(tmp_path: Path) -> None:
    """"select a cell to see the command and its output", said the Checks tab, while its arrows
    moved the step list: 3 and 4 focus their table now."""
    from ddptui.ui.widgets.steps import StepTable

    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await start(pilot)
        steps = screen.query_one(StepTable)
        step_row = steps.cursor_row
        await pilot.press("3")
        matrix = screen.query_one("#matrix", DataTable)
        assert app.focused is matrix
        before = matrix.cursor_coordinate
        await pilot.press("down")  # on a check's name: it on every node (it said "select a cell")
        await pilot.pause(0.1)
        said = str(screen.query_one("#evidence").render())
        check = matrix.checks[matrix.cursor_row]
        assert all(f"{n} · {check}: " in said for n in ("alpha", "beta", "gamma")), said
        await pilot.press("right")
        assert matrix.cursor_coordinate != before and steps.cursor_row == step_row
        await pilot.press("4")
        assert app.focused is screen.query_one("#findings", DataTable)
        await pilot.press("1")
        assert app.focused is steps  # back on the Logs tab: the step list, not nothing


async def test_the_run_line_names_the_folder_at_100_columns_and_comes_back_after_a_find(tmp_path: Path) -> None:
    """"run 20261204-025849-local-smoke-d429 →" and nothing after at 100 columns: the line wrapped
    out of its one row. It names the folder, from ~, and a find's last match does not stay on it."""
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    run_dir = Path.home() / ".local/share/ddptui/runs/20261204-025849-local-smoke-d429"
    async with app.run_test(size=(100, 30)) as pilot:
        screen = pilot.app.screen
        screen.bridge.push(E.RunStarted("20261204-025849-local-smoke-d429", str(run_dir), "p", ("alpha",)))
        screen.bridge.push(NodeOutput("alpha", ("hello", "the needle"), 1))
        await pilot.pause(0.2)
        status = screen.query_one("#status")
        line = "run ~/.local/share/ddptui/runs/20261204-025849-local-smoke-d429"
        assert str(status.render()).strip() == line
        screen.query_one("#pane-alpha").log.focus()
        await pilot.press("slash", *"needle", "enter")
        await pilot.pause(0.1)
        assert "needle" in str(status.render())
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert str(status.render()).strip() == line
