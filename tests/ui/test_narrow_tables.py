"""At 100×30, the smallest supported size, the step list, the Findings and Checks tables show every column whole
(nothing to scroll sideways to) and a selected cell still shows its own evidence."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from ddptui.ui.app import DdptuiApp
from ddptui.ui.widgets.checks import CHECK_COLUMNS, CheckMatrix
from tests.ui import scenes


async def test_findings_and_checks_fit_100_columns(tmp_path: Path) -> None:
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        scenes.finished(screen.bridge.push)
        await pilot.pause(0.2)
        steps = screen.query_one("#steps", DataTable)  # the narrow rail holds the step table whole: no scrollbar
        assert steps.virtual_size.width <= steps.scrollable_content_region.width and not steps.show_horizontal_scrollbar
        await pilot.press("4")
        await pilot.pause(0.1)
        table = screen.query_one("#findings", DataTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width  # no column beyond the edge
        summary = table.get_row_at(0)[-1]
        assert str(summary) == "NCCL picked the loopback interface on beta and gamma"  # whole, wrapped in its row
        assert table.rows[table.coordinate_to_cell_key((0, 0)).row_key].height >= 2
        await pilot.press("3")
        await pilot.pause(0.1)
        matrix = screen.query_one(CheckMatrix)
        assert matrix.virtual_size.width <= matrix.scrollable_content_region.width
        assert [str(c.label) for c in matrix.columns.values()] == ["check", "alpha", "beta", "gamma"]
        # the checks no node reported (gpus, script, probe here) are not rows; the rest are, by full name
        reported = {check for _, check in matrix.results}
        assert matrix.checks == [c for c in CHECK_COLUMNS if c in reported] and "master-reachable" in matrix.checks
        assert not {"gpus", "script", "probe"} & set(matrix.checks)
        matrix.focus()
        matrix.move_cursor(row=matrix.checks.index("shm"), column=3)
        await pilot.pause(0.1)
        evidence = str(screen.query_one("#evidence").render())
        assert evidence.startswith("gamma · shm: ! warn") and "/dev/shm is 64 MiB" in evidence


async def test_below_80_columns_the_rail_is_icons_and_names(tmp_path: Path) -> None:
    """At 60x20 the 30-column rail left the panes 29 columns; the state column repeats the icon."""
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(60, 20)) as pilot:
        screen = app.screen
        await pilot.pause(0.1)
        assert screen.has_class("-cramped") and not screen.has_class("-narrow")
        steps = screen.query_one("#steps", DataTable)
        assert not steps.show_horizontal_scrollbar  # the cut state column is not a row of scrollbar
        names = [str(steps.get_row_at(i)[1]) for i in range(steps.row_count)]
        assert max(map(len, names)) + 4 <= steps.scrollable_content_region.width  # icon and name whole
        assert screen.query_one("#left").outer_size.width == 22
        assert screen.query_one("#step-detail").size.height >= 2  # the selected step still says what it is
        await pilot.resize_terminal(100, 30)
        await pilot.pause(0.1)
        assert screen.has_class("-narrow") and screen.query_one("#left").outer_size.width == 31


async def test_panes_stack_where_two_columns_would_be_too_narrow_to_read(tmp_path: Path) -> None:
    """At 80x24 three nodes' panes were two columns of 23 (a log line's node:pid:tid prefix was all
    one saw); they stack while each keeps 3 lines, and are two columns again where those fit."""
    from ddptui.ui.widgets.panes import NodePane

    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        panes = list(app.screen.query(NodePane))
        assert len(panes) == 3 and len({p.region.x for p in panes}) == 1  # one column
        assert all(p.region.width >= 40 and p.region.height >= 5 for p in panes)
        await pilot.resize_terminal(100, 30)
        await pilot.pause(0.2)
        assert len({p.region.x for p in panes}) == 2 and all(p.region.width >= 30 for p in panes)
