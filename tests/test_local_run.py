"""The shipped local playbook, run for real: torchrun --nproc_per_node=2 with gloo on this machine."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from ddptui.core.logs.results import parse_bandwidth_line, parse_result_line
from ddptui.ui.app import DdptuiApp
from ddptui.ui.screens.playbook import PlaybookScreen
from tests.conftest import DATA, ROOT, ddptui_exe, needs_torch

pytestmark = [needs_torch, pytest.mark.torch]
LOCAL = ROOT / "playbooks" / "local-smoke.yaml"


def results_of(text: str) -> list[dict]:
    return [r for r in (parse_result_line(x) for x in text.splitlines()) if r]


def assert_both_ranks_ok(results: list[dict]) -> None:
    assert sorted(r["rank"] for r in results) == [0, 1], results
    for r in results:
        assert r["world_size"] == 2 and r["backend"] == "gloo"
        assert r["all_reduce"] == "ok" and r["sum"] == "1" and r["params_in_sync"] == "true"


def assert_one_node_bandwidth(text: str, summary: dict) -> None:
    """Local rank 0 measured the whole job (2 ranks, gloo over loopback) and said there is no other node."""
    lines = [d for d in (parse_bandwidth_line(x) for x in text.splitlines()) if d]
    assert [(d["scope"], d.get("skipped")) for d in lines] == [("world", None), ("inter-node", "single-node")], lines
    world = lines[0]
    assert world["ranks"] == 2 and world["backend"] == "gloo" and world["rank"] == 0 and world["busbw_gbps"] > 0
    assert world["busbw_gbps"] == pytest.approx(world["algbw_gbps"], rel=1e-3)  # 2(n-1)/n = 1 for two ranks
    bw = summary["bandwidth"]
    assert bw["single_node"] is True and bw["inter_node"] is None and bw["backend"] == "gloo"
    assert bw["world"]["busbw_gbps"] == world["busbw_gbps"] and bw["world"]["nodes"] == ["localhost"]


def run_headless(runs_dir: Path, *extra: str, attempts: int = 2) -> subprocess.CompletedProcess:
    """torch 2.13 can abort at exit after a good run (feasibility.md): allow one retry."""
    for _ in range(attempts):
        r = subprocess.run([ddptui_exe(), "run", str(LOCAL), "--headless", "--runs-dir", str(runs_dir), *extra],
                           capture_output=True, text=True, timeout=240)
        if r.returncode == 0:
            break
    return r


def test_headless_local_run_prints_both_ranks_and_records_the_run(runs_dir: Path) -> None:
    r = run_headless(runs_dir)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    result_lines = [x for x in r.stdout.splitlines() if "ddptui-smoke result" in x]
    assert all(x.startswith("localhost │ ") for x in result_lines)
    assert_both_ranks_ok(results_of(r.stdout))
    # the run directory: playbook as run, the node's log, and a summary
    (run,) = [p for p in runs_dir.iterdir() if p.is_dir() and (p / "summary.json").exists() and
              json.loads((p / "summary.json").read_text())["ok"]]
    assert (run / "playbook.yaml").read_text() == LOCAL.read_text()
    assert_both_ranks_ok(results_of((run / "localhost.log").read_text()))
    s = json.loads((run / "summary.json").read_text())
    node = s["nodes"]["localhost"]
    assert node["exit_code"] == 0 and node["state"] == "exited" and node["pid"] > 0
    assert s["started"] <= node["started"] <= node["ended"] <= s["ended"]
    assert s["steps"] == {k: "passed" for k in ("connect", "check", "launch-master", "wait-master",
                                                "launch-workers", "watch")}
    assert_one_node_bandwidth((run / "localhost.log").read_text(), s)
    assert "✓ watch: passed — every node exited 0, 2 rank results ok; busbw " in r.stdout
    assert "gloo; one node, no inter-node figure)" in r.stdout


def test_headless_json_gives_one_event_per_line(runs_dir: Path) -> None:
    r = run_headless(runs_dir, "--json")
    assert r.returncode == 0, r.stdout[-2000:]
    events = [json.loads(x) for x in r.stdout.splitlines()]
    outputs = [e for e in events if e["event"] == "output"]
    assert outputs and all({"node", "stream", "text", "line"} <= e.keys() for e in outputs)
    assert_both_ranks_ok(results_of("\n".join(e["text"] for e in outputs)))
    steps = [(e["step"], e["state"]) for e in events if e["event"] == "step"]
    assert steps[-1] == ("watch", "passed") and events[-1]["event"] == "run-finished"
    assert_one_node_bandwidth("\n".join(e["text"] for e in outputs), events[-1]["summary"])


def test_ctrl_c_stops_the_job_and_exits_130(tmp_path: Path, runs_dir: Path) -> None:
    pb = tmp_path / "long.yaml"
    pb.write_text(LOCAL.read_text().replace('args: ["--steps", "5"]', 'args: ["--steps", "5", "--sleep", "300"]')
                  .replace("29511", "29512"))
    p = subprocess.Popen([ddptui_exe(), "run", str(pb), "--headless", "--runs-dir", str(runs_dir)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    deadline = time.time() + 180
    for line in p.stdout:  # lines arrive as they happen, even into a pipe
        seen.append(line)
        if sum("ddptui-smoke result" in x for x in seen) == 2 or time.time() > deadline:
            break
    job = [c for c in psutil.Process(p.pid).children(recursive=True)]
    assert any("torch.distributed.run" in " ".join(c.cmdline()) for c in job)
    p.send_signal(signal.SIGINT)
    rest = p.stdout.read()
    assert p.wait(60) == 130, rest
    own = [x for x in rest.splitlines() if not x.startswith("localhost │")]  # ddptui's, not torchrun's
    assert not any("Traceback" in x for x in own), rest
    assert any("interrupted" in x for x in own)
    time.sleep(0.5)
    alive = [c for c in job if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert not alive, [c.cmdline() for c in alive]
    (run,) = list(runs_dir.iterdir())
    assert sum("ddptui-smoke result" in x for x in (run / "localhost.log").read_text().splitlines()) == 2
    summary = json.loads((run / "summary.json").read_text())  # what a later `ddptui report` reads
    assert summary["steps"]["watch"] == "failed" and "running" not in summary["steps"].values(), summary["steps"]
    assert summary["nodes"]["localhost"]["state"] == "stopped" and summary["ok"] is False
    assert summary["stopped_by_user"] is True  # not ok, and not a failure: what the hand-off file says
    shown = subprocess.run([ddptui_exe(), "open", str(run), "--headless"], capture_output=True, text=True, timeout=60)
    assert "outcome: stopped by the user" in shown.stdout, shown.stdout
    md = subprocess.run([ddptui_exe(), "report", str(run)], capture_output=True, text=True, timeout=60).stdout
    assert "— stopped by the user" in md and "(the last node; ddptui closed " in md, md
    side_by_side = subprocess.run([ddptui_exe(), "diff", str(run), str(run)], capture_output=True, text=True,
                                  timeout=60).stdout  # said "failed", as open and report did before
    assert side_by_side.startswith(f"A: {run} (run, stopped by the user)\nB: "), side_by_side
    as_json = subprocess.run([ddptui_exe(), "diff", str(run), str(run), "--json"], capture_output=True, text=True,
                             timeout=60).stdout
    assert json.loads(as_json)["a"] == {"source": str(run), "kind": "run", "playbook": "local-smoke", "ok": False,
                                        "outcome": "stopped"}


def test_a_stop_while_waiting_for_the_master_is_the_users_not_a_failure(tmp_path: Path, runs_dir: Path) -> None:
    """Stopped while wait-master waited: the step said "torchrun on localhost exited (143) before
    its port 29511 listened. Its last lines:" and nothing after, and the run's bundle "outcome:
    FAILED". The test double is the node's python: a wrapper that sleeps before it starts torchrun,
    so the master's port never listens before the stop, however fast the machine imports torch."""
    import sys
    import threading

    from ddptui.core.playbook.loader import load_playbook
    from ddptui.core.runbook import Runbook
    from ddptui.core.transport.factory import SSHSettings, make_factory

    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\n# the node\'s python; torchrun through it starts (its port listens) a minute late\n'
                    f'if [ "$2" = torch.distributed.run ]; then sleep 60; fi\nexec {shlex.quote(sys.executable)} "$@"\n')
    slow.chmod(0o755)
    playbook = tmp_path / "slow-master.yaml"
    playbook.write_text(LOCAL.read_text().replace("job:\n", f"job:\n  python: {slow}\n", 1))
    events: list = []
    rb = Runbook(load_playbook(playbook), events.append, runs_dir, make_factory(SSHSettings()))
    try:
        assert rb.run_step("connect") and rb.run_step("launch-master")
        stopper = threading.Timer(0.3, rb.stop_job)
        stopper.start()
        assert not rb.run_step("wait-master")
        stopper.join()
    finally:
        rb.close()
    (step,) = [e for e in events if getattr(e, "step", None) == "wait-master" and e.state == "failed"]
    assert step.message == "stopped by the user", step.message
    proc = rb.launch.nodes["localhost"].process
    assert proc.done.wait(10)
    with pytest.raises(psutil.NoSuchProcess):  # the guard is reaped, not a zombie per launch while ddptui runs
        psutil.Process(proc._p.pid).status()
    summary = json.loads((rb.run_dir.path / "summary.json").read_text())
    assert summary["stopped_by_user"] is True and summary["nodes"]["localhost"]["state"] == "stopped"


