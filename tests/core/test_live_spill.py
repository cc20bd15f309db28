"""The live diagnosis never holds a node's reader back: a batch that finds its queue full goes to
disk only, and the diagnosis reads it back from the node's log once it has caught up (live.py).

The worker is held busy on purpose (a call that waits for an event) so that the queue is full
for certain, not by the luck of timing; then every line must still be diagnosed, by the run's
end and also without it (a node that went quiet after its flood)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ddptui.core.diagnosis.engine import Engine
from ddptui.core.diagnosis.live import LiveDiagnosis
from ddptui.core.logs.rundir import RunDir

DATA = Path(__file__).resolve().parent.parent / "data" / "corpus" / "nccl"
CHATTER = [x for x in (DATA / "90-healthy-socket-aws-64ranks.log").read_text().splitlines() if not x.startswith("# ")]
FAILURE = ("node02:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> "
           "returned 113(No route to host) errno 115(Operation now in progress)")


def flood() -> list[list[str]]:
    """Batches of NCCL init chatter with the failure in the very last line."""
    lines = CHATTER * 300 + [FAILURE]
    return [lines[i:i + 100] for i in range(0, len(lines), 100)]  # 100 batches: more than the queue holds


def start(tmp_path: Path) -> tuple[LiveDiagnosis, RunDir, list, threading.Event]:
    seen: list = []
    live = LiveDiagnosis(expected_nnodes=1, master="node01", master_running=lambda: True, on_change=seen.append)
    live.run_in_background()
    rd = RunDir(tmp_path, "spill", "name: spill\n")
    hold = threading.Event()
    live._worker.put(lambda: hold.wait(60))  # the diagnosis is busy until `hold` is set
    return live, rd, seen, hold


def feed_like_the_reader(live: LiveDiagnosis, rd: RunDir, batches: list[list[str]], shown: list) -> threading.Thread:
    def reader() -> None:
        for lines in batches:  # what each node's reader does with a batch (the launch's and attach's)
            live.deliver(rd, shown.append, "node02", lines)
    t = threading.Thread(target=reader)
    t.start()
    return t


def test_a_busy_diagnosis_holds_no_reader_back_and_still_reads_every_line(tmp_path: Path) -> None:
    live, rd, seen, hold = start(tmp_path)
    batches, shown = flood(), []
    t = feed_like_the_reader(live, rd, batches, shown)
    t.join(30)
    assert not t.is_alive(), "the reader waited for the diagnosis"  # it is still held busy
    assert sum(len(o.lines) for o in shown) == sum(map(len, batches))  # the screen has every line already
    assert rd.log_path("node02").read_text().count("\n") == sum(map(len, batches))  # and the disk
    assert live._spills["node02"].count > 0  # what did not fit is owed, not queued
    hold.set()
    live.finish()
    want = Engine(expected_nnodes=1)
    for lines in batches:
        want.feed("node02", lines)
    got = live.findings
    assert [f.id for f in got] == [f.id for f in want.finish()] == ["firewall-or-unreachable"]
    ev = got[0].evidence[0]
    assert (ev.line, ev.text) == (300 * len(CHATTER) + 1, FAILURE)  # the last line, numbered as in the log
    assert live._engine.nodes["node02"].lines == 300 * len(CHATTER) + 1


def test_a_node_that_goes_quiet_after_its_flood_is_diagnosed_to_its_last_line(tmp_path: Path) -> None:
    live, rd, seen, hold = start(tmp_path)
    t = feed_like_the_reader(live, rd, flood(), [])
    t.join(30)
    hold.set()  # no more lines, no finish(): the worker catches up by itself once its queue empties
    deadline = time.monotonic() + 60
    while not any(f.id == "firewall-or-unreachable" for f in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(f.id == "firewall-or-unreachable" for f in seen)
    assert not live._spills


def test_lines_that_could_not_be_written_are_waited_for(tmp_path: Path) -> None:
    """No log to read back from (the disk is full): the reader waits rather than lose a line."""
    live, rd, seen, hold = start(tmp_path)
    batches = flood()
    done = []

    def reader() -> None:
        for i, lines in enumerate(batches):
            live.feed("node02", lines, i * 100 + 1)  # no read_back
            done.append(i)
    t = threading.Thread(target=reader)
    t.start()
    t.join(2)
    assert t.is_alive() and len(done) < len(batches)  # held back by the full queue
    hold.set()
    t.join(60)
    live.finish()
    assert [f.id for f in live.findings] == ["firewall-or-unreachable"]


def test_read_back_gives_the_lines_owed_and_no_more(tmp_path: Path) -> None:
    rd = RunDir(tmp_path, "rb", "name: rb\n")
    rd.append("n", ["a", "é"])
    at = rd.log_size("n")
    rd.append("n", [f"line {i}" for i in range(10)])
    rd.append("n", ["later"])
    for block in (1, 7, 1 << 22):  # blocks that cut lines anywhere
        got = "\n".join(rd.read_back("n", at, 10, block=block)).split("\n")
        assert got == [f"line {i}" for i in range(10)], block
    assert list(rd.read_back("n", at, 3)) == ["line 0\nline 1\nline 2"]
