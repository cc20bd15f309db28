"""`run --headless` when its output is slower than the nodes, or gone.

A terminal that stops reading (Ctrl-S, a pager, a laptop's slow ssh to the login node) used to
stop every node's reader at the printer, and through the full pipes the training job itself. Now
the nodes' logs and the job go on at their own speed: what the output cannot take is left out
and said (`[ddptui: N lines (A-B) not printed ...]`, `output-skipped` with --json), and the run's
logs hold every line. A reader that goes away (`| head`) ends the run as Ctrl-C does.
"""

from __future__ import annotations

import io
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from ddptui.cli_printer import Printer
from ddptui.core import events as E
from tests.conftest import DATA, ddptui_exe, needs_torch

LINES = 120_000  # a node's flood: ~11 MB, beyond the printer's 4 MB backlog and the pipe's 64 KiB


def flood_playbook(tmp_path: Path, port: int, lines: int = LINES, until: Path | None = None, pause: float = 0.0) -> Path:
    """Two local nodes flooding `lines` lines each (with `until`: and on, 2,000 lines every `pause`
    seconds, until that file exists)."""
    pb = tmp_path / "flood.yaml"
    pb.write_text(f"""\
name: flood
transport: local
nodes: [a, b]
job:
  script: {DATA / 'workloads' / 'flood.py'}
  args: ["{lines}"{f', "{until}", "{pause}"' if until else ''}]
  nproc_per_node: 1
  master_port: {port}
  tee: false
  rdzv_timeout: 60
  python: {sys.executable}
steps: [launch-master, wait-master, launch-workers, watch]
""")
    return pb


def start(pb: Path, runs_dir: Path, *extra: str, stderr=subprocess.PIPE) -> subprocess.Popen:
    """`ddptui run PB --headless`, its output into a pipe this test reads when it chooses."""
    return subprocess.Popen([ddptui_exe(), "run", str(pb), "--headless", "--runs-dir", str(runs_dir), *extra],
                            stdout=subprocess.PIPE, stderr=stderr)


def tail(path: Path, n: int = 1 << 16) -> bytes:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - n))
        return f.read()


def wait_for_logs(runs_dir: Path, p: subprocess.Popen, deadline: float) -> None:
    """Until both node logs hold their flood's last line (looked for in their tails: a poll does
    not read 20 MB); nobody reads the run's output meanwhile."""
    sizes = "no run folder yet"
    while time.time() < deadline and p.poll() is None:
        logs = {n: next(runs_dir.glob(f"*/{n}.log"), None) for n in ("a", "b")}
        if all(logs.values()):
            if all(f"flood done rank {r} lines {LINES}".encode() in tail(logs[n]) for n, r in (("a", 0), ("b", 1))):
                return
            sizes = ", ".join(f"{n} {path.stat().st_size:,} bytes" for n, path in logs.items())  # type: ignore[union-attr]
        time.sleep(0.2)
    p.terminate()  # ddptui stops the floods on its way out
    pytest.fail(f"the nodes' logs stopped growing while the output was not read ({sizes}; ddptui rc {p.poll()})")