async def test_tui_runs_the_local_playbook_and_both_results_reach_the_pane(runs_dir: Path) -> None:
    for _attempt in range(2):
        app = DdptuiApp(playbook=LOCAL, runs_dir=runs_dir)
        async with app.run_test(size=(160, 45)) as pilot:
            screen = app.screen
            assert isinstance(screen, PlaybookScreen)
            await pilot.press("a")  # run all
            await app.workers.wait_for_complete()
            await pilot.pause()
            states = screen.runbook.states
            lines = list(screen.query_one("#pane-localhost").log.lines)
        if states["watch"] == "passed":
            break
    assert [s for s, st in screen.history if st == "passed"] == [
        "connect", "check", "launch-master", "wait-master", "launch-workers", "watch"]
    assert any(x.startswith("$ env ") and "torch.distributed.run" in x for x in lines)  # the command, shown first
    assert_both_ranks_ok(results_of("\n".join(lines)))


def test_a_missing_gloo_interface_on_one_node_is_found_by_check_and_fixed(runs_dir: Path, tmp_path: Path) -> None:
    """One node, GLOO_SOCKET_IFNAME naming an interface it does not have: `check` passed it and the
    launch failed ("no address for interface nosuch0"). check says bad-socket-ifname now, and fix
    names lo, the interface a one-node job's ranks share; the fixed playbook's checks pass."""
    pb = tmp_path / "bad.yaml"
    pb.write_text(LOCAL.read_text().replace("GLOO_SOCKET_IFNAME: lo", "GLOO_SOCKET_IFNAME: nosuch0"))
    assert "nosuch0" in pb.read_text()
    r = subprocess.run([ddptui_exe(), "check", str(pb), "--json", "--runs-dir", str(runs_dir)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 1, r.stdout + r.stderr
    found = json.loads(r.stdout)["findings"]
    assert [f["id"] for f in found] == ["bad-socket-ifname"] and found[0]["nodes"] == ["localhost"]
    assert found[0]["fix"]["env"] == {"GLOO_SOCKET_IFNAME": "lo"}
    r = subprocess.run([ddptui_exe(), "fix", str(pb), "--apply", "--runs-dir", str(runs_dir)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    fixed = tmp_path / "bad.rev1.yaml"
    assert "GLOO_SOCKET_IFNAME: lo" in fixed.read_text() and "nosuch0" not in fixed.read_text()
    r = subprocess.run([ddptui_exe(), "check", str(fixed), "--runs-dir", str(runs_dir)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr



def test_a_training_scripts_own_error_is_what_the_run_says_failed(runs_dir: Path, tmp_path: Path) -> None:
    """A real torchrun whose last rank raises ValueError (tests/data/workloads/raise_in_rank.py);
    its peer's link breaks. The run said only remote-rank-died ("a peer rank died first"), the
    ValueError in no finding. The verdict now names the error, live, in summary.json and in
    `diagnose` of the run; the peer's broken link is covered by it."""
    pb = tmp_path / "raises.yaml"
    pb.write_text(LOCAL.read_text().replace("builtin:smoke", str(DATA / "workloads" / "raise_in_rank.py"))
                  .replace('args: ["--steps", "5"]', "args: []").replace("29511", "29513"))
    r = subprocess.run([ddptui_exe(), "run", str(pb), "--headless", "--runs-dir", str(runs_dir)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr
    error = "ValueError: batch 17 has 0 samples: the dataset shard for rank 1 is empty"
    assert f"⚠ unrecognized-failure (error, active): localhost rank 1: {error}" in r.stdout, r.stdout[-3000:]
    (run,) = list(runs_dir.iterdir())
    found = json.loads((run / "summary.json").read_text())["findings"]
    assert [f["id"] for f in found] == ["unrecognized-failure"], found
    assert found[0]["summary"].endswith(error) and found[0]["evidence"][0]["text"].endswith(error)
    d = subprocess.run([ddptui_exe(), "diagnose", str(run), "--json"], capture_output=True, text=True, timeout=60)
    assert d.returncode == 1 and [f["id"] for f in json.loads(d.stdout)["findings"]] == ["unrecognized-failure"]

async def test_s_on_a_step_that_passed_is_refused_in_words(runs_dir: Path) -> None:
    """`s` on a passed step re-marked it "skipped" and its result was gone from the list and the detail."""
    from ddptui.ui.widgets.steps import StepTable

    app = DdptuiApp(playbook=LOCAL, runs_dir=runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await pilot.press("n")  # connect
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.runbook.states["connect"] == "passed"
        screen.query_one(StepTable).select("connect")
        await pilot.press("s")
        await pilot.pause()
        assert screen.runbook.states["connect"] == "passed"
        assert any("connect passed already: nothing to skip" in n.message for n in app._notifications)
        screen.query_one(StepTable).select("check")
        await pilot.press("s")  # a pending step is still skipped
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.runbook.states["check"] == "skipped"


def test_json_without_headless_is_headless(tmp_path: Path, runs_dir: Path) -> None:
    """`run PB --json` opened the TUI (into a pipe, a program's stdout): --json is for a program."""
    pb = tmp_path / "shell.yaml"
    pb.write_text("name: shell\ntransport: local\nnodes: localhost\njob: {script: builtin:smoke}\n"
                  "steps:\n  - {id: hello, kind: shell, run: echo hello-from-json}\n")
    r = subprocess.run([ddptui_exe(), "run", str(pb), "--json", "--runs-dir", str(runs_dir)],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    events = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.returncode == 0 and events[-1]["event"] == "run-finished", r.stdout[-2000:] + r.stderr[-2000:]
    assert any(e["event"] == "output" and e["text"] == "hello-from-json" for e in events)


def test_a_job_left_running_ends_the_watch_and_keeps_running(tmp_path: Path, runs_dir: Path) -> None:
    """Quit → "Leave it running" blanked the TUI and never gave the prompt back: the watch step's
    worker thread waited for the job's exit, and the app's exit waited for that thread."""
    import threading

    from ddptui.core.playbook.loader import load_playbook
    from ddptui.core.runbook import Runbook
    from ddptui.core.transport.factory import SSHSettings, make_factory

    pb = tmp_path / "long.yaml"
    pb.write_text(LOCAL.read_text().replace('args: ["--steps", "5"]', 'args: ["--steps", "5", "--sleep", "300"]')
                  .replace("29511", "29514"))
    events: list = []
    rb = Runbook(load_playbook(pb), events.append, runs_dir, make_factory(SSHSettings()))
    steps = threading.Thread(target=rb.run_all, daemon=True)
    steps.start()
    deadline = time.time() + 120
    while rb.states["watch"] != "running" and time.time() < deadline:
        time.sleep(0.2)
    left = rb.detach_job()
    try:
        rb.close()
        steps.join(10)
        assert not steps.is_alive()  # the watch let go
        (watch,) = [e for e in events if getattr(e, "step", None) == "watch" and e.state == "failed"]
        assert watch.message == "left running on localhost by the user: ddptui no longer watches it"
        summary = json.loads((rb.run_dir.path / "summary.json").read_text())  # closed after the watch said so
        assert summary["steps"]["watch"] == "failed" and summary["detached"]["localhost"]["pgid"] > 0
        job = psutil.Process(left["localhost"]["pid"])
        assert job.is_running() and job.status() != psutil.STATUS_ZOMBIE  # and the job runs on
    finally:
        os.killpg(left["localhost"]["pgid"], signal.SIGKILL)
