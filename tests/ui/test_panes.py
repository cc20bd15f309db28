"""The panes: filters, find, the merged view, the bounded store (Pilot, lines fed as the runbook feeds them)."""

from __future__ import annotations

import threading
from pathlib import Path

from textual.widgets import Input, Log

from ddptui.core.events import NodeOutput
from ddptui.ui.app import DdptuiApp
from ddptui.ui.screens.playbook import PlaybookScreen
from ddptui.ui.widgets.panes import PANE_MAX_LINES, NodePane

PB = """\
name: panes
transport: local
nodes: [alpha, beta]
job: {script: builtin:smoke, nproc_per_node: 2}
"""

ALPHA = [
    "[default0]:alpha:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>",
    "[default1]:plain output from rank 1",
    "[default0]:alpha:1:1 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect failed",
    "[default1]:RuntimeError: the needle is here",
    "[default0]:ddptui-smoke result host=alpha rank=0 all_reduce=ok",
]
BETA = ["[default0]:beta says hello", "[default1]:beta NCCL INFO Using network Socket"]


def app_on(tmp_path: Path, runs_dir: Path, playbook: str = PB) -> DdptuiApp:
    """The TUI on a playbook of these nodes (local, not run): lines reach it as the runbook feeds them."""
    pb = tmp_path / "panes.yaml"
    pb.write_text(playbook)
    return DdptuiApp(playbook=pb, runs_dir=runs_dir)


async def test_filters_find_and_merged_view(tmp_path: Path, runs_dir: Path) -> None:
    app = app_on(tmp_path, runs_dir)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        assert isinstance(screen, PlaybookScreen)
        screen.bridge.push(NodeOutput("alpha", tuple(ALPHA[:2]), 1))
        screen.bridge.push(NodeOutput("beta", tuple(BETA[:1]), 1))
        screen.bridge.push(NodeOutput("alpha", tuple(ALPHA[2:]), 3))
        screen.bridge.push(NodeOutput("beta", tuple(BETA[1:]), 2))
        await pilot.pause(0.1)
        alpha = screen.query_one("#pane-alpha", NodePane)
        assert list(alpha.log.lines) == ALPHA
        # the merged view keeps arrival order across nodes (drawn once its tab shows)
        await pilot.press("2")
        await pilot.pause()
        merged = list(screen.query_one("#merged", Log).lines)
        assert merged == [f"alpha │ {x}" for x in ALPHA[:2]] + [f"beta │ {BETA[0]}"] + \
            [f"alpha │ {x}" for x in ALPHA[2:]] + [f"beta │ {BETA[1]}"]
        glog = ("I1201 13:37:48.503000 31418 /usr/lib/python3/site-packages/torch/distributed/elastic/agent/"
                "server/api.py:513] [default] Starting worker group")
        screen.bridge.push(NodeOutput("beta", (glog,), 3))  # torch's prefix, folded in both views
        await pilot.pause(0.1)
        folded = "I1201 13:37:48 server/api] [default] Starting worker group"
        assert list(screen.query_one("#merged", Log).lines)[-1] == f"beta │ {folded}"
        await pilot.press("1")
        await pilot.pause()
        assert list(screen.query_one("#pane-beta", NodePane).log.lines)[-1] == folded
        seen = []
        for _ in range(6):  # no launcher INFO, NCCL, warnings+errors, rank 0, rank 1, all
            await pilot.press("v")
            seen.append((alpha.filter, list(alpha.log.lines)))
        assert seen[0] == ("no launcher INFO", ALPHA)  # none of these is torchrun's own chatter
        assert seen[1] == ("NCCL", [ALPHA[0], ALPHA[2]])
        assert seen[2] == ("warnings+errors", [ALPHA[2], ALPHA[3]])
        assert seen[3] == ("rank 0", [ALPHA[0], ALPHA[2], ALPHA[4]])
        assert seen[4] == ("rank 1", [ALPHA[1], ALPHA[3]])
        assert seen[5] == ("all", ALPHA)
        # a filter also applies to lines that arrive later
        await pilot.press("v", "v", "v")  # no launcher INFO, NCCL, warnings+errors
        assert alpha.filter == "warnings+errors"
        screen.bridge.push(NodeOutput("alpha", ("[default0]:quiet line", "[default0]:Traceback (most recent call last):"), 6))
        await pilot.pause(0.1)
        assert list(alpha.log.lines)[-1] == "[default0]:Traceback (most recent call last):"
        assert "[default0]:quiet line" not in alpha.log.lines and alpha.total_lines == 7
        # find
        await pilot.press("v", "v", "v")  # rank 0, rank 1, all
        assert alpha.filter == "all"
        alpha.log.focus()
        await pilot.press("slash")
        box = screen.query_one("#find", Input)
        assert box.display and box.has_focus
        await pilot.press(*"needle", "enter")
        assert "line 4 of the pane has 'needle'" in str(screen.query_one("#status").render())
        await pilot.press("escape")
        assert not box.display


