"""One interface for every way of reaching a node: local (subprocess) and ssh (paramiko)."""

from __future__ import annotations

import json
import re
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence

from ..logs.lines import LineSplitter, OnLines, read_loop

GUARD_SOURCE = (Path(__file__).parent / "guard.py").read_text(encoding="utf-8")
CTL_PREFIX = "\x1eddptui-guard "
_STARTED = re.compile(r"started pid=(\d+) pgid=(\d+)(?: step=(\d+\.\d+))?")
_EXIT = re.compile(r"exit rc=(-?\d+)")
_DETACHED = re.compile(r"detached log=(.+)")
# Exported before a remote command runs (env on stdin, never in argv): the node's shell init has
# run by then, so ours wins.
# ddptui's heartbeat to every guard: a line on its stdin this often. A guard told `silence` stops
# its job when no line came for that long; SILENCE_FLOOR keeps several heartbeats inside it.
HEARTBEAT_EVERY = 2.0
HEARTBEAT = b"alive\n"
SILENCE_FLOOR = 10.0
ENV_PRELUDE = 'while IFS= read -r kv && [ -n "$kv" ]; do export "$kv"; done; '


def env_stdin(env: dict[str, str] | None) -> bytes:
    """The lines ENV_PRELUDE reads: NAME=value each, then an empty line."""
    lines = []
    for k, v in (env or {}).items():
        if "\n" in v:
            raise ValueError(f"env {k} contains a newline")
        lines.append(f"{k}={v}\n")
    return ("".join(lines) + "\n").encode()


def silence_limit(keepalive: float) -> float:
    """How long a guard runs its job without a word from ddptui: as long as OpenSSH would keep a
    connection that stopped answering (ServerAliveCountMax 3 × the interval), at least SILENCE_FLOOR."""
    return max(SILENCE_FLOOR, 3.0 * float(keepalive))


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    rc: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.rc == 0


@dataclass(frozen=True)
class LaunchSpec:
    """What the guard on the node starts: argv in cwd with env on top of the node's own."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    grace: float = 10.0
    detach_log: str | None = None  # where the node keeps the output if the user leaves the job running
    silence: float | None = None  # stop the job after this long without a line from ddptui (None: never)
    mask: tuple[str, ...] = ()  # env names whose values the detach log hides (names only: the env has them)

    def to_stdin(self) -> bytes:
        return (json.dumps({"argv": list(self.argv), "env": self.env, "cwd": self.cwd, "grace": self.grace,
                            "detach_log": self.detach_log, "silence": self.silence,
                            "mask": list(self.mask)}) + "\n").encode()


class RemoteProcess(ABC):
    """A job started under the guard on one node.

    Subclasses give three byte sources and the final status; this class runs the readers: the
    job's merged output goes to `on_lines` in batches, the guard's stderr carries its control
    lines (pid/pgid, exit code), and `done` is set once both streams have ended. It also sends the
    guard a heartbeat line every HEARTBEAT_EVERY seconds until the job ends or is left running.
    """

    def __init__(self, node: str) -> None:
        self.node = node
        self.pid: int | None = None
        self.pgid: int | None = None
        self.step: str | None = None  # "JOB.STEP" when the guard runs as a Slurm job step
        self.returncode: int | None = None
        self.lost = False  # the connection went away before the exit code came
        self.started = threading.Event()
        self.done = threading.Event()
        self.diagnostics: list[str] = []  # guard stderr that was not a control line
        self.detached = threading.Event()
        self.detach_log: str | None = None

    def _start_readers(self, on_lines: OnLines) -> None:
        out = threading.Thread(target=read_loop, args=(self._read_stdout, on_lines), daemon=True)
        err = threading.Thread(target=self._read_control, daemon=True)
        out.start()
        err.start()

        def reap() -> None:
            out.join()
            err.join()
            if self.returncode is None:  # the guard could not say: ask the channel or the process
                self.returncode, lost = self._exit_status()
                self.lost = self.lost or lost  # ddptui may already have declared the node lost
            self._release()
            self.started.set()
            self.done.set()

        threading.Thread(target=reap, daemon=True).start()
        threading.Thread(target=self._heartbeat, name=f"ddptui-heartbeat-{self.node}", daemon=True).start()

    def _heartbeat(self) -> None:
        while not self.done.wait(HEARTBEAT_EVERY) and not self.detached.is_set():
            self._send(HEARTBEAT)

    def _read_control(self) -> None:
        splitter = LineSplitter()
        while data := self._read_stderr():
            for line in splitter.feed(data):
                self._control(line)
        for line in splitter.flush():
            self._control(line)

    @abstractmethod
    def _read_stdout(self) -> bytes:
        """The next chunk of the job's output; b"" at the end."""

    @abstractmethod
    def _read_stderr(self) -> bytes:
        """The next chunk of the guard's own stderr; b"" at the end."""

    @abstractmethod
    def _exit_status(self) -> tuple[int | None, bool]:
        """(exit code, lost) when the guard's exit line never came."""

    def _release(self) -> None:  # noqa: B027 - a hook: an SSH channel holds nothing to let go
        """The guard's output has ended: what holds it here (a child process to reap, pipes) is let go."""

    def _control(self, line: str) -> None:
        if not line.startswith(CTL_PREFIX):
            if line.strip():
                self.diagnostics.append(line)
            return
        msg = line[len(CTL_PREFIX):]
        if m := _STARTED.match(msg):
            self.pid, self.pgid, self.step = int(m.group(1)), int(m.group(2)), m.group(3)
            self.started.set()
        elif m := _EXIT.match(msg):
            self.returncode = int(m.group(1))
        elif m := _DETACHED.match(msg):
            self.detach_log = m.group(1)
            self.detached.set()

    def wait(self, timeout: float | None = None) -> int | None:
        self.done.wait(timeout)
        return self.returncode

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def stop(self) -> None:
        """Ask the guard to stop the job (TERM to the group, KILL after the grace period)."""
        self._send(b"stop\n")

    def detach(self, timeout: float = 5.0) -> bool:
        """Leave the job running: the guard keeps its output in a file on the node. True when it did."""
        self._send(b"detach\n")
        return self.detached.wait(timeout)

    @abstractmethod
    def _send(self, data: bytes) -> None:
        """Write to the guard's stdin; never raises."""


class Transport(ABC):
    """A node we can run commands on, over one connection for the whole run."""

    kind = "abstract"

    def __init__(self, node: str) -> None:
        self.node = node

    @property
    def address(self) -> str | None:
        """The node's address as reached from here (None when not connected)."""
        return None

    @abstractmethod
    def connect(self) -> None:
        """Open the connection, or raise NodeError in words a person can act on."""

    @abstractmethod
    def run(self, argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
            stdin: bytes | None = None, shell: str | None = None) -> CommandResult:
        """Run a short command (argv, or a `sh -c` script) and collect its output."""

    @abstractmethod
    def start(self, spec: LaunchSpec, on_lines: OnLines, python: str) -> RemoteProcess:
        """Start a long-running job under the guard, streaming merged output to on_lines."""

    @abstractmethod
    def put_file(self, local: Path, remote_name: str) -> str:
        """Copy a file onto the node (ddptui's cache folder); return its absolute path there."""

    @abstractmethod
    def close(self) -> None: ...
