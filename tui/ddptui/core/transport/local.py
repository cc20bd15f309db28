"""The local transport: this machine, through subprocess, under the same guard as ssh."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Sequence

from .base import GUARD_SOURCE, CommandResult, LaunchSpec, OnLines, RemoteProcess, Transport


# The guard's output pipe, asked of Linux at 1 MiB instead of its 64 KiB: a flood (local nodes, and
# srun's output under Slurm) reaches the readers in reads up to 16 times larger, each one batch with
# its own costs (log, index, printer, diagnosis): bench.stream, 1M NCCL lines a node, 4 runs each
# way alternating, 1 node 0.21-0.31 s against 0.32-0.43 s, 4 nodes 0.90-1.03 s against 1.05-1.48 s,
# ddptui's CPU over them 0.69-0.84 s against 0.90-1.23 s. The guard's own reads of the job's pipe
# stay at 64 KiB: widened too, they measured no better (1 node 0.29-0.32 s), a coarser pipeline.
PIPE = 1 << 20


def widen(fd: int) -> None:
    """Best effort: Linux only, and a user over the kernel's pipe-user-pages limit is refused it."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE)
    except (OSError, AttributeError):  # AttributeError: no F_SETPIPE_SZ (macOS)
        pass


class LocalProcess(RemoteProcess):
    def __init__(self, node: str, popen: subprocess.Popen, on_lines: OnLines) -> None:
        super().__init__(node)
        self._p = popen
        widen(popen.stdout.fileno())
        self._start_readers(on_lines)

    def _read_stdout(self) -> bytes:
        return os.read(self._p.stdout.fileno(), PIPE)

    def _read_stderr(self) -> bytes:
        return os.read(self._p.stderr.fileno(), 65536)

    def _exit_status(self) -> tuple[int | None, bool]:
        rc = self._p.wait()  # the guard itself died before it could say
        return (rc if rc >= 0 else 128 - rc), False

    def _release(self) -> None:
        """Reap the guard (it said its job's exit and is on its way out: a zombie per launch while the
        TUI stays open, else) and close its pipes."""
        try:
            self._p.wait(10)
        except subprocess.TimeoutExpired:  # a guard that outlives its output: reaped by the next wait
            return
        for f in (self._p.stdin, self._p.stdout, self._p.stderr):
            try:
                f.close()
            except OSError:
                pass

    def _send(self, data: bytes) -> None:
        try:
            self._p.stdin.write(data)
            self._p.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass


class LocalTransport(Transport):
    kind = "local"

    def __init__(self, node: str) -> None:
        super().__init__(node)
        self._procs: list[LocalProcess] = []

    @property
    def address(self) -> str:
        return "127.0.0.1"

    def connect(self) -> None:
        return None

    def run(self, argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
            stdin: bytes | None = None, shell: str | None = None) -> CommandResult:
        cmd = ["sh", "-c", shell] if shell is not None else list(argv)
        full_env = {**os.environ, **(env or {})}
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, input=stdin or b"", capture_output=True, env=full_env, timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = None, e.stdout or b"", e.stderr or b""
        except OSError as e:
            rc, out, err = 127, b"", str(e).encode()
        return CommandResult(tuple(cmd), rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                             time.monotonic() - t0)

    def start(self, spec: LaunchSpec, on_lines: OnLines, python: str) -> LocalProcess:
        exe = python if os.sep in python else (shutil.which(python) or sys.executable)
        # its own session: a job the user leaves running must outlive this terminal's Ctrl-C and hangup
        p = subprocess.Popen([exe, "-c", GUARD_SOURCE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        p.stdin.write(spec.to_stdin())
        p.stdin.flush()
        proc = LocalProcess(self.node, p, on_lines)
        self._procs.append(proc)
        return proc

    def put_file(self, local: Path, remote_name: str) -> str:
        return str(local)  # the same filesystem

    def close(self) -> None:
        for p in self._procs:
            if p.running and not p.detached.is_set():  # a job the user left running stays
                p.stop()