async def test_a_pane_holds_a_bounded_number_of_lines(tmp_path: Path, runs_dir: Path) -> None:
    app = app_on(tmp_path, runs_dir)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        n = 3 * PANE_MAX_LINES
        for start in range(0, n, 1000):
            screen.bridge.push(NodeOutput("alpha", tuple(f"line {i}" for i in range(start, start + 1000)), start + 1))
        alpha = screen.query_one("#pane-alpha", NodePane)
        for _ in range(50):  # the flood's lines are drawn at the pane's turn (4 a second): wait for it,
            await pilot.pause(0.1)  # not for a fixed 0.2 s that a busy machine may not give
            if alpha.log.lines:
                break
        assert alpha.total_lines == n
        # under the flood the pane drew only its newest lines (the buffer and the disk have the rest)
        assert alpha.log.lines[-1] == f"line {n - 1}" and alpha.buffer[0] == f"line {n - PANE_MAX_LINES}"
        assert len(alpha.buffer) == PANE_MAX_LINES and len(alpha.log.lines) <= PANE_MAX_LINES
        for _ in range(50):  # once no line comes (a tick, 1 s), the log is whole again
            if len(alpha.log.lines) == PANE_MAX_LINES:
                break
            await pilot.pause(0.1)
        assert list(alpha.log.lines) == list(alpha.buffer)


async def test_many_nodes_show_as_a_list_with_one_open_pane(tmp_path: Path, runs_dir: Path) -> None:
    app = app_on(tmp_path, runs_dir, "name: many\ntransport: local\nnodes: n[1-8]\njob: {script: builtin:smoke}\n")
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        panes = list(screen.query(NodePane))
        assert len(panes) == 8
        assert [p.node for p in panes if not p.has_class("-collapsed")] == ["n1"]
        assert not panes[1].log.display and panes[0].log.display
        await pilot.press("o")
        assert [p.node for p in panes if not p.has_class("-collapsed")] == ["n2"]
        from ddptui.core.events import NodeState

        await pilot.press("o", "o", "o", "o", "o", "o", "o")  # back to the master
        assert screen.open_pane == "n1"
        screen.bridge.push(NodeState("n6", "failed", "exited 1", rc=1))
        await pilot.pause(0.1)
        assert screen.open_pane == "n6"  # the first node that went wrong opens by itself


async def test_a_pane_shows_each_line_it_holds_as_one_line(tmp_path: Path, runs_dir: Path) -> None:
    """A blank line, a progress bar redrawn with "\\r", a form feed: one line each in the pane, as on
    disk (Textual's Log splits with str.splitlines: a blank line was dropped and the others split,
    so `enter` on the pane showed lines shifted from the ones on screen)."""
    pb = tmp_path / "panes.yaml"
    pb.write_text(PB)
    held = ["epoch 1", "", "\r 10%|#   |\r 50%|#####|", "page\x0cbreak", "sep\u2028here", "epoch 2"]
    app = DdptuiApp(playbook=pb, runs_dir=runs_dir)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        screen.bridge.push(NodeOutput("alpha", tuple(held), 1))
        await pilot.pause(0.2)
        pane = screen.pane_grid.pane("alpha")
        assert list(pane.log.lines) == ["epoch 1", " ", "  10%|#   |  50%|#####|", "page break", "sep here", "epoch 2"]
        first, lines = pane.shown_lines()
        assert (first, lines) == (1, held)  # what `enter` shows: the lines on screen, whole


