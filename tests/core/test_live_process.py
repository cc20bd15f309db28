"""The live diagnosis runs in its own process and reads each node's log as it grows (live.py,
process.py, child.py): a reader's batch goes to disk and the screen and never waits for it.

The child is held still on purpose (SIGSTOP), not by the luck of timing, so the diagnosis is
certainly behind; then every line must still be diagnosed, by the run's end and also without it
(a node that went quiet after its flood). A child killed mid-flood is replaced and reads the
launch again; a parent that dies takes its child with it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ddptui.core.diagnosis.child import BLOCK
from ddptui.core.diagnosis.engine import Engine
from ddptui.core.diagnosis.live import DiagnosisFailed, LiveDiagnosis
from ddptui.core.diagnosis.process import COALESCE_SECONDS, MAX_RESTARTS
from ddptui.core.logs.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "corpus" / "nccl"
CHATTER = [x for x in (DATA / "90-healthy-socket-aws-64ranks.log").read_text().splitlines() if not x.startswith("# ")]
FAILURE = ("node02:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> "
           "returned 113(No route to host) errno 115(Operation now in progress)")


def flood(copies: int = 300) -> list[list[str]]:
    """Batches of NCCL init chatter with the failure in the very last line."""
    lines = CHATTER * copies + [FAILURE]
    return [lines[i:i + 100] for i in range(0, len(lines), 100)]


def start(tmp_path: Path) -> tuple[LiveDiagnosis, RunDir, list]:
    seen: list = []
    live = LiveDiagnosis(expected_nnodes=1, master="node01", master_running=lambda: True, on_change=seen.append)
    rd = RunDir(tmp_path, "live", "name: live\n")
    return live, rd, seen


def child_pid(live: LiveDiagnosis) -> int:
    live.reset()  # a launch starts the child
    live.flush()  # which is up and has answered
    return live._engine._proc.pid


def feed_like_the_reader(live: LiveDiagnosis, rd: RunDir, batches: list[list[str]], shown: list) -> threading.Thread:
    def reader() -> None:
        for lines in batches:  # what each node's reader does with a batch (the launch's and attach's)
            live.deliver(rd, shown.append, "node02", lines)
    t = threading.Thread(target=reader)
    t.start()
    return t


def expected(batches: list[list[str]]) -> list[str]:
    want = Engine(expected_nnodes=1)
    for lines in batches:
        want.feed("node02", lines)
    return [f.id for f in want.finish()]


@pytest.fixture
def live(tmp_path: Path):
    live, rd, seen = start(tmp_path)
    yield live, rd, seen
    live.close()


def test_a_stopped_diagnosis_holds_no_reader_back_and_still_reads_every_line(live) -> None:
    live, rd, seen = live
    pid = child_pid(live)
    os.kill(pid, signal.SIGSTOP)
    try:
        batches, shown = flood(), []
        t = feed_like_the_reader(live, rd, batches, shown)
        t.join(30)
        assert not t.is_alive(), "the reader waited for the diagnosis"  # the child is still stopped
        assert sum(len(o.lines) for o in shown) == sum(map(len, batches))  # the screen has every line already
        assert rd.log_path("node02").read_text().count("\n") == sum(map(len, batches))  # and the disk
        assert not any(f.id == "firewall-or-unreachable" for f in seen)  # nothing was diagnosed yet
    finally:
        os.kill(pid, signal.SIGCONT)
    live.finish()
    got = live.findings
    assert [f.id for f in got if f.id != "unrecognized-failure"] == expected(batches) == ["firewall-or-unreachable"]
    ev = got[0].evidence[0]
    assert (ev.node, ev.line, ev.text) == ("node02", 300 * len(CHATTER) + 1, FAILURE)  # numbered as in the log


def test_a_node_that_goes_quiet_after_its_flood_is_diagnosed_to_its_last_line(live) -> None:
    live, rd, seen = live
    pid = child_pid(live)
    os.kill(pid, signal.SIGSTOP)
    t = feed_like_the_reader(live, rd, flood(), [])
    t.join(30)
    os.kill(pid, signal.SIGCONT)  # no more lines, no finish(): the child reads on by itself
    deadline = time.monotonic() + 60
    while not any(f.id == "firewall-or-unreachable" for f in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(f.id == "firewall-or-unreachable" and f.evidence[0].text == FAILURE for f in seen)


class Words:
    """The child's stdin, counting the words of each kind the parent writes to it."""

    def __init__(self, pipe) -> None:
        self.pipe, self.ops = pipe, []

    def write(self, text: str) -> int:
        self.ops += [line.split('"op": "', 1)[1].split('"', 1)[0] for line in text.splitlines()]
        return self.pipe.write(text)

    def __getattr__(self, name: str):
        return getattr(self.pipe, name)


