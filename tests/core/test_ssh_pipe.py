"""A launch channel's stdout buffer (transport/ssh_pipe.py) answers as paramiko's own does: the
same bytes for every sequence of feeds and reads (whole or in part), the same readiness, length,
event, timeout and close. Every run over ssh in tests/cluster reads through it as well."""

from __future__ import annotations

import random
import threading
import time

import pytest
from paramiko.buffered_pipe import BufferedPipe, PipeTimeout

from ddptui.core.transport.ssh_pipe import PiecesPipe


def test_every_sequence_of_feeds_and_reads_gives_paramikos_bytes():
    rnd = random.Random(3)
    for _ in range(300):
        ours, theirs = PiecesPipe(), BufferedPipe()
        ev_ours, ev_theirs = threading.Event(), threading.Event()
        ours.set_event(ev_ours)
        theirs.set_event(ev_theirs)
        for _ in range(rnd.randrange(1, 40)):
            op = rnd.random()
            if op < 0.5:
                data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 300)))
                ours.feed(data)
                theirs.feed(data)
            elif op < 0.9 and theirs.read_ready():
                n = rnd.choice([1, 7, 64, 1 << 23])
                assert ours.read(n, 0.0) == theirs.read(n, 0.0)
            elif op < 0.95:
                assert ours.empty() == theirs.empty()
            assert ours.read_ready() == theirs.read_ready()
            assert len(ours) == len(theirs)
            assert ev_ours.is_set() == ev_theirs.is_set()
        ours.close()
        theirs.close()
        assert ours.read(1 << 23) == theirs.read(1 << 23)  # what was left, then the end
        assert ours.read(10) == theirs.read(10) == b""


def test_a_reader_that_keeps_up_gets_each_payload_itself_and_one_behind_gets_them_joined():
    pipe = PiecesPipe()
    payload = b"x" * 32768
    pipe.feed(payload)
    assert pipe.read(1 << 23) is payload  # no copy
    pipe.feed(b"a\n")
    pipe.feed(b"b\n")
    pipe.feed(b"c")
    assert pipe.read(3) == b"a\nb"
    assert pipe.read(1 << 23) == b"\nc"


def test_a_read_waits_for_data_times_out_and_ends_at_close():
    pipe = PiecesPipe()
    with pytest.raises(PipeTimeout):
        pipe.read(10, 0.0)
    t0 = time.monotonic()
    with pytest.raises(PipeTimeout):
        pipe.read(10, 0.05)
    assert time.monotonic() - t0 >= 0.04
    threading.Timer(0.05, pipe.feed, args=(b"late",)).start()
    assert pipe.read(10, 5.0) == b"late"  # a blocked read is woken by the feed
    threading.Timer(0.05, pipe.close).start()
    assert pipe.read(10) == b""  # and by the close