def test_a_pane_readies_its_lines_at_once_as_it_would_one_by_one() -> None:
    """A filter change writes a pane's 5,000 lines at once (`as_log_lines`): each line and the width are
    what `one_line` and the width of each line give, whatever the lines hold."""
    import random

    from ddptui.ui.widgets.pane_log import _cells, as_log_lines, one_line

    kinds = ["NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/0", "", "\tx\ty", "损失 loss", "a\rb", "p\x0cq",
             "s\u2028t", "x" * 200, "\x1b[31mred\x1b[0m", "é"]
    rnd = random.Random(0)
    for _ in range(500):
        lines = [rnd.choice(kinds) for _ in range(rnd.randint(0, 12))]
        want = [one_line(x) for x in lines]
        assert as_log_lines(lines) == (want, max(map(_cells, want), default=0)), lines
        assert as_log_lines(iter(lines))[0] == want


async def test_a_pane_measures_its_lines_without_a_thread_per_write(tmp_path: Path, runs_dir: Path) -> None:
    """Its width is the widest line's columns (tabs expanded, wide characters two), known as soon as the
    lines are written; no thread is started for it (Textual's Log starts one per write: under a flood
    a thread and a second layout per pane per frame)."""
    pb = tmp_path / "panes.yaml"
    pb.write_text(PB)
    wide = "[default0]:损失 loss=0.25 " + "x" * 90  # 2 wide characters: 2 columns each
    app = DdptuiApp(playbook=pb, runs_dir=runs_dir)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await pilot.pause(0.1)
        pane = screen.pane_grid.pane("alpha")
        started = []
        real_start = threading.Thread.start

        def start(self):
            started.append(self.name)
            real_start(self)

        threading.Thread.start = start
        try:
            pane.write(["short", "\ttab\tand " + "y" * 100, wide], 3)
            assert pane.log.virtual_size.width == 8 + 8 + len("and ") + 100  # the tabs' line is the widest
            await pilot.pause(0.2)
        finally:
            threading.Thread.start = real_start
        assert started == []
        pane.write([wide + "z" * 10], 1)
        assert pane.log.virtual_size.width == len(wide) + 2 + 10  # its 2 wide characters count 2 columns


async def test_lines_and_filters_change_a_pane_without_laying_the_screen_out(tmp_path: Path,
                                                                             runs_dir: Path) -> None:
    """Lines written to a pane, and a filter, change only that pane: its scrollbar's thumb follows
    the lines it holds and the newest line stays in view, without a layout of the whole screen,
    which Textual made for every change of a log's virtual size (a filter change is a clear and a
    refill: a layout a key, 20 ms of a `v` here)."""
    app = app_on(tmp_path, runs_dir)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await pilot.pause(0.1)
        pane = screen.pane_grid.pane("alpha")
        log = pane.log
        layouts = []
        real = screen._refresh_layout
        screen._refresh_layout = lambda *a, **k: (layouts.append(1), real(*a, **k))[1]
        await pilot.pause(0.5)  # the screen's own start (its footer, its tabs) laid out
        layouts.clear()

        def bottom_row() -> str:
            return log.render_line(log.scrollable_content_region.height - 1).text.rstrip()

        def write(lines: list[str]) -> None:
            pane.write(lines, len(lines))

        write([f"[default0]:step {i}" for i in range(5)])
        await pilot.pause(0.1)
        assert log.vertical_scrollbar.window_virtual_size == 5 and log.max_scroll_y == 0
        write([f"[default0]:step {i}" for i in range(5, 200)] + ["[default1]:RuntimeError: boom"])
        await pilot.pause(0.1)
        assert log.vertical_scrollbar.window_virtual_size == log.line_count == 201
        assert bottom_row() == "[default1]:RuntimeError: boom"  # following the tail
        write([f"[default0]:step {i}" for i in range(200, 300)])
        await pilot.pause(0.1)
        assert log.vertical_scrollbar.window_virtual_size == 301
        assert bottom_row() == "[default0]:step 299" and log.scroll_offset.y == log.max_scroll_y > 0
        pane.set_filter("warnings+errors")
        await pilot.pause(0.1)
        assert list(log.lines) == ["[default1]:RuntimeError: boom"] and log.max_scroll_y == 0
        assert log.render_line(0).text.rstrip() == "[default1]:RuntimeError: boom"
        assert log.vertical_scrollbar.window_virtual_size == 1
        pane.set_filter("rank 0")
        await pilot.pause(0.1)
        assert log.vertical_scrollbar.window_virtual_size == 300 and bottom_row() == "[default0]:step 299"
        pane.set_filter("all")
        await pilot.pause(0.1)
        assert log.vertical_scrollbar.window_virtual_size == 301 and bottom_row() == "[default0]:step 299"
        assert layouts == []