def test_a_running_jobs_trickle_is_told_in_few_words_and_a_lone_error_at_once(live) -> None:
    """A job's output comes a line every few ms (prints, a progress bar): a word to the child per
    batch woke the sender and the child for each (0.2-0.3 ms of CPU each here). The batches of one
    window go in one word; the lines are all diagnosed all the same; a line after a quiet spell goes
    to the child without waiting for a flush (a lone failure is raised while the job runs)."""
    live, rd, seen = live
    child_pid(live)
    words = live._engine._proc.stdin = Words(live._engine._proc.stdin)
    t0 = time.monotonic()
    for i in range(200):
        live.deliver(rd, lambda e: None, "node02", [f"[default0]:epoch 1 step {i} loss=0.{i:03d}"])
        time.sleep(0.002)
    elapsed = time.monotonic() - t0
    time.sleep(3 * COALESCE_SECONDS)  # quiet: the sender waits for the next batch
    grew = words.ops.count("grew")
    assert 1 <= grew <= min(50, elapsed / COALESCE_SECONDS + 2), (grew, elapsed)  # not one per batch (200)
    live.deliver(rd, lambda e: None, "node02", [FAILURE])
    deadline = time.monotonic() + 30
    while not any(f.id == "firewall-or-unreachable" for f in seen) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert any(f.id == "firewall-or-unreachable" for f in seen)  # raised with no flush, no finish
    assert words.ops.count("grew") == grew + 1 and "sync" not in words.ops
    ev = next(f for f in seen if f.id == "firewall-or-unreachable").evidence[0]
    assert ev.line == 201  # every line before it was read, numbered as in the log


def test_a_killed_diagnosis_is_replaced_and_misses_nothing(live) -> None:
    live, rd, seen = live
    batches = flood()
    half = len(batches) // 2
    for lines in batches[:half]:
        live.deliver(rd, lambda e: None, "node02", lines)
    live.node_exited("node02", 1)  # a word said before the death: the new child must hear it too
    live.flush()
    first = live._engine._proc.pid
    os.kill(first, signal.SIGKILL)
    for lines in batches[half:]:
        live.deliver(rd, lambda e: None, "node02", lines)
    live.finish()
    got = live.findings
    assert live._engine._proc.pid != first and live._engine.restarts == 1
    assert [f.id for f in got] == ["firewall-or-unreachable"]  # it explains the exit: no unrecognized-failure
    assert got[0].evidence[0].line == 300 * len(CHATTER) + 1


def test_a_diagnosis_that_keeps_dying_is_given_up_in_words(live) -> None:
    live, rd, seen = live
    live.deliver(rd, lambda e: None, "node02", [FAILURE])
    assert [f.id for f in live.findings] == ["firewall-or-unreachable"]
    for _ in range(MAX_RESTARTS + 1):  # each death is met by a new child, until the last
        pid = live._engine._proc.pid
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while live._engine._proc.pid == pid and live._engine._failed is None and time.monotonic() < deadline:
            time.sleep(0.02)
    with pytest.raises(DiagnosisFailed, match="keeps ending"):
        live.finish()
    assert [f.id for f in live.findings] == ["firewall-or-unreachable"]  # what it found before still stands


def test_the_childs_findings_are_the_engines_and_a_relaunch_starts_afresh(live) -> None:
    live, rd, seen = live
    live.deliver(rd, lambda e: None, "node02", [FAILURE])
    assert [f.id for f in live.findings] == ["firewall-or-unreachable"]
    live.reset()  # a relaunch: the same log goes on, the diagnosis starts from its next line
    live.deliver(rd, lambda e: None, "node02", ["all fine now"])
    assert live.findings == []
    live.deliver(rd, lambda e: None, "node02", [FAILURE])
    (f,) = live.findings
    assert f.evidence[0].line == 3  # the line's number in the log, which went on across the relaunch


def _thread_nices(pid: int) -> list[int]:
    """Each thread's nice value (Linux's is a thread's): field 19 of its stat, after the name."""
    return [int(Path(t, "stat").read_text().rsplit(")", 1)[1].split()[16]) for t in Path(f"/proc/{pid}/task").iterdir()]


def _autogroup(pid: int) -> tuple[str, str] | None:
    """The process's autogroup and its nice, or None for the root group: the kernel prints nothing
    for the group of init's session, where a runner that never starts a session (CI's) leaves its
    tests."""
    words = Path(f"/proc/{pid}/autogroup").read_text().split()  # "/autogroup-37770 nice 0"
    return (words[0], words[2]) if words else None


