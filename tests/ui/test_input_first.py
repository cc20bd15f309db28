"""Input first: while the app answers a key, the nodes' readers wait before handing on their next
batch, and go on once the key's effect is drawn (or after `InputFirst.most`); nothing they read is
lost, and nothing else waits (events, the UI thread itself)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ddptui.core.events import NodeOutput, Notice
from ddptui.core.logs.lines import Chunk
from ddptui.ui.app import DdptuiApp
from ddptui.ui.bridge import EventBridge, InputFirst
from ddptui.ui.screens.playbook import PlaybookScreen
from ddptui.ui.widgets.panes import NodePane

PB = """\
name: input-first
transport: local
nodes: [a]
job: {script: builtin:smoke}
steps: [launch-master, wait-master, launch-workers, watch]
"""


def batch(first: int, n: int) -> NodeOutput:
    return NodeOutput("a", Chunk.of_bytes("".join(f"line {i}\n" for i in range(first, first + n)).encode()), first + 1)


def pushed_in_thread(bridge: EventBridge, ev) -> threading.Thread:
    t = threading.Thread(target=bridge.push, args=(ev,), daemon=True)
    t.start()
    return t


def held(most: float) -> tuple[InputFirst, EventBridge]:
    """A bridge whose gate a key has just closed."""
    gate = InputFirst(most=most)
    gate.hold()
    return gate, EventBridge(100, gate)


def test_a_reader_waits_out_a_hold_until_it_is_released():
    gate, bridge = held(60)
    reader = pushed_in_thread(bridge, batch(0, 3))
    reader.join(0.3)
    assert reader.is_alive() and not bridge.pending  # held: the batch waits with its reader
    gate.release()
    reader.join(10)
    assert not reader.is_alive()
    assert bridge.drain().lines == {"a": ["line 0", "line 1", "line 2"]}


def test_a_hold_that_nobody_releases_ends_by_itself():
    """A key whose release never comes (its screen closed under it): the readers go on after `most`."""
    _, bridge = held(0.2)
    reader = pushed_in_thread(bridge, batch(0, 1))
    reader.join(30)
    assert not reader.is_alive() and bridge.pending
    more = pushed_in_thread(bridge, batch(1, 1))  # and the next batch does not wait either
    more.join(30)
    assert not more.is_alive()


def test_the_ui_thread_and_events_other_than_lines_never_wait():
    gate, bridge = held(60)
    notice = pushed_in_thread(bridge, Notice("warning", "a node's state"))  # not a reader's lines
    notice.join(30)
    assert not notice.is_alive()

    def as_the_ui_thread() -> None:
        gate.ui_thread = threading.get_ident()
        bridge.push(batch(0, 1))  # a recorded run's replay pushes from the UI thread: waiting would hang it

    ui = threading.Thread(target=as_the_ui_thread, daemon=True)
    ui.start()
    ui.join(30)
    assert not ui.is_alive()
    d = bridge.drain()  # both were queued, in their order
    assert [type(e).__name__ for e in d.events] == ["Notice"] and sum(d.counts.values()) == 1


async def test_a_key_holds_the_readers_until_its_effect_is_drawn(tmp_path: Path, runs_dir: Path) -> None:
    """The app's wiring: a key coming in holds the readers of the run screen's bridge, the screen
    drawn after its action releases them, and every line a reader pushed reaches the pane."""
    pb = tmp_path / "input-first.yaml"
    pb.write_text(PB)
    app = DdptuiApp(playbook=pb, runs_dir=runs_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, PlaybookScreen) and screen.bridge.gate is app.input_first
        pane = screen.query_one(NodePane)
        stop, sent = threading.Event(), [0]

        def reader() -> None:  # as a node's reader does: a batch of lines, as fast as they come
            while not stop.is_set():
                screen.bridge.push(batch(sent[0], 10))
                sent[0] += 10
                time.sleep(0.001)

        during: list[int] = []

        def slow_filter() -> None:  # the key's action, made slow enough that an unheld reader pushes meanwhile
            before = sent[0]
            time.sleep(app.input_first.most * 0.6)
            during.append(sent[0] - before)
            screen.pane_grid.cycle_filter(["all", "NCCL"])

        screen.action_cycle_filter = slow_filter
        t = threading.Thread(target=reader, daemon=True)
        t.start()
        await pilot.pause(0.3)
        assert sent[0] > 0
        await pilot.press("v")
        assert during and during[0] <= 10, during  # at most the batch under way when the key came
        await pilot.pause(0.3)
        after_key = sent[0]
        await pilot.pause(0.3)
        assert sent[0] > after_key  # released once drawn
        stop.set()
        t.join(10)
        for _ in range(50):
            await pilot.pause(0.05)
            if pane.total_lines == sent[0]:
                break
        assert pane.total_lines == sent[0]  # nothing a reader pushed was lost
        assert pane.filter == "NCCL"


async def test_a_key_that_a_widget_keeps_releases_the_readers_once_drawn(tmp_path: Path, runs_dir: Path) -> None:
    """Characters typed into the find box never reach the app's bindings: the readers go on once the
    screen shows them, not after the hold's limit (made 60 s here, so that waiting it out would show)."""
    pb = tmp_path / "input-first.yaml"
    pb.write_text(PB)
    app = DdptuiApp(playbook=pb, runs_dir=runs_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        app.input_first.most = 60
        await pilot.press("slash")
        find = screen.query_one("#find")
        assert find.display and app.focused is find
        await pilot.press("N", "C", "C", "L")
        assert find.value == "NCCL"
        reader = pushed_in_thread(screen.bridge, batch(0, 5))
        reader.join(10)
        assert not reader.is_alive()  # released: the batch went on
        for _ in range(50):
            await pilot.pause(0.05)
            if screen.query_one(NodePane).total_lines == 5:
                break
        assert screen.query_one(NodePane).total_lines == 5

