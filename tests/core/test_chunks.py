"""A reader's batches as bytes (logs/lines.py): what read_loop delivers is each line as it would
be decoded alone, in batches that never wait for a later read, and a Chunk's strings are made only
for the lines read from it."""

from __future__ import annotations

import random
import threading
from functools import partial

from ddptui.core.events import NodeOutput, Notice
from ddptui.core.logs.lines import Chunk, lines_in, read_loop
from ddptui.ui.bridge import EventBridge, _Queued


def reads_of(data: bytes, rnd: random.Random):
    i = 0
    while i < len(data):
        n = rnd.randrange(1, 9)
        yield data[i:i + n]
        i += n


def test_read_loop_gives_each_line_as_if_decoded_alone_whatever_the_reads():
    """Reads cut anywhere, inside a UTF-8 sequence too; bad bytes, CRs, a last line without its
    newline: the lines are those of the stream, each decoded by itself ("\\r" at a line's end
    dropped), and each batch's bytes are exactly its lines, each followed by "\\n"."""
    rnd = random.Random(11)
    pieces = [b"a", b"\n", b"\r\n", b"\r", "é".encode(), "漢".encode(), b"\xff", b"\xe4\xb8", b" NCCL INFO "]
    for _ in range(400):
        data = b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(0, 50)))
        want = [x.decode("utf-8", "replace").rstrip("\r") for x in data.split(b"\n")]
        if not data.split(b"\n")[-1]:
            want.pop()
        it = reads_of(data, rnd)
        batches: list[Chunk] = []
        read_loop(partial(next, it, b""), batches.append)
        got = [line for c in batches for line in c]
        assert got == want, data
        for c in batches:
            assert c.count == len(list(c)) > 0
            assert c.data == "".join(x + "\n" for x in c).encode()


def test_a_batch_never_waits_for_the_next_read():
    """A burst of lines, then the job goes quiet: its lines are delivered before the reader waits
    again (a batch held back for more would sit there until the job's next line, minutes later)."""
    delivered = threading.Event()
    seen: list[bool] = []
    burst = b"".join(b"%05d " % i + b"x" * 200 + b"\n" for i in range(30))  # over 4 KiB, a few lines

    def read():
        if not seen:
            seen.append(False)
            return burst
        if len(seen) == 1:
            seen.append(delivered.wait(5))  # the job says nothing more for a while
        return b""

    read_loop(read, lambda c: delivered.set())
    assert seen == [False, True]


def test_tail_makes_strings_of_the_newest_lines_only():
    lines = [f"line {i} é" for i in range(1000)]
    for n in (0, 1, 2, 999, 1000, 5000):
        c = Chunk.of_bytes("".join(x + "\n" for x in lines).encode())
        assert c.tail(n) == (lines[-n:] if n else [])
        assert c._lines is None or n >= 1000  # the rest stayed bytes
    assert Chunk.of_lines(lines).tail(3) == lines[-3:]


def test_a_frame_of_a_flood_shows_its_newest_lines_and_counts_them_all():
    """The TUI's drain: a pane gets the newest lines it can hold, the merged view the newest of all
    nodes in arrival order, and the counts every line received."""
    bridge = EventBridge(max_lines_per_pane=100)
    a = [f"a{i}" for i in range(50_000)]
    b = [f"b{i}" for i in range(30)]
    bridge.push(NodeOutput("n0", Chunk.of_bytes("".join(x + "\n" for x in a[:49_950]).encode()), 1))
    bridge.push(NodeOutput("n1", tuple(b), 1))
    bridge.push(NodeOutput("n0", Chunk.of_bytes("".join(x + "\n" for x in a[49_950:]).encode()), 49_951))
    d = bridge.drain()
    assert d.counts == {"n0": 50_000, "n1": 30}
    assert d.lines == {"n0": a[-100:], "n1": b}
    assert d.merged == ([f"n0 │ {x}" for x in a[-70:-50]] + [f"n1 │ {x}" for x in b]
                        + [f"n0 │ {x}" for x in a[-50:]])


