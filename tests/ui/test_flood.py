"""A flood of 200k lines from each of 3 nodes: keys are handled while it streams, memory stays bounded,
and every line is on disk. Three local "nodes" run a real torchrun each (static rendezvous on
127.0.0.1) with a named test workload that floods its stdout."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
import pytest
from textual.widgets import TabbedContent

from ddptui.ui.app import DdptuiApp
from ddptui.ui.screens.playbook import PlaybookScreen
from ddptui.core.logs.classify import fold, line_matches
from ddptui.ui.widgets.pane_log import one_line
from ddptui.ui.widgets.panes import FOLLOW_LINES, PANE_MAX_LINES, NodePane
from tests.conftest import DATA, needs_torch

pytestmark = [needs_torch, pytest.mark.torch]
N = 200_000


async def test_flood_keeps_the_ui_answering_and_memory_bounded(tmp_path: Path, runs_dir: Path) -> None:
    pb = tmp_path / "flood.yaml"
    stop = tmp_path / "stop"  # the workloads flood until it exists
    pb.write_text(f"""\
name: flood
transport: local
nodes: [a, b, c]
job:
  script: {DATA / 'workloads' / 'flood.py'}
  args: ["{N}", "{stop}"]
  nproc_per_node: 1
  master_port: 29633
  tee: false
  rdzv_timeout: 60
  python: {sys.executable}
steps: [launch-master, wait-master, launch-workers, watch]
""")
    proc = psutil.Process()
    app = DdptuiApp(playbook=pb, runs_dir=runs_dir)
    async with app.run_test(size=(160, 45)) as pilot:
        try:  # a failed assertion mid-flood must still end the floods, or they fill the disk
            screen = app.screen
            assert isinstance(screen, PlaybookScreen)
            rss0 = proc.memory_info().rss
            await pilot.press("a")
            panes = list(screen.query(NodePane))
            # wait until the flood is under way on every node, then press a key in the middle of it
            for _ in range(1200):
                await pilot.pause(0.05)
                if all(p.total_lines > 20_000 for p in panes):
                    break
            streaming = [p.total_lines for p in panes]
            assert all(n > 20_000 for n in streaming), streaming
            await pilot.press("3")
            assert screen.query_one(TabbedContent).active == "tab-checks"
            mid = [p.total_lines for p in panes]
            await pilot.pause(0.5)
            later = [p.total_lines for p in panes]
            assert all(b > a for a, b in zip(mid, later)), (mid, later)  # the key was answered mid-flood
            await pilot.press("1")
            # a filter mid-flood: the panes draw the flood's newest lines that match; while the key is
            # answered the nodes' readers wait (input first): their batches stop reaching the bridge
            cycle, queued = screen.action_cycle_filter, []

            def watched_cycle() -> None:
                time.sleep(0.05)  # a reader that had passed the gate when the key came in hands its batch on
                queued.append(len(screen.bridge._q))
                time.sleep(0.1)  # an unheld reader hands on several batches meanwhile
                queued.append(len(screen.bridge._q))
                cycle()

            screen.action_cycle_filter = watched_cycle
            await pilot.press("v")
            assert len(queued) == 2 and queued[1] == queued[0], queued
            flt = panes[0].filter
            assert flt != "all" and all(p.filter == flt for p in panes)
        finally:
            stop.touch()
        await pilot.press("1")
        assert screen.query_one(TabbedContent).active == "tab-logs"
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        assert screen.runbook.states["watch"] == "passed", screen.runbook.states
        peak = proc.memory_info().rss
        for _ in range(100):  # the panes are rebuilt whole once the flood is over (the next quiet tick)
            if not any(p.stale for p in panes):
                break
            await pilot.pause(0.1)
        await pilot.pause(0.3)
        for p in panes:
            assert len(p.log.lines) <= PANE_MAX_LINES
            assert p.total_lines >= N
            # still at the tail: the job's last lines are what the user sees, not the middle of the flood
            assert not p.stale and p.log.scroll_offset.y >= p.log.max_scroll_y - 1, (p.node, p.log.scroll_offset.y,
                                                                                     p.log.max_scroll_y)
            # and the filter set mid-flood now holds for the whole buffer, not only the flood's tail. A
            # line the filter hides that came after the rebuild (torchrun's own words at exit) pushes an
            # old one out of the buffer, not out of the log, which is bounded on its own: the log ends
            # with every matching line of the buffer, and anything above them matches too
            want = [one_line(fold(x)) for x in p.buffer if line_matches(x, flt)]
            got = list(p.log.lines)
            assert len(want) > FOLLOW_LINES and got[len(got) - len(want):] == want, p.node
            assert all(line_matches(x, flt) for x in got[:len(got) - len(want)]), p.node
        run = screen.runbook.run_path
    for node in ("a", "b", "c"):
        lines = (run / f"{node}.log").read_text().splitlines()
        flood = [x for x in lines if " via NET/Socket/0 line " in x]
        done = next(x for x in lines if "flood done rank" in x)
        total = int(done.rsplit(" ", 1)[1])
        assert total >= N and len(flood) == total and flood[-1].endswith(f"line {total - 1}")
    assert peak - rss0 < 250 * 2**20, (peak - rss0) / 2**20  # 600k lines would be far more if kept