async def test_a_flood_draws_one_pane_a_frame(tmp_path: Path, runs_dir: Path, monkeypatch) -> None:
    """Under a flood the frame that takes the lines draws none of the panes, and each later frame
    draws one: a frame that drew all four cost the whole screen (60-100 ms under a 4 x 1M flood)
    and a key pressed then waited for it. Every pane still ends showing its newest line, and whole
    once the flood calms."""
    writes: list[list[str]] = []  # per frame: the nodes whose log was written in it
    real_frame = PlaybookScreen._frame

    def frame(self) -> None:
        writes.append([])
        real_frame(self)

    monkeypatch.setattr(PlaybookScreen, "_frame", frame)
    app = app_on(tmp_path, runs_dir, "name: four\ntransport: local\nnodes: [n1, n2, n3, n4]\n"
                                     "job: {script: builtin:smoke}\n")
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await pilot.pause(0.1)
        panes = {p.node: p for p in screen.pane_grid.panes}
        for node, pane in panes.items():
            real = pane.log.write_lines
            pane.log.write_lines = lambda lines, *a, _n=node, _r=real, **k: (writes[-1].append(_n) if writes else None,
                                                                             _r(lines, *a, **k))[1]
        n = 4000
        for start in range(0, n, 1000):  # the four nodes' lines, all queued before a frame takes them
            for node in panes:
                screen.bridge.push(NodeOutput(node, tuple(f"{node} line {i}" for i in range(start, start + 1000)),
                                              start + 1))
        writes.clear()
        for _ in range(100):  # 4 frames at 30 a second; up to 5 s on a busy machine
            await pilot.pause(0.05)
            if all(p.log.lines and p.log.lines[-1] == f"{node} line {n - 1}" for node, p in panes.items()):
                break
        drawn = [w for w in writes if w]
        assert sorted(x for w in drawn for x in w) == sorted(panes), drawn  # each pane once
        assert all(len(w) == 1 for w in drawn), drawn  # and no frame drew two
        for node, p in panes.items():
            assert p.log.lines[-1] == f"{node} line {n - 1}" and p.stale
            assert p.border_subtitle.startswith(f"{n} lines")
        for _ in range(50):  # once no line comes (a tick, 1 s), each log is whole again
            if not any(p.stale for p in panes.values()):
                break
            await pilot.pause(0.1)
        assert all(list(p.log.lines) == list(p.buffer) and len(p.buffer) == n for p in panes.values())


async def test_lines_that_keep_coming_are_drawn_a_few_times_a_second_and_a_lone_one_at_once(
        tmp_path: Path, runs_dir: Path, monkeypatch) -> None:
    """A running job's output (a line every 10 ms here, as prints and progress bars come): drawing
    the panes at every frame that had a line kept the TUI at 77% of a core for 4 nodes x 100 lines a
    second. The frames take what came at most LINES_FPS times a second (every line still reaches its
    pane, in order), and a line after a quiet spell is taken by the next frame."""
    import time

    from ddptui.ui.screens.frames import LINES_FPS

    drains: list[float] = []
    real = PlaybookScreen._drain

    def drain(self, frame: bool = False) -> bool:
        drains.append(time.monotonic())
        return real(self, frame)

    monkeypatch.setattr(PlaybookScreen, "_drain", drain)
    app = app_on(tmp_path, runs_dir)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await pilot.pause(0.2)
        alpha = screen.pane_grid.pane("alpha")
        drains.clear()
        t0 = time.monotonic()
        for i in range(100):
            screen.bridge.push(NodeOutput("alpha", (f"[default0]:step {i} loss=0.{i:03d}",), i + 1))
            await pilot.pause(0.01)
        for _ in range(50):
            await pilot.pause(0.05)
            if alpha.total_lines == 100:
                break
        elapsed = time.monotonic() - t0
        assert list(alpha.log.lines) == [f"[default0]:step {i} loss=0.{i:03d}" for i in range(100)]
        assert len(drains) <= elapsed * LINES_FPS + 2, (len(drains), elapsed)  # not one a frame (30 a second)
        await pilot.pause(0.5)  # quiet
        drains.clear()
        screen.bridge.push(NodeOutput("alpha", ("[default0]:done",), 101))
        for _ in range(100):
            await pilot.pause(0.02)
            if alpha.total_lines == 101:
                break
        assert alpha.log.lines[-1] == "[default0]:done" and len(drains) == 1


