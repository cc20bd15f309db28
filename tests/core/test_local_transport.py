"""The guard every launch runs under: its own process group, and nothing left behind on stop."""

from __future__ import annotations

import os
import sys
import threading
import time

import psutil

from ddptui.core.logs.lines import LineSplitter
from ddptui.core.transport.base import LaunchSpec
from ddptui.core.transport.local import LocalTransport

# A parent that starts a child in a NEW session (as torchrun starts its workers), then both sleep.
TREE = """
import subprocess, sys, time
c = subprocess.Popen([sys.executable, '-c', 'import time; print("child up", flush=True); time.sleep(300)'],
                     start_new_session=True)
print("parent up", c.pid, flush=True)
time.sleep(300)
"""


def _start(transport, argv, grace=2.0):
    lines: list[str] = []
    got = threading.Event()

    def on_lines(batch):
        lines.extend(batch)
        if sum("up" in x for x in lines) >= 2:
            got.set()

    proc = transport.start(LaunchSpec(tuple(argv), {"MARK": "ddptui-test"}, None, grace), on_lines, sys.executable)
    assert proc.started.wait(10) and proc.pid
    assert got.wait(20), lines
    return proc, lines


def _tree_pids(lines) -> list[int]:
    parent_line = next(x for x in lines if x.startswith("parent up"))
    return [int(parent_line.split()[2])]


def test_stop_kills_the_group_and_workers_in_other_sessions():
    t = LocalTransport("here")
    proc, lines = _start(t, [sys.executable, "-c", TREE])
    job = psutil.Process(proc.pid)
    assert job.pid == proc.pgid  # its own group
    import os
    assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
    child = _tree_pids(lines)[0]
    assert os.getsid(child) == child  # the child really is in another session
    proc.stop()
    assert proc.wait(20) is not None
    for pid in (proc.pid, child):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert proc.returncode == 143 or proc.returncode == 137  # TERM (or KILL after the grace)


def test_closing_stdin_stops_the_job_like_a_dropped_connection():
    t = LocalTransport("here")
    proc, lines = _start(t, [sys.executable, "-c", TREE])
    child = _tree_pids(lines)[0]
    proc._p.stdin.close()  # what sshd does to the guard when the connection drops
    assert proc.wait(20) is not None
    deadline = time.time() + 10
    while time.time() < deadline and psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.1)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_exit_code_env_and_output_order():
    t = LocalTransport("here")
    out: list[str] = []
    code = "import os,sys\nfor i in range(3000): print(i)\nprint(os.environ['MARK'])\nsys.exit(3)"
    proc = t.start(LaunchSpec((sys.executable, "-c", code), {"MARK": "from-stdin"}), out.extend, sys.executable)
    assert proc.wait(30) == 3
    assert out[:3000] == [str(i) for i in range(3000)] and out[3000] == "from-stdin"


def test_env_never_appears_in_the_guard_argv():
    t = LocalTransport("here")
    proc = t.start(LaunchSpec((sys.executable, "-c", "import time; time.sleep(30)"), {"HF_TOKEN": "s3cr3t"}),
                   lambda _: None, sys.executable)
    assert proc.started.wait(10)
    guard = psutil.Process(proc._p.pid)
    job = psutil.Process(proc.pid)
    assert not any("s3cr3t" in a for a in guard.cmdline() + job.cmdline())
    proc.stop()
    assert proc.wait(20) is not None


def test_line_splitter_keeps_partial_lines():
    s = LineSplitter()
    assert s.feed(b"a\nb") == ["a"]
    assert s.feed(b"c\r\n\n") == ["bc", ""]
    assert s.feed(b"\xff tail") == [] and s.flush() == ["\ufffd tail"]


def test_line_splitter_gives_each_line_as_if_decoded_alone_whatever_the_chunks():
    """Chunks cut anywhere, even inside a UTF-8 sequence; bad bytes, CRs: each line comes out as
    that line's bytes decoded by themselves (the splitter decodes a chunk's whole lines at once)."""
    import random

    rnd = random.Random(7)
    pieces = [b"a", b"\n", b"\r\n", b"\r", "é".encode(), "漢".encode(), b"\xff", b"\xe4\xb8", b" NCCL INFO "]
    for _ in range(300):
        data = b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(0, 40)))
        want = [x.decode("utf-8", "replace").rstrip("\r") for x in data.split(b"\n")]
        if not data.split(b"\n")[-1]:  # the data ended with a newline (or is empty): no partial line left
            want.pop()
        s, got, i = LineSplitter(), [], 0
        while i < len(data):
            n = rnd.randrange(1, 8)
            got += s.feed(data[i:i + n])
            i += n
        got += s.flush()
        assert got == want, data


