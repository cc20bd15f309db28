"""The launch orchestrator without a cluster: real processes under the real guard, on this machine.

The test double is the workload: `ScriptedLocal` is the local transport with torchrun's argv
replaced by a short Python program per node (print lines, sleep, exit with a code), so the order,
the exits, fail-fast, stop and lost-node paths run for real (process groups, TERM/KILL) in seconds.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ddptui.core import events as E
from ddptui.core.diagnosis.live import LiveDiagnosis
from ddptui.core.logs.rundir import RunDir
from ddptui.core.launch import watchers
from ddptui.core.launch.orchestrator import describe_failure
from ddptui.core.logs.lines import Chunk
from ddptui.core.playbook.loader import parse_playbook
from ddptui.core.runbook import Runbook
from ddptui.core.states import NodeStatus, StepState
from ddptui.core.transport.local import LocalTransport

PB = """
name: scripted
transport: local
nodes: [a, b, c]
ssh: {keepalive: 1}
job: {script: builtin:smoke, nproc_per_node: 2, stop_grace: 2}
steps:
  - {id: connect, kind: connect}
  - {id: launch-master, kind: launch-master}
  - {id: launch-workers, kind: launch-workers}
  - {id: watch, kind: watch, timeout: 60}
"""


class ScriptedLocal(LocalTransport):
    """Test double: the local transport, running `programs[node]` instead of torchrun."""

    def __init__(self, node: str, programs: dict[str, str], answers: dict[str, bool]) -> None:
        super().__init__(node)
        self.programs, self.answers = programs, answers

    def start(self, spec, on_lines, python):
        return super().start(replace(spec, argv=(sys.executable, "-c", self.programs[self.node])), on_lines, python)

    def alive(self, timeout: float) -> bool:  # what the SSH transport's keepalive request answers
        return self.answers.get(self.node, True)


class Recorder:
    def __init__(self) -> None:
        self.events: list[E.Event] = []
        self.lock = threading.Lock()

    def __call__(self, ev: E.Event) -> None:
        with self.lock:
            self.events.append(ev)

    def of(self, kind: type) -> list:
        with self.lock:
            return [e for e in self.events if isinstance(e, kind)]


SLEEP = "import time\nprint('up', flush=True)\ntime.sleep(60)"


def runbook(tmp_path: Path, programs: dict[str, str], answers: dict[str, bool] | None = None):
    rec = Recorder()
    answers = answers if answers is not None else {}
    pb = parse_playbook(PB)
    rb = Runbook(pb, rec, tmp_path / "runs", lambda pb, node: ScriptedLocal(node, programs, answers))
    (tmp_path / "runs").mkdir(exist_ok=True)
    return rb, rec


def gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_master_first_then_workers_in_order_with_their_ranks(tmp_path: Path) -> None:
    ok = "print('hello from', __import__('os').getpid(), flush=True)"
    rb, rec = runbook(tmp_path, {"a": ok, "b": ok, "c": ok})
    try:
        assert rb.run_all()
    finally:
        rb.close()
    planned = rec.of(E.CommandPlanned)
    assert [(c.node, c.role, c.node_rank, list(c.ranks)) for c in planned] == [
        ("a", "master", 0, [0, 1]), ("b", "worker", 1, [2, 3]), ("c", "worker", 2, [4, 5])]
    started = [e.node for e in rec.of(E.NodeState) if e.state == NodeStatus.RUNNING]
    assert started == ["a", "b", "c"]
    assert {e.node: e.state for e in rec.of(E.NodeState) if e.state == NodeStatus.EXITED} == \
        {"a": "exited", "b": "exited", "c": "exited"}
    assert all(rb.node_state(n) == NodeStatus.EXITED for n in "abc")
    out = {e.node for e in rec.of(E.NodeOutput)}
    assert out == {"a", "b", "c"} and (rb.run_path / "b.log").read_text().startswith("hello from")


def test_a_failed_node_stops_the_others_and_is_named_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(watchers, "FAIL_FAST_GRACE", 0.2)
    fail = "import sys\nprint('boom', flush=True)\nsys.exit(3)"
    rb, rec = runbook(tmp_path, {"a": SLEEP, "b": fail, "c": SLEEP})
    try:
        assert not rb.run_all()
    finally:
        rb.close()
    assert rb.states["watch"] == StepState.FAILED
    watch = [e for e in rec.of(E.StepChanged) if e.step == "watch" and e.state == StepState.FAILED][0]
    assert "b exited 3" in watch.message and "None" not in watch.message
    assert (rb.node_state("a"), rb.node_state("b"), rb.node_state("c")) == (
        NodeStatus.STOPPED, NodeStatus.FAILED, NodeStatus.STOPPED)
    notices = [n.text for n in rec.of(E.Notice)]
    assert any("b failed: stopping the job on a, c" in t for t in notices)


def test_stop_job_ends_every_process_group(tmp_path: Path) -> None:
    rb, rec = runbook(tmp_path, {"a": SLEEP, "b": SLEEP, "c": SLEEP})
    for step in ("connect", "launch-master", "launch-workers"):
        assert rb.run_step(step)
    pgids = {e.node: e.pgid for e in rec.of(E.NodeState) if e.state == NodeStatus.RUNNING}
    assert sorted(pgids) == ["a", "b", "c"] and rb.job_running
    rb.stop_job()
    assert not rb.job_running
    deadline = time.monotonic() + 10  # the guards' own exit is reaped a moment after the job's
    while not all(gone(p) for p in pgids.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(gone(p) for p in pgids.values())
    assert all(rb.node_state(n) == NodeStatus.STOPPED for n in "abc")
    rb.close()
    summary = (rb.run_path / "summary.json").read_text()
    assert '"stopped"' in summary


def test_a_node_that_stops_answering_is_lost_and_the_rest_stopped(tmp_path: Path) -> None:
    answers = {"c": True}
    rb, rec = runbook(tmp_path, {"a": SLEEP, "b": SLEEP, "c": SLEEP}, answers)
    for step in ("connect", "launch-master", "launch-workers"):
        assert rb.run_step(step)
    answers["c"] = False  # from now on c's keepalives go unanswered
    try:
        assert not rb.run_step("watch")
    finally:
        rb.close()
    assert rb.node_state("c") == NodeStatus.LOST
    assert rb.node_state("a") == rb.node_state("b") == NodeStatus.STOPPED
    assert rb.first_failure() == {"node": "c", "lost": True}
    assert describe_failure(rb.first_failure()) == "c (the node stopped answering)"


def test_a_node_whose_connection_closes_is_lost_and_the_rest_stopped(tmp_path: Path) -> None:
    """Its sshd killed: the connection ends with no exit status and no keepalive missed yet. The job
    cannot finish without the node: the others are stopped at once, not left to run to their end."""
    import signal

    rb, rec = runbook(tmp_path, {"a": SLEEP, "b": SLEEP, "c": SLEEP})
    for step in ("connect", "launch-master", "launch-workers"):
        assert rb.run_step(step)
    c = rb.launch.nodes["c"].process
    c._exit_status = lambda: (None, True)  # what the SSH channel says once its connection is gone
    try:
        os.kill(c._p.pid, signal.SIGKILL)  # the guard's pipes close, as when the node's sshd dies
        assert not rb.run_step("watch")
    finally:
        if not gone(c.pgid):
            os.killpg(c.pgid, signal.SIGKILL)  # the guard was SIGKILLed: nothing stopped its job
        rb.close()
    assert rb.node_state("c") == NodeStatus.LOST
    assert rb.node_state("a") == rb.node_state("b") == NodeStatus.STOPPED
    assert rb.first_failure() == {"node": "c", "lost": True}
    assert any("c: the connection closed before its job's exit: stopping the job on a, b" in n.text
               for n in rec.of(E.Notice))


def test_a_second_launch_while_running_is_refused(tmp_path: Path) -> None:
    rb, rec = runbook(tmp_path, {"a": SLEEP, "b": SLEEP, "c": SLEEP})
    try:
        assert rb.run_step("connect") and rb.run_step("launch-master")
        assert not rb.run_step("launch-master")
        failed = [e for e in rec.of(E.StepChanged) if e.state == StepState.FAILED][-1]
        assert "a is already running" in failed.message
    finally:
        rb.close()


@pytest.mark.parametrize("ff, words", [
    ({"node": "n3", "host": "n3", "rank": 2, "exitcode": -9, "signal": "SIGKILL"}, "n3 (host n3) rank 2 exitcode -9 (SIGKILL)"),
    ({"node": "n4", "host": None, "rank": None, "exitcode": None}, "n4"),
])
def test_describe_failure_says_only_what_is_known(ff: dict, words: str) -> None:
    assert describe_failure(ff) == words


def test_master_not_started_is_raised_then_resolved_with_the_playbooks_timeout(tmp_path: Path) -> None:
    seen = []
    master_up = {"v": False}
    live = LiveDiagnosis(2, "m", lambda: master_up["v"], lambda f: seen.append(f.snapshot()), rdzv_timeout=60)
    rd = RunDir(tmp_path, "rdzv", "name: rdzv\n")
    try:
        live.deliver(rd, lambda e: None, "w", ["[default0]: INFO Rendezvous'ing worker group"])
        assert seen[-1].id == "master-not-started" and seen[-1].active and "60 s" in seen[-1].explanation
        master_up["v"] = True
        live.deliver(rd, lambda e: None, "w", ["Rendezvous complete for workers. Result:"])
        assert seen[-1].state == "resolved" and [f.id for f in live.findings] == ["master-not-started"]
        # the finding stays: a flood that says nothing of the rendezvous is not read line by line
        flood = Chunk.of_bytes(b"NCCL INFO Channel 00/02 : 0 1\n" * 5000)
        live.deliver(rd, lambda e: None, "w", flood)
        assert flood._lines is None and seen[-1].state == "resolved"
        master_up["v"] = False  # the master went away: another worker waits for it
        live.deliver(rd, lambda e: None, "w2", Chunk.of_bytes(b"[default0]: INFO Rendezvous'ing worker group\n"))
        assert seen[-1].active and seen[-1].nodes == ["w", "w2"]
        live.deliver(rd, lambda e: None, "w2", Chunk.of_bytes(b"noise\nRendezvous complete for workers. Result:\n"))
        assert seen[-1].state == "resolved"
        live.reset()
        assert live.findings == []
    finally:
        live.close()


def test_a_fresh_launch_after_a_finished_job_gets_its_own_run_directory(tmp_path: Path) -> None:
    """Rerunning launch-master in one Runbook starts a new run: the first run's folder is finished
    (its summary, RunFinished) and keeps only its own lines; the second starts its logs at line 1."""
    ok = "print('launch', flush=True)"
    rb, rec = runbook(tmp_path, {"a": ok, "b": ok, "c": ok})
    try:
        assert rb.run_all()
        first = rb.run_path
        for step in ("launch-master", "launch-workers", "watch"):
            assert rb.run_step(step), rb.states
        second = rb.run_path
    finally:
        rb.close()
    assert first is not None and second is not None and first != second
    assert [e.run_dir for e in rec.of(E.RunStarted)] == [str(first), str(second)]
    assert (first / "a.log").read_text().count("launch") == 1  # nothing of the relaunch appended here
    assert (second / "a.log").read_text().count("launch") == 1
    assert json.loads((first / "summary.json").read_text())["run_id"] == first.name
    finished = rec.of(E.RunFinished)
    assert [f.summary["run_id"] for f in finished] == [first.name, second.name]
    # the relaunch's own output starts at line 1 of its log
    outputs = [e for e in rec.of(E.NodeOutput) if e.node == "a"]
    assert [e.first_line for e in outputs][-1] == 1


def test_what_reaches_the_screen_hides_the_runs_secrets(tmp_path: Path) -> None:
    """Panes, the merged view and `run --json` get a node's lines as its log on disk has them: a secret
    of the job's env that the job prints is masked before any consumer sees it."""
    secret = "s3cr3t-Value-0123456789"
    leak = "import os\nprint('token is', os.environ['API_TOKEN'], flush=True)"
    rec = Recorder()
    pb = parse_playbook(PB.replace("stop_grace: 2}", "stop_grace: 2, env: {API_TOKEN: " + secret + "}}"))
    rb = Runbook(pb, rec, tmp_path / "runs", lambda pb, node: ScriptedLocal(node, {"a": leak, "b": leak, "c": leak}, {}))
    (tmp_path / "runs").mkdir(exist_ok=True)
    try:
        assert rb.run_all(), rb.states
    finally:
        rb.close()
    shown = [line for ev in rec.of(E.NodeOutput) for line in ev.lines]
    assert len([x for x in shown if x.startswith("token is ")]) == 3
    assert not any(secret in x for x in shown), shown
    assert all(secret not in (rb.run_path / f"{n}.log").read_text() for n in "abc")


