"""Headless output of a node's lines: `node │ line` for every line, printed as one text per batch,
in the terminal's own encoding, mixed in order with the other events' lines."""

from __future__ import annotations

import io
import threading
import time
import json

from ddptui.cli_printer import Printer
from ddptui.core import events as E


def printed(out: io.TextIOBase, events: list) -> None:
    p = Printer(as_json=False, width=6, redactor=None)
    p.out = out
    for ev in events:
        p(ev)
    p.close()


def test_every_line_gets_its_node_and_the_events_stay_in_order() -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=False)
    printed(out, [E.Notice("info", "before"), E.NodeOutput("node02", ("a", "", "b ü"), 1, "stdout"),
                  E.Notice("info", "after"), E.NodeOutput("n3", ("c",), 1, "stdout")])
    out.flush()
    lines = raw.getvalue().decode().splitlines()
    assert lines[1:4] == ["node02 │ a", "node02 │ ", "node02 │ b ü"] and lines[5] == "n3     │ c", lines
    assert "before" in lines[0] and "after" in lines[4]


def test_a_terminal_that_is_not_utf8_gets_its_own_encoding() -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="latin-1")
    printed(out, [E.NodeOutput("node02", ("façade", "日本"), 1, "stdout")])
    out.flush()
    assert raw.getvalue().decode("latin-1").splitlines() == ["node02 ? façade", "node02 ? ??"]


def test_a_text_only_stream_gets_the_same_text() -> None:
    out = io.StringIO()
    printed(out, [E.NodeOutput("node02", ("x", "y"), 1, "stdout")])
    assert out.getvalue() == "node02 │ x\nnode02 │ y\n"


def test_json_output_is_what_json_dumps_makes_of_each_line_event() -> None:
    """`--json`: one object per line, byte for byte json.dumps of the contract's output event, in
    order, whatever the line holds (quotes, backslashes, controls, non-ASCII, astral characters)."""
    from ddptui.core.logs.lines import Chunk

    texts = ['plain', '', 'a "quoted" \\ back\\slash', 'tab\tand\x01ctl', 'ü 日本 😀', '{"json": [1, 2]}', 'x' * 5000]
    out = io.StringIO()
    p = Printer(as_json=True, width=6, redactor=None)
    p.out = out
    p(E.NodeOutput('no"de', Chunk.of_lines(texts), 41, "stdout"))
    p(E.NodeOutput("n2", ("last",), 7, "stderr"))
    p.close()
    want = [json.dumps({"event": "output", "node": 'no"de', "stream": "stdout", "line": 41 + i, "text": t})
            for i, t in enumerate(texts)]
    want.append(json.dumps({"event": "output", "node": "n2", "stream": "stderr", "line": 7, "text": "last"}))
    assert out.getvalue() == "".join(x + "\n" for x in want)


def test_a_node_state_says_its_word_once() -> None:
    """"localhost: exited — exited 0" said the state twice; a message that adds to it keeps both."""
    from ddptui.core.states import NodeStatus

    out = io.StringIO()
    printed(out, [E.NodeState("n1", NodeStatus.EXITED, "exited 0"), E.NodeState("n1", NodeStatus.STOPPED, "stopped (rc=143)"),
                  E.NodeState("n2", NodeStatus.UNREACHABLE, "timed out after 3 s"), E.NodeState("n3", NodeStatus.LOST, "")])
    assert [x.split("│", 1)[1].strip() for x in out.getvalue().splitlines()] == [
        "n1: exited 0", "n1: stopped (rc=143)", "n2: unreachable — timed out after 3 s", "n3: lost"]


def test_a_finding_is_marked_as_what_it_is() -> None:
    """A good run's information (torchrun's exit barrier race) is no warning sign; a problem is one,
    and a settled finding is ticked."""
    from ddptui.core.diagnosis.catalog import finding

    race = finding("exit-barrier-race", ["n5"], "n5: torchrun's exit barrier failed after this node's workers succeeded", [])
    failed = finding("unrecognized-failure", ["n1"], "n1: ValueError: bad", [])
    settled = finding("master-not-started", ["n1"], "n1: waits for the master", [])
    settled.state = "resolved"
    out = io.StringIO()
    printed(out, [E.FindingRaised(race), E.FindingRaised(failed), E.FindingRaised(settled)])
    assert [l.split("│ ", 1)[1].split(":", 1)[0] for l in out.getvalue().splitlines()] == [
        "ℹ exit-barrier-race (info, active)", "⚠ unrecognized-failure (error, active)",
        "✓ master-not-started (warning, resolved)"]


class _Slow(io.RawIOBase):
    """A terminal that takes its time: each write gives the other threads their turn first."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        time.sleep(0.0005)
        self.data += bytes(b)
        return len(b)


def test_nodes_printing_at_once_never_mix_their_lines() -> None:
    """Four nodes' readers print at once (each batch is made in its reader's thread and queued for
    the printer's writer): every line stays whole with its own node's name, and each batch is one
    run of lines, in its node's order."""
    raw = _Slow()
    out = io.TextIOWrapper(io.BufferedWriter(raw, buffer_size=64), encoding="utf-8")
    p = Printer(as_json=False, width=6, redactor=None)
    p.out = out
    batches, size = 40, 25

    start = threading.Barrier(4)

    def node(name: str) -> None:
        start.wait()
        for b in range(batches):
            p(E.NodeOutput(name, tuple(f"{name} batch {b} line {k}" for k in range(size)), 1 + b * size, "stdout"))
            time.sleep(0.001)  # a reader's next batch comes later: the nodes' batches interleave

    threads = [threading.Thread(target=node, args=(f"n{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p.close()
    lines = raw.data.decode().splitlines()
    assert len(lines) == 4 * batches * size
    runs: list[tuple[str, int]] = []  # (node, batch) of each run of lines, in the order printed
    for line in lines:
        pre, _, text = line.partition(" │ ")
        name, _, b, _, _ = text.split(" ")
        assert pre.strip() == name, line  # the node's name is the line's own
        if not runs or runs[-1] != (name, int(b)):
            runs.append((name, int(b)))
    assert len(runs) == 4 * batches  # no batch cut by another's lines
    for i in range(4):
        assert [b for n, b in runs if n == f"n{i}"] == list(range(batches))
    assert sum(a[0] != b[0] for a, b in zip(runs, runs[1:])) > 3  # the nodes did print at once, not one after another
