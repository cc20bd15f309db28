"""The guard relays every byte of the job's output even when a signal lands mid-write.

A write to a pipe (the guard's stdout is sshd's pipe) that a signal interrupts after some bytes
returns that count: Python retries only a write that wrote nothing (PEP 475). The guard has handlers
for TERM, HUP and INT, the very signals of a stop, when a job's last lines (a traceback) matter most."""

from __future__ import annotations

import os
import signal
import threading
import time

from ddptui.core.transport.guard import write_all

SIZE = 8 << 20  # 128 pipe buffers


def _through_a_pipe(write, data: bytes) -> tuple[bytes, object]:
    """`write(fd, data)` into a pipe read slowly by a thread, with SIGALRM (a handler set) every ms."""
    r, w = os.pipe()
    got: list[bytes] = []

    def reader() -> None:  # a little slower than the writer, as sshd behind a busy link is
        while chunk := os.read(r, 65536):
            got.append(chunk)
            time.sleep(0.0002)

    t = threading.Thread(target=reader)
    t.start()
    old = signal.signal(signal.SIGALRM, lambda *_: None)
    signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
    try:
        result = write(w, data)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, old)
        os.close(w)
        t.join(30)
        os.close(r)
    return b"".join(got), result


def test_a_plain_write_comes_back_short_under_signals() -> None:
    """What the guard guards against happens here: one os.write of 8 MiB stops at a signal."""
    data = os.urandom(SIZE)
    got, n = _through_a_pipe(os.write, data)
    assert n < SIZE and got == data[:n]


def test_write_all_delivers_every_byte_in_order_under_signals() -> None:
    data = os.urandom(SIZE)
    got, _ = _through_a_pipe(write_all, data)
    assert len(got) == SIZE and got == data