ROOT_CAUSE_LATER = """import sys, time
time.sleep(1.5)
print('''Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_10:00:00
  host      : b
  rank      : 2 (local_rank: 0)
  exitcode  : 1 (pid: 4242)
  error_file: <N/A>
  traceback : torch.distributed.DistNetworkError: failed to recv, got 0 bytes
============================================================''', flush=True)
sys.exit(1)"""
KILLED = "import os, signal\nprint('up', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)"


def test_the_first_failure_is_the_first_seen_not_the_first_root_cause(tmp_path: Path, monkeypatch) -> None:
    """The master's torchrun killed: it prints no Root Cause; a worker fails after it and prints one.
    The node ddptui saw fail first is named, with the signal its guard reported."""
    monkeypatch.setattr(watchers, "FAIL_FAST_GRACE", 30)  # let the worker fail on its own
    rb, rec = runbook(tmp_path, {"a": KILLED, "b": ROOT_CAUSE_LATER, "c": SLEEP})
    try:
        assert rb.run_step("connect") and rb.run_step("launch-master") and rb.run_step("launch-workers")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and rb.node_state("b") != NodeStatus.FAILED:
            time.sleep(0.1)
        assert rb.node_state("a") == NodeStatus.FAILED and rb.node_state("b") == NodeStatus.FAILED
        ff = rb.first_failure()
        assert ff == {"node": "a", "exitcode": 137, "signal": "SIGKILL"}, ff
        assert describe_failure(ff) == "a exitcode 137 (SIGKILL)"
    finally:
        rb.stop_job()
        rb.close()


