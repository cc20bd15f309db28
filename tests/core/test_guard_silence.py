"""The guard's deadline: a job whose ddptui falls silent (a cut link closes nothing) is stopped by its
guard on the node; ddptui's heartbeat keeps a job alive past the deadline; a job the user left running
is never stopped for silence; words the guard does not know are ignored."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil

from ddptui.core.transport.base import CTL_PREFIX, GUARD_SOURCE, SILENCE_FLOOR, HEARTBEAT_EVERY, LaunchSpec, \
    silence_limit
from ddptui.core.transport.local import LocalTransport

SLEEP = (sys.executable, "-c", "import time; print('up', flush=True); time.sleep(300)")


def _gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def _guard(spec: LaunchSpec) -> tuple[subprocess.Popen, int]:
    """The guard as a node runs it, its stdin held open by a ddptui that says nothing more."""
    g = subprocess.Popen([sys.executable, "-c", GUARD_SOURCE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    g.stdin.write(spec.to_stdin())
    g.stdin.flush()
    started = g.stderr.readline().decode()
    assert started.startswith(CTL_PREFIX + "started pid="), started
    return g, int(started.split("pid=")[1].split()[0])


def test_a_silent_ddptui_gets_its_job_stopped_by_the_guard():
    g, pid = _guard(LaunchSpec(SLEEP, grace=1.0, silence=1.5))
    try:
        g.stdin.write(b"hello from a later ddptui\n")  # an unknown word: ignored, but a word all the same
        g.stdin.flush()
        assert g.wait(30) == 143  # the job ended by TERM: the guard says so with its own exit code
        err = g.stderr.read().decode()
        assert CTL_PREFIX + "stopping reason=silence" in err and CTL_PREFIX + "exit rc=143" in err
        assert _gone(pid)
    finally:
        if g.poll() is None:
            g.kill()
        g.stdin.close()


def test_after_detach_silence_does_not_stop_the_job(tmp_path):
    g, pid = _guard(LaunchSpec(SLEEP, grace=1.0, silence=1.0, detach_log=str(tmp_path / "n.log")))
    try:
        g.stdin.write(b"detach\n")
        g.stdin.flush()
        assert "detached log=" in g.stderr.readline().decode()
        time.sleep(3.0)  # three deadlines without a word
        assert g.poll() is None and not _gone(pid)
    finally:
        g.stdin.write(b"stop\n")
        g.stdin.flush()
        g.wait(30)
        g.stdin.close()
    assert _gone(pid)


def test_ddptuis_heartbeat_keeps_the_job_running_past_the_deadline():
    t = LocalTransport("here")
    proc = t.start(LaunchSpec(SLEEP, grace=1.0, silence=HEARTBEAT_EVERY * 1.5), lambda _: None, sys.executable)
    try:
        assert proc.started.wait(10)
        assert proc.wait(HEARTBEAT_EVERY * 5) is None and proc.running  # several deadlines later
        assert not _gone(proc.pid)
    finally:
        proc.stop()
    assert proc.wait(30) in (143, 137)


def test_the_deadline_follows_ssh_keepalive_with_a_floor():
    assert silence_limit(15) == 45.0  # OpenSSH's ServerAliveCountMax 3 × ServerAliveInterval
    assert silence_limit(1) == SILENCE_FLOOR >= 4 * HEARTBEAT_EVERY
    spec = json.loads(LaunchSpec(("x",), silence=45.0).to_stdin())
    assert spec["silence"] == 45.0 and json.loads(LaunchSpec(("x",)).to_stdin())["silence"] is None