def test_a_flood_waiting_for_its_frame_keeps_only_what_a_pane_can_show():
    """Between two frames a flood's batches wait in the queue: a node's batch with a pane's worth of
    newer lines behind it keeps its count and lets its bytes go, and each frame drains what it
    would have drained with every batch kept (the newest lines per node, the merged view, the
    counts), events and their order included."""
    rnd = random.Random(7)
    spent = 0
    for _ in range(40):
        ours, kept = EventBridge(max_lines_per_pane=50), EventBridge(max_lines_per_pane=50)
        kept.push = lambda ev, q=kept._q: q.append(_Queued(ev) if type(ev) is NodeOutput else ev)  # type: ignore[method-assign]  # every batch whole
        lines = {"n0": 0, "n1": 0, "n2": 0}
        frames = []
        for _ in range(rnd.randrange(1, 6)):  # frames
            for _ in range(rnd.randrange(0, 40)):  # what comes between two drains
                if rnd.random() < 0.05:
                    ev = Notice("info", f"event {rnd.random()}")
                else:
                    node = rnd.choice(list(lines))
                    k = rnd.choice([1, 3, 20, 49, 50, 51, 120])
                    body = [f"{node} line {lines[node] + i}" for i in range(k)]
                    ev = NodeOutput(node, Chunk.of_lines(body) if rnd.random() < 0.7 else tuple(body), lines[node] + 1)
                    lines[node] += k
                ours.push(ev)
                kept.push(ev)
            held = sum(len(x.ev.lines.data) for x in ours._q if hasattr(x, "ev") and isinstance(x.ev.lines, Chunk))
            whole = sum(len(x.ev.lines.data) for x in kept._q if hasattr(x, "ev") and isinstance(x.ev.lines, Chunk))
            assert held <= whole
            spent += held < whole
            while kept.pending:
                a, b = ours.drain(), kept.drain()
                assert (a.lines, a.counts, a.merged, a.events) == (b.lines, b.counts, b.merged, b.events)
                frames.append(a)
            assert not ours.pending
    assert frames and spent, spent  # the bytes of some batches were let go


def test_a_pane_waiting_for_a_flood_holds_a_panes_worth_of_its_bytes():
    bridge = EventBridge(max_lines_per_pane=5_000)
    line = b"x" * 80 + b"\n"
    for i in range(400):  # 400 batches of 1,000 lines: 32 MB waiting for the next frame
        bridge.push(NodeOutput("n0", Chunk(line * 1_000), i * 1_000 + 1))
    held = sum(len(x.ev.lines.data) for x in bridge._q if isinstance(x.ev.lines, Chunk))
    assert held <= 6 * 1_000 * len(line), held  # the newest 5,000 lines and the batch that completes them
    d = bridge.drain()
    assert d.counts == {"n0": 400_000}
    assert len(d.lines["n0"]) == 5_000


def test_a_batch_with_a_secret_is_masked_and_one_without_passes_as_it_came():
    from ddptui.core.redact import Redactor

    r = Redactor({"API_TOKEN": "tok-3f9a1c", "DB_PASSWORD": "pässwört-42"})
    clean = Chunk.of_bytes(b"step 1 loss=0.3\nstep 2 loss=0.2\n")
    assert r.chunk(clean) is clean  # one search of the bytes, no copy
    hot = Chunk.of_bytes("a tok-3f9a1c b\nplain\nx=pässwört-42\n".encode())
    masked = r.chunk(hot)
    assert list(masked) == ["a ***REDACTED:API_TOKEN*** b", "plain", "x=***REDACTED:DB_PASSWORD***"]
    assert masked.data == b"".join(x.encode() + b"\n" for x in masked)


def test_a_line_that_never_ends_is_cut_so_a_reader_holds_a_bounded_amount():
    """A progress bar redrawn with "\\r" for a whole epoch never prints "\\n": the reader hands it on
    every MAX_LINE bytes instead of holding all of it, and no byte is lost."""
    from ddptui.core.logs.lines import MAX_LINE

    bar = b"\r 42%|####      | 420/1000 [00:10<00:14, 41.9it/s]"
    reads = [bar] * (3 * MAX_LINE // len(bar) + 1) + [b" done\nnext\n"]
    it = iter(reads)
    batches: list[Chunk] = []
    read_loop(partial(next, it, b""), batches.append)
    assert len(batches) == 3  # cut twice in 3 MiB; the rest ends with " done"
    assert all(c.count == 1 and MAX_LINE < len(c.data) <= MAX_LINE + len(bar) + 1 for c in batches[:-1])
    assert b"".join(c.data for c in batches).replace(b"\n", b"") == b"".join(reads).replace(b"\n", b"")
    assert list(batches[-1])[-1] == "next"


def test_a_batch_counts_its_lines_whatever_their_length():
    """`lines_in` takes one of two ways to count by the batch's first 4 KiB: both must give
    `bytes.count`'s answer, for batches of short lines, long ones, and short ones after long."""
    rnd = random.Random(5)
    for _ in range(300):
        parts = []
        for _ in range(rnd.randrange(1, 6)):  # runs of lines of one length each
            width = rnd.choice([0, 1, 2, 20, 31, 33, 80, 1000, 9000])
            parts += [b"x" * width + b"\n"] * rnd.randrange(1, 400)
        data = b"".join(parts)[: rnd.randrange(1, 40_000)]
        assert lines_in(data) == data.count(b"\n") == Chunk(data).count, (len(data), data[:40])