@pytest.mark.parametrize("grace,last_word", [(10.0, "passed"), (0.1, "running")])
def test_a_step_that_ends_after_the_run_was_closed_does_not_rewrite_its_record(
        tmp_path: Path, monkeypatch, grace: float, last_word: str) -> None:
    """Quit while a step ran: the step ended after the close and rewrote summary.json ("passed",
    ok) under events.jsonl's last word, run-finished with the step "running" and not ok. A bundle of
    that run told two stories. The record is final at the close: both say the same. The close
    waits a grace for the running step's end (a stopped job's watch ends within it), so its word is
    in the record; a step that outlasts it stays "running" there."""
    monkeypatch.setattr("ddptui.core.runbook.STEP_END_GRACE", grace)
    pb = parse_playbook("name: late\ntransport: local\nnodes: [a]\njob: {script: builtin:smoke}\nsteps:\n"
                        "  - {id: connect, kind: connect}\n  - {id: slow, kind: shell, run: 'sleep 1.5'}\n")
    rb = Runbook(pb, lambda ev: None, tmp_path / "runs", lambda pb, node: LocalTransport(node))
    assert rb.run_step("connect")
    t = threading.Thread(target=rb.run_step, args=("slow",))
    t.start()
    deadline = time.monotonic() + 10
    while rb.states["slow"] != StepState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.02)
    rb.close()
    t.join(30)
    assert not t.is_alive() and rb.run_path is not None
    summary = json.loads((rb.run_path / "summary.json").read_text())
    last = json.loads((rb.run_path / "events.jsonl").read_text().splitlines()[-1])
    assert last["event"] == "run-finished"
    assert summary["steps"]["slow"] == last["summary"]["steps"]["slow"] == last_word
    assert summary["ok"] is last["ok"] is (last_word == "passed")