def assert_stopped_everywhere(p: subprocess.Popen, job: list[psutil.Process], runs_dir: Path) -> None:
    """What a stopped run leaves: no traceback, no process of its job, both nodes `stopped`."""
    assert b"Traceback" not in p.stderr.read()
    time.sleep(0.5)
    alive = [c for c in job if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert not alive, [c.cmdline() for c in alive]
    summary = json.loads(next(runs_dir.glob("*/summary.json")).read_text())
    assert {n: d["state"] for n, d in summary["nodes"].items()} == {"a": "stopped", "b": "stopped"}


def torchruns(p: subprocess.Popen) -> list[psutil.Process]:
    """The run's processes, once both nodes' torchrun are among them."""
    job = psutil.Process(p.pid).children(recursive=True)
    assert sum("torch.distributed.run" in " ".join(c.cmdline()) for c in job) == 2, [c.cmdline() for c in job]
    return job


@needs_torch
@pytest.mark.torch
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_stopped_terminal_holds_up_no_node_and_every_line_is_kept(tmp_path: Path, runs_dir: Path, as_json: bool) -> None:
    pb = flood_playbook(tmp_path, 29574 + as_json)
    p = start(pb, runs_dir, *(["--json"] if as_json else []), stderr=open(tmp_path / "stderr.txt", "w"))
    wait_for_logs(runs_dir, p, time.time() + 120)  # the floods ran to their end with nothing read
    out = p.stdout.read().decode()  # the terminal reads again: what waited, then the word for the rest
    assert p.wait(60) == 0, out[-3000:] + (tmp_path / "stderr.txt").read_text()[-3000:]
    (run,) = runs_dir.iterdir()
    logs = {n: (run / f"{n}.log").read_text().splitlines() for n in ("a", "b")}  # torchrun's last words too
    left_out = 0
    for node in ("a", "b"):
        # the printed lines, and each run of lines left out at its place, make the node's whole log
        rebuilt: list[str] = []
        if as_json:
            for ev in map(json.loads, out.splitlines()):
                if ev.get("node") != node or ev["event"] not in ("output", "output-skipped"):
                    continue
                if ev["event"] == "output":
                    assert ev["line"] == len(rebuilt) + 1
                    rebuilt.append(ev["text"])
                else:
                    assert ev["line"] == len(rebuilt) + 1 and ev["log"] == str(run / f"{node}.log"), ev
                    rebuilt += logs[node][ev["line"] - 1:ev["line"] - 1 + ev["count"]]
                    left_out += ev["count"]
        else:
            said = re.compile(rf"\[ddptui: ([\d,]+) lines? \(([\d,]+)-([\d,]+)\) not printed: this output fell 4 MB "
                              rf"behind the nodes; every line is in {re.escape(str(run / f'{node}.log'))}\]$")
            for line in out.splitlines():
                if not line.startswith(f"{node:<6} │ "):
                    continue
                text = line[len(f"{node:<6} │ "):]
                if m := said.match(text):
                    count, first, last = (int(g.replace(",", "")) for g in m.groups())
                    assert first == len(rebuilt) + 1 and last == first + count - 1, text
                    rebuilt += logs[node][first - 1:last]
                    left_out += count
                else:
                    rebuilt.append(text)
        assert rebuilt == logs[node]
    assert left_out > LINES // 2  # most of the flood waited for nobody
    last = json.loads(out.splitlines()[-1]) if as_json else out.splitlines()[-1]
    assert (last["event"] == "run-finished" and last["ok"]) if as_json else last.startswith("ddptui │ ok — logs in ")
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


@needs_torch
@pytest.mark.torch
def test_a_reader_that_goes_away_ends_the_run_as_ctrl_c_does(tmp_path: Path, runs_dir: Path) -> None:
    """`ddptui run --headless | head -3` of a job that goes on printing: once head has its lines, the
    job is stopped on every node, the run ends (130, as interrupted), nothing is left running, and
    no traceback is printed."""
    stop = tmp_path / "stop"  # made at the end in any case: the flood ends then if ddptui did not end it
    p = start(flood_playbook(tmp_path, 29576, lines=0, until=stop, pause=0.05), runs_dir)
    try:
        seen: list[bytes] = []
        for line in p.stdout:
            seen.append(line)
            if sum(x.startswith("b      │ flood-host".encode()) for x in seen) >= 3:
                break  # both nodes print
        job = torchruns(p)
        p.stdout.close()  # the reader is gone: the next batch ddptui writes finds no one
        assert p.wait(60) == 130
    finally:
        stop.touch()
        p.stdout.close()
        if p.poll() is None:  # ddptui stops the floods on its way out
            p.terminate()
            p.wait(60)
    assert_stopped_everywhere(p, job, runs_dir)


@needs_torch
@pytest.mark.torch
def test_a_run_stopped_while_its_terminal_is_stopped_too_still_ends(tmp_path: Path, runs_dir: Path) -> None:
    """Ctrl-S, then SIGTERM (or Ctrl-C): the jobs are stopped and ddptui exits 130 within a few
    seconds, though what it would print still waits for the terminal (its logs have every line)."""
    stop = tmp_path / "stop"
    p = start(flood_playbook(tmp_path, 29577, lines=0, until=stop, pause=0.05), runs_dir)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and sum(x.stat().st_size for x in runs_dir.glob("*/[ab].log")) < 8 << 20:
            time.sleep(0.2)  # both flood, and their lines fill the pipe and the printer's backlog: nobody reads
        job = torchruns(p)
        p.terminate()
        assert p.wait(30) == 130
    finally:
        stop.touch()
        if p.poll() is None:
            p.kill()
        p.stdout.close()
    assert_stopped_everywhere(p, job, runs_dir)


def batches(p: Printer, node: str, count: int, size: int = 50) -> None:
    for b in range(count):
        p(E.NodeOutput(node, tuple(f"{node} line {b * size + k + 1}" for k in range(size)), b * size + 1, "stdout"))


def test_a_file_is_waited_for_and_gets_every_line(tmp_path: Path) -> None:
    """Output into a file (`> out.txt`) is never skipped: a node waits for it, beyond the backlog."""
    with open(tmp_path / "out.txt", "w") as out:
        p = Printer(False, 6, backlog=1024)
        p.out = out
        threads = [threading.Thread(target=batches, args=(p, n, 200)) for n in ("n1", "n2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.close()
    lines = (tmp_path / "out.txt").read_text().splitlines()
    for n in ("n1", "n2"):
        assert [x.split(" │ ", 1)[1] for x in lines if x.startswith(n)] == [f"{n} line {i}" for i in range(1, 10_001)]


def test_a_pipe_nobody_reads_never_blocks_a_node(tmp_path: Path) -> None:
    """A pipe whose reader stopped: the node's batches beyond the backlog are counted, not waited
    for, and said before the node's next printed line; events are never left out."""
    r, w = os.pipe()
    out = io.TextIOWrapper(io.FileIO(w, "w"), encoding="utf-8")
    p = Printer(False, 6, backlog=4096)
    p.out = out
    p(E.Notice("info", "before"))
    feeder = threading.Thread(target=batches, args=(p, "n1", 400))  # ~700 KB: ten times the pipe's 64 KiB
    feeder.start()
    feeder.join(20)
    assert not feeder.is_alive()  # it never waited for the reader
    p(E.Notice("info", "after"))
    got: list[bytes] = []

    def read_all() -> None:  # the terminal reads again
        while data := os.read(r, 1 << 20):
            got.append(data)

    reader = threading.Thread(target=read_all)
    reader.start()
    p.close()
    out.close()
    reader.join(20)
    text = b"".join(got).decode().splitlines()
    assert text[0].endswith("info: before") and text[-1].endswith("info: after")
    numbers: list[int] = []
    for line in text[1:-1]:
        body = line.split(" │ ", 1)[1]
        if m := re.match(r"\[ddptui: ([\d,]+) lines \(([\d,]+)-([\d,]+)\) not printed: this output fell 4 KB behind", body):
            count, first, last = (int(g.replace(",", "")) for g in m.groups())
            assert first == len(numbers) + 1 and last == first + count - 1
            numbers += range(first, last + 1)
        else:
            numbers.append(int(body.rsplit(" ", 1)[1]))
    assert numbers == list(range(1, 20_001))  # every line printed or said, once, in order
    assert len(text) - 2 < 20_000  # and some were left out


def test_a_bounded_close_leaves_a_writer_stuck_on_a_stopped_terminal() -> None:
    """What `run` and `attach` do once the user stopped them: close(wait=...) returns though the
    writer is blocked in a write nobody reads, and nothing is written after it (not even a line put
    after the close, which would block the caller)."""
    r, w = os.pipe()
    out = io.TextIOWrapper(io.FileIO(w, "w"), encoding="utf-8")
    p = Printer(False, 6, backlog=1 << 20)
    p.out = out
    batches(p, "n1", 100)  # ~100 KB: the writer is blocked once the pipe's 64 KiB are full
    closer = threading.Thread(target=lambda: (p.close(wait=0.2), p(E.Notice("info", "after the close"))))
    closer.start()
    closer.join(30)
    assert not closer.is_alive() and p.broken
    held = b""  # the terminal reads again: the writer finishes the writes it was in, and no more
    while select.select([r], [], [], 2.0)[0]:
        held += os.read(r, 1 << 20)
    os.close(r)
    assert held.startswith(b"n1     \xe2\x94\x82 n1 line 1\n") and b"after the close" not in held