async def test_a_flood_under_a_filter_draws_each_kept_line_once(tmp_path: Path, runs_dir: Path) -> None:
    """A pane that waits for its turn draws only the lines that came since it last drew: with a filter
    that keeps few lines of a flood (warnings+errors in NCCL INFO chatter) the same lines are not
    drawn again each turn."""
    app = app_on(tmp_path, runs_dir)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await pilot.pause(0.1)
        alpha = screen.pane_grid.pane("alpha")
        alpha.set_filter("warnings+errors")
        first = 1
        for k in range(4):  # four frames' floods, each with one warning among 1,000 INFO lines
            batch = [f"[default0]:alpha:1:1 [0] NCCL INFO chatter {k}.{i}" for i in range(999)]
            batch.insert(500, f"[default0]:alpha:1:1 [0] misc/socket.cc:484 NCCL WARN flood {k}")
            screen.bridge.push(NodeOutput("alpha", tuple(batch), first))
            first += len(batch)
            await pilot.pause(0.4)  # past the flood's frame (FLOOD_FPS) and the pane's turn
        assert alpha.stale and alpha.total_lines == 4000
        assert [x.rsplit(" ", 2)[-2:] for x in alpha.log.lines] == [["flood", str(k)] for k in range(4)]


async def test_a_log_refilled_at_once_is_the_log_textual_would_write() -> None:
    """A cleared pane log refilled in one write (a filter change, a catch-up: PaneLog's own path, without
    Textual's splitlines and cache drops) holds the lines, width and size Textual's Log gives the same
    lines, keeps its last `max_lines`, and ends scrolled to its last line."""
    from textual.app import App
    from textual.widgets import Log

    from ddptui.ui.widgets.pane_log import PaneLog

    lines = [f"[default0]:node NCCL INFO Channel {i:02d}/0 : 0[0] -> 1[0] via NET/IB/0" + "x" * (i % 7) for i in range(900)]

    class Both(App):
        def compose(self):
            yield PaneLog(max_lines=500, id="pane")
            yield Log(max_lines=500, id="textual")

    app = Both()
    async with app.run_test(size=(100, 40)) as pilot:
        pane, textual = app.query_one("#pane", PaneLog), app.query_one("#textual", Log)
        for log in (pane, textual):
            log.write_lines(["old"] * 50)
            await pilot.pause()
            log.clear()
            log.write_lines(lines, scroll_end=True)
        await pilot.pause(0.2)
        assert list(pane.lines) == list(textual.lines) == lines[-500:]
        assert pane.virtual_size == textual.virtual_size and pane.line_count == 500
        assert pane.scroll_offset.y == pane.max_scroll_y > 0
        textual.scroll_end(animate=False)  # Textual 8's own write scrolls before the new size is laid out
        await pilot.pause(0.1)
        shown = [pane.render_line(y).text.rstrip() for y in range(pane.size.height)]
        assert shown == [textual.render_line(y).text.rstrip() for y in range(textual.size.height)]
        assert lines[-1] in shown


async def test_a_pane_whose_filter_changed_gives_its_flood_turn_on(tmp_path: Path, runs_dir: Path) -> None:
    """A filter chosen mid-flood draws that pane's newest lines at once; its turn, still queued, goes to
    the next pane that waits, rather than leaving a frame that draws nothing."""
    app = app_on(tmp_path, runs_dir)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await pilot.pause(0.1)
        grid = screen.pane_grid
        alpha, beta = grid.pane("alpha"), grid.pane("beta")
        grid.write({n: [f"{n} line {i}" for i in range(1000)] for n in ("alpha", "beta")},
                   {"alpha": 1000, "beta": 1000})
        assert grid.due == [alpha, beta] and alpha.tail_due and beta.tail_due
        alpha.set_filter("NCCL")
        assert not alpha.tail_due and alpha.border_subtitle.startswith("1000 lines")
        grid.draw_next()  # alpha's turn is spent: beta draws in this frame
        assert not beta.tail_due and beta.log.lines[-1] == "beta line 999" and grid.due == []