def test_the_diagnosis_gives_the_cpu_to_the_screen_and_the_disk_first(live) -> None:
    """On a login node short of cores, a flood's readers and the UI go first and the diagnosis lags:
    every thread of the child runs 10 lower than ddptui, and so does its autogroup (the kernel's
    per-session group, which gets a fair share whatever its members' nice: the child, a session of
    its own, would otherwise take a core's share from ddptui's readers)."""
    pid = child_pid(live[0])  # up and answered: its threads are all started
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    nices = _thread_nices(pid)
    assert len(nices) >= 2 and set(nices) == {min(19, mine + 10)}
    if Path("/proc/self/autogroup").exists():  # a kernel built with autogroup (Debian's, Ubuntu's, CI's)
        group, ours = _autogroup(pid), _autogroup(os.getpid())
        assert group is not None and group[1] == "10" and group != ours  # its own group, not ours


# A process of its own session (as the child is) sets its autogroup's nice, then asks give_way() for
# 10 within the tenth of a second the kernel allows one such write in (without CAP_SYS_ADMIN)
RATE_LIMITED = """
import os, time
from ddptui.core.diagnosis.child import give_way
os.setsid()
while True:  # the limit is the machine's: another process's write may have just taken the turn
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("5")
        break
    except BlockingIOError:
        time.sleep(0.02)
give_way()
print(open("/proc/self/autogroup").read().split()[-1])
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not Path("/proc/self/autogroup").exists(),
                    reason="needs root (to drop CAP_SYS_ADMIN with setpriv) and a kernel with autogroup")
def test_the_diagnosis_waits_out_the_kernels_limit_on_autogroup_writes() -> None:
    """Any user but root is allowed one autogroup nice a tenth of a second, machine-wide (EAGAIN
    otherwise): two ddptui runs started together on a login node would leave one diagnosis at a
    full share. It waits the tenth out and asks again."""
    r = subprocess.run(["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", sys.executable, "-c",
                        RATE_LIMITED], env={**os.environ, "PYTHONPATH": str(ROOT / "tui")},
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, "10"), r.stderr


def _log_offset(pid: int, under: Path) -> int | None:
    """Where the process is in the node log it holds open under `under` (its fdinfo `pos`), or None."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith(str(under)) and target.endswith(".log"):
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    return next(int(x.split()[1]) for x in f if x.startswith("pos:"))
        except (OSError, StopIteration):
            continue
    return None


def _ended(pid: int) -> bool:
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()  # only its exit status waits for a reaper
    except FileNotFoundError:
        return True


def test_a_dead_parent_leaves_no_diagnosis_process(tmp_path: Path) -> None:
    """ddptui killed mid-flood: its diagnosis process ends at once, not after reading the backlog
    nobody waits for. The child is held still (SIGSTOP) while the parent gives it a flood to read
    and dies; let go, it must end having read little of that flood (where it is in the log is read
    from its open file's offset, as it goes), where reading the backlog would take it to the end."""
    code = "\n".join([
        "import os, sys",
        "from pathlib import Path",
        "from ddptui.core.diagnosis.live import LiveDiagnosis",
        "from ddptui.core.logs.rundir import RunDir",
        "live = LiveDiagnosis(1, 'a', lambda: True, lambda f: None)",
        f"rd = RunDir(Path({str(tmp_path)!r}), 'x', 'name: x')",
        "live.deliver(rd, lambda e: None, 'a', ['hi'])",
        "live.flush()",
        "print(live._engine._proc.pid, flush=True)",
        "sys.stdin.readline()",  # the child is stopped now
        f"lines = open({str(tmp_path / 'flood.txt')!r}).read().splitlines()",
        "for i in range(0, len(lines), 5000):",
        "    live.deliver(rd, lambda e: None, 'a', lines[i:i + 5000])",
        "print(rd.log_path('a'), rd.log_size('a'), flush=True)",
        "os._exit(0)",  # no close(): as a crash, a SIGKILL
    ])
    lines = CHATTER * (400_000 // len(CHATTER))
    (tmp_path / "flood.txt").write_text("\n".join(lines) + "\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tui")})
    line = parent.stdout.readline()
    assert line.strip(), parent.stderr.read()
    pid = int(line)
    os.kill(pid, signal.SIGSTOP)
    parent.stdin.write("go\n")
    parent.stdin.close()
    log, size = parent.stdout.readline().split()
    assert parent.wait(60) == 0, parent.stderr.read()
    assert int(size) > 16 * BLOCK  # a backlog of many of the child's reads
    os.kill(pid, signal.SIGCONT)
    furthest, deadline = 0, time.monotonic() + 60  # a bound for a hung child only: the verdict is the offset
    while not _ended(pid) and time.monotonic() < deadline:
        furthest = max(furthest, _log_offset(pid, tmp_path) or 0)
        time.sleep(0.005)
    if not _ended(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the diagnosis process {pid} outlived its parent by 60 s (read to byte {furthest} of {size})")
    assert furthest < int(size) // 4, f"it read to byte {furthest} of the {size} its dead parent left ({log})"