def test_a_run_closed_from_its_own_steps_thread_does_not_wait_for_itself(tmp_path: Path, monkeypatch) -> None:
    """close() waits a grace for the running step to end; called on that step's own thread (here a
    sink that closes the run when the step starts, as a consumer reacting to an event would) it
    waited the whole grace for itself to end. It goes on at once, and the run's record is final."""
    monkeypatch.setattr("ddptui.core.runbook.STEP_END_GRACE", 120.0)
    pb = parse_playbook("name: own\ntransport: local\nnodes: [a]\njob: {script: builtin:smoke}\nsteps:\n"
                        "  - {id: connect, kind: connect}\n  - {id: echo, kind: shell, run: 'echo hi'}\n")
    holder: list[Runbook] = []

    def sink(ev) -> None:
        if isinstance(ev, E.StepChanged) and ev.step == "echo" and ev.state == StepState.RUNNING:
            holder[0].close()

    rb = Runbook(pb, sink, tmp_path / "runs", lambda pb, node: LocalTransport(node))
    holder.append(rb)
    assert rb.run_step("connect")
    t = threading.Thread(target=rb.run_step, args=("echo",), daemon=True)
    t.start()
    t.join(60)  # a deadlock check, not a timing: the grace it must not wait out is 120 s
    assert not t.is_alive(), "close() on the step's own thread waited for that step to end"
    assert rb.closed and rb.wait_idle(5)
    last = json.loads((rb.run_path / "events.jsonl").read_text().splitlines()[-1])
    assert last["event"] == "run-finished"