def test_detach_leaves_the_job_running_and_its_output_on_the_node(tmp_path):
    import os
    import signal

    log = tmp_path / "node.log"
    code = "import time\nfor i in range(600):\n print('tick', i, flush=True); time.sleep(0.05)\n"
    t = LocalTransport("here")
    seen: list[str] = []
    proc = t.start(LaunchSpec((sys.executable, "-c", code), {}, None, 2.0, detach_log=str(log)), seen.extend,
                   sys.executable)
    assert proc.started.wait(10)
    deadline = time.time() + 10
    while not seen and time.time() < deadline:
        time.sleep(0.05)
    assert seen and seen[0] == "tick 0"  # relayed to ddptui while attached
    assert proc.detach() and proc.detach_log == str(log)
    t.close()  # what quitting does: the detached job must not be stopped
    proc._p.stdin.close()  # and ddptui going away (stdin EOF) must not stop it either
    time.sleep(1.0)
    job = psutil.Process(proc.pid)
    try:
        assert job.is_running() and job.status() != psutil.STATUS_ZOMBIE
        n1 = len(log.read_text().splitlines())
        time.sleep(0.5)
        assert len(log.read_text().splitlines()) > n1 > 0  # output keeps coming, into the node's file
    finally:
        os.killpg(proc.pgid, signal.SIGTERM)  # the command ddptui prints for the user
    assert proc.wait(20) is not None


def test_the_detach_log_hides_the_runs_secrets_as_the_runs_logs_do(tmp_path):
    """The guard is told the secret variables' names (never their values: its env has them) and
    masks whole lines, so a token the job writes in two pieces is hidden too."""
    import os
    import signal

    token, log = "tok-7c6d5e4f3a2b1c", tmp_path / "node.log"
    code = ("import os, sys, time\nt = os.environ['API_TOKEN']\nfor i in range(600):\n"
            " sys.stdout.write('tick %d tok=%s' % (i, t[:6])); sys.stdout.flush(); time.sleep(0.02)\n"
            " print(t[6:] + ' and ' + os.environ['MY_VAR'], flush=True); time.sleep(0.02)\n")
    t = LocalTransport("here")
    seen: list[str] = []
    spec = LaunchSpec((sys.executable, "-c", code), {"API_TOKEN": token, "MY_VAR": "green-lantern"}, None, 2.0,
                      detach_log=str(log), mask=("API_TOKEN", "MY_VAR", "NOT_SET"))
    proc = t.start(spec, seen.extend, sys.executable)
    assert proc.started.wait(10)
    deadline = time.time() + 10
    while not seen and time.time() < deadline:
        time.sleep(0.05)
    assert token in seen[0]  # to ddptui as printed: ddptui masks what it receives itself
    try:
        assert proc.detach()
        deadline = time.time() + 10
        while (not log.exists() or log.read_text().count("\n") < 10) and time.time() < deadline:
            time.sleep(0.1)
        text = log.read_text()
        assert token not in text and "green-lantern" not in text and token[:6] not in text
        lines = text.splitlines()[1:]  # the first may have begun before the detach
        assert len(lines) >= 9 and all(x.endswith("tok=***REDACTED:API_TOKEN*** and ***REDACTED:MY_VAR***")
                                       for x in lines), lines
    finally:
        os.killpg(proc.pgid, signal.SIGTERM)
    assert proc.wait(20) is not None


def test_a_local_or_slurm_nodes_output_comes_through_a_1_mib_pipe():
    """The guard's output pipe (a local node's, srun's under Slurm) is asked of Linux at 1 MiB, not
    its default 64 KiB: a flood reaches the reader in reads up to 16 times larger (bench.stream:
    a quarter less CPU and time for 1M lines a node). Found from /proc: the pipe that the guard
    (the job's parent) writes to, and the end of it this process reads."""
    import fcntl

    t = LocalTransport("here")
    proc, _ = _start(t, [sys.executable, "-c", TREE])
    try:
        guard = psutil.Process(proc.pid).ppid()
        pipe = os.readlink(f"/proc/{guard}/fd/1")
        assert pipe.startswith("pipe:")
        (mine,) = [int(fd) for fd in os.listdir("/proc/self/fd") if _link(f"/proc/self/fd/{fd}") == pipe]
        assert fcntl.fcntl(mine, fcntl.F_GETPIPE_SZ) == 1 << 20
    finally:
        proc.stop()
        proc.wait(20)


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None
