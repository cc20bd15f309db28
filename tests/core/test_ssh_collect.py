"""A command's output over SSH is read to the channel's EOF, not to its exit status.

sshd may send the exit status before the last of the command's output: it reaps the command while
the pipe still holds what it wrote. CI saw it (2026-12-02): a node probe's last two sections (the
route to the master, the ping) were missing, so a node's bad-socket-ifname went unsaid. The channel
here is a TEST DOUBLE that delivers what a paramiko Channel would receive, in that order and at
those moments; the real paramiko + sshd path runs in every cluster test.
"""

from __future__ import annotations

import os
import time

from ddptui.core.transport.ssh import EOF_GRACE, SSHTransport


class ScriptedChannel:
    """TEST DOUBLE of a paramiko Channel: stdout chunks at given moments, the exit status at one,
    EOF at another (or never)."""

    def __init__(self, chunks: list[tuple[float, bytes]], exit_at: float, eof_at: float | None) -> None:
        self.t0 = time.monotonic()
        self.chunks, self.exit_at, self.eof_at = chunks, exit_at, eof_at
        self.taken = 0
        self.closed = False
        r, w = os.pipe()
        os.write(w, b"x")  # always readable: select returns at once, the loop polls
        self._r, self._w = r, w

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def fileno(self) -> int:
        return self._r

    def setblocking(self, flag: bool) -> None:
        pass

    def recv_ready(self) -> bool:
        return self.taken < len(self.chunks) and self.chunks[self.taken][0] <= self._now()

    def recv(self, n: int) -> bytes:
        self.taken += 1
        return self.chunks[self.taken - 1][1]

    def recv_stderr_ready(self) -> bool:
        return False

    def exit_status_ready(self) -> bool:
        return self._now() >= self.exit_at

    def recv_exit_status(self) -> int:
        return 0

    @property
    def eof_received(self) -> bool:
        return self.eof_at is not None and self._now() >= self.eof_at

    def close(self) -> None:
        os.close(self._r)
        os.close(self._w)


def test_output_that_arrives_after_the_exit_status_is_kept() -> None:
    chan = ScriptedChannel([(0.0, b"@@ddptui:begin addr\n"), (0.3, b"@@ddptui:begin route\nvia eth0\n")],
                           exit_at=0.1, eof_at=0.35)
    try:
        out, err, rc = SSHTransport._collect(chan, timeout=10)
    finally:
        chan.close()
    assert (out, err, rc) == (b"@@ddptui:begin addr\n@@ddptui:begin route\nvia eth0\n", b"", 0)


def test_output_held_open_by_a_background_process_ends_after_the_grace() -> None:
    # `nohup server &` in a shell step: the command exits, the server keeps its stdout open, no EOF
    chan = ScriptedChannel([(0.0, b"started\n")], exit_at=0.05, eof_at=None)
    t0 = time.monotonic()
    try:
        out, _, rc = SSHTransport._collect(chan, timeout=30)
    finally:
        chan.close()
    assert (out, rc) == (b"started\n", 0)  # the exit status and what came (a timeout gives rc None)
    assert time.monotonic() - t0 >= EOF_GRACE  # after waiting for the rest as long as the grace
