"""Keys that act on the focused pane: tab / shift+tab cycle the node panes, `c` copies that node's
command (Pilot; the commands arrive as the runbook posts them)."""

from __future__ import annotations

from pathlib import Path

from ddptui.core.events import CommandPlanned
from ddptui.ui.app import DdptuiApp
from ddptui.ui.screens.playbook import PlaybookScreen
from ddptui.ui.widgets.panes import enclosing_pane

PB = """\
name: keys
transport: local
nodes: [alpha, beta, gamma]
job: {script: builtin:smoke, nproc_per_node: 2}
"""


async def test_tab_cycles_the_panes_and_c_copies_the_focused_nodes_command(tmp_path: Path, runs_dir: Path) -> None:
    pb = tmp_path / "keys.yaml"
    pb.write_text(PB)
    app = DdptuiApp(playbook=pb, runs_dir=runs_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, PlaybookScreen)
        for rank, node in enumerate(("alpha", "beta", "gamma")):
            screen.bridge.push(CommandPlanned(node, "master" if rank == 0 else "worker", rank,
                                              f"torchrun --node-rank={rank} train.py  # on {node}", 2 * rank, 2))
        await pilot.pause(0.2)

        def focused() -> str | None:
            pane = enclosing_pane(app.focused)
            return pane.node if pane else None

        seen = []
        for _ in range(4):
            await pilot.press("tab")
            seen.append(focused())
        assert seen == ["alpha", "beta", "gamma", "alpha"]
        await pilot.press("shift+tab")
        assert focused() == "gamma"
        await pilot.press("c")
        assert app.clipboard == "torchrun --node-rank=2 train.py  # on gamma"
        await pilot.press("tab", "tab", "c")
        assert focused() == "beta" and app.clipboard.endswith("# on beta")
        assert screen.pane_grid.pane("gamma").ranks == "4-5"  # the ranks came with the command
