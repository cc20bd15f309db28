"""Each benchmark's --quick run, so the scripts do not rot: they run and print their figures. No
time is asserted (bench/README.md: nothing there asserts a time). bench/stream.py runs a real
torchrun per node."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, needs_torch


def quick(module: str, *more: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tui"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", module, "--quick", *more], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_diagnosis_quick_prints_the_engine_and_grep() -> None:
    out = quick("bench.diagnosis")
    assert "latency" in out and "ddptui diagnose engine" in out and "ratio engine / grep" in out, out
    assert "through the diagnosis process" in out, out  # the live path's own latency, process hop included
    # grep read every signature (a pattern it cannot parse makes it fail and count nothing)
    assert re.search(r"-> [1-9]\d* matching line", out), out
    # a run's node logs by cores and by one process, beside grep; both found the failure
    assert re.search(r"by cores +\d+\.\d\d s  -> \['firewall-or-unreachable'\]", out), out
    assert re.search(r"one process +\d+\.\d\d s   ratio \d+\.\d\dx", out), out


@needs_torch
@pytest.mark.torch
def test_stream_quick_prints_ddptui_and_the_cat_baseline() -> None:
    out = quick("bench.stream")
    assert "1 node(s)" in out and "cat FILE > out" in out and "ratio" in out, out
    assert "last line on disk -> verdict" in out, out
    assert "the diagnosis' last busy 0.1 s" in out, out  # the diagnosis' own lag behind the disk, said
    assert "CPU: the ddptui process" in out and "first line -> last on disk" in out and "the cats" in out, out
    out = quick("bench.stream", "--json", "--nodes", "1", "--training", "0.5")
    assert "ddptui --headless --json" in out and "ratio" in out, out
    assert "(50% training output)" in out, out  # a running job's stream, not only NCCL chatter
    # the diagnosis' share of the CPU while the lines stream (what its giving way changes)
    assert re.search(r"the diagnosis processes: \d+\.\d\d s, \d+\.\d\d s of it first line -> last on disk", out), out
    out = quick("bench.stream", "--rate", "40000", "--nodes", "1,2")  # paced: how far behind its nodes
    assert "at 40,000 lines/s a node" in out and "job by hand" in out, out
    assert re.search(r"ddptui --headless .*a node's last line written -> on disk +\d+ ms", out), out
    assert re.search(r"2 nodes vs 1: first line -> last on disk \d+\.\d\dx", out), out


@needs_torch
@pytest.mark.torch
def test_waits_quick_times_the_readers_locks() -> None:
    """bench.waits: each lock a reader takes, timed in a real run (so a lock renamed or moved out of
    the watched modules shows here as a figure gone, not as a bench that measures nothing)."""
    out = quick("bench.waits")
    for n in (1, 2):
        assert f"{n} node(s) x 20,000 NCCL lines, local, run 1 of 1: the readers' locks" in out, out
    for where in ("cli_printer", "rundir"):  # taken for every batch: at least once a node
        assert re.search(rf"  {where} +taken +[1-9]\d* +waited +\d+\.\d{{3}} s", out), out
    assert re.search(r"in all: the readers waited \d+\.\d{3} s for each other", out), out


def test_the_paced_workload_keeps_its_schedule_and_writes_the_floods_lines() -> None:
    """bench.stream --rate times how far behind its nodes ddptui is: only worth it if the workload
    writes at the rate asked (not faster: a flood) and the same lines as the flood, flushed."""
    flood = ROOT / "bench" / "nccl_flood.py"
    log = ROOT / "tests" / "data" / "corpus" / "nccl" / "90-healthy-socket-aws-64ranks.log"

    def run(*rate: str) -> list[str]:
        return subprocess.run([sys.executable, str(flood), "3000", "0", str(log), *rate], capture_output=True, text=True,
                      check=True).stdout.splitlines()

    fast, paced = run(), run("10000")
    assert fast[1:-1] == paced[1:-1] and len(paced) == 3002, paced[:3]
    start = float(paced[0].split()[2])
    done = re.fullmatch(r"nccl_flood done lines 3000 at (\d+\.\d+)", paced[-1])
    assert done, paced[-1]
    assert float(done.group(1)) - start >= 0.28  # 3,000 lines at 10,000 a second: its last write 0.29 s in
    bad = subprocess.run([sys.executable, str(flood), "10", "0", str(log), "-5"], capture_output=True, text=True)
    assert bad.returncode != 0 and "RATE must be" in bad.stderr, bad.stderr


def test_startup_quick_prints_help_import_and_first_frame() -> None:
    out = quick("bench.startup", "--playbooks", "3")
    assert "3 more playbooks in ./playbooks" in out, out
    assert "ddptui --help" in out and "import ddptui.ui.app" in out and "TUI first frame" in out, out
    assert "the same widgets" in out, out  # the baseline of Textual alone drawing the picker's screen
    assert "ddptui PLAYBOOK, frame" in out, out  # README's first command: the local playbook's screen


@needs_torch
@pytest.mark.torch
def test_tui_flood_quick_prints_keys_rss_and_disk_with_their_baselines() -> None:
    out = quick("bench.tui_flood")
    assert "key -> screen, flood" in out and "idle app" in out, out
    assert "TUI peak RSS" in out and "minimal Textual app" in out and "ddptui --headless" in out, out
    assert re.search(r"its diagnosis processes +[1-9]\d* MB", out), out  # the TUI's diagnosis ran, and was measured
    out = quick("bench.tui_flood", "--rate", "100")  # a running job's output: what the TUI costs meanwhile
    assert "TUI while lines keep coming: 2 node(s) x 100 lines/s" in out, out
    assert re.search(r"the TUI process +\d+\.\d% of a core +ddptui --headless +\d+\.\d%", out), out


@needs_torch
@pytest.mark.torch
def test_slow_output_quick_times_the_run_into_a_file_a_slow_and_a_stopped_pipe() -> None:
    """bench.slow_output: the same flood into a file, a pipe read at 1 MB/s and a pipe read only at
    the end; each run put its last line on disk (none was stopped at the limit), and the stopped
    pipe was told what it was not given."""
    out = quick("bench.slow_output")
    for how in ("a file (the baseline)", "a pipe read at 1 MB/s", "a pipe read only at the end (Ctrl-S)"):
        assert re.search(re.escape(how) + r" +first line -> last on disk +\d+\.\d\d s", out), out
    assert re.search(r"\(Ctrl-S\) .* [1-9][\d,]* said not printed", out), out
