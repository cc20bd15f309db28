"""`ddptui attach`'s core (core/slurm/attach.py) following a real file that a thread writes as a
batch job would, cut mid-line. The job's record comes through the Attachment's seams (`show_job`,
`status`: commands.show_job and commands.status in production), here from the job the test plays;
the records are made by commands.parse_record from `scontrol show job -o` lines. The real Slurm
path is tests/cluster/test_slurm_attach.py."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ddptui.core import events as E
from ddptui.core.diagnosis.offline import diagnose_paths
from ddptui.core.hostlist import expand_hostlist
from ddptui.core.slurm.attach import Attachment, OutputUnreadable
from ddptui.core.slurm.commands import JobStatus, parse_record
from tests.core.test_diagnosis_corpus import split
from tests.core.test_diagnosis_recorded import GROUPS

HEAD = "ddptui: slurm job 77 nodes node02,node03 master node02\n"


class Job:
    """The job this test plays: its state moves as the writer thread goes; records in scontrol's words."""

    def __init__(self, out: Path, err: Path | None = None) -> None:
        self.out, self.err = out, err or out
        self.state, self.nodes, self.reason = "PENDING", "(null)", "Resources"
        self.asked = 0

    def show_job(self, job_id: str) -> dict[str, str]:
        self.asked += 1
        return parse_record(f"JobId={job_id} JobName=train JobState={self.state} Reason={self.reason} "
                            f"Partition=gpu RunTime=00:00:01 NodeList={self.nodes} "
                            f"StdErr={self.err} StdIn=/dev/null StdOut={self.out}")

    def status(self, job_id: str) -> JobStatus:
        return JobStatus.of(job_id, self.show_job(job_id))


def writer(job: Job, text: bytes, end_state: str, piece: int = 37, err_text: bytes = b"") -> threading.Thread:
    def go() -> None:
        time.sleep(0.3)
        job.state, job.nodes, job.reason = "RUNNING", "node[02-03]", "None"
        time.sleep(0.3)
        with open(job.out, "ab") as f:
            for i in range(0, len(text), piece):
                f.write(text[i:i + piece])
                f.flush()
                if i % (piece * 20) == 0:
                    time.sleep(0.01)
        if err_text:
            job.err.write_bytes(err_text)
        job.state, job.reason = end_state, "None"

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def attachment(job: Job, tmp_path: Path, sink) -> Attachment:
    return Attachment("77", sink, tmp_path / "runs", status=job.status, show_job=job.show_job,
                      expand=expand_hostlist, poll=0.05)


def test_a_healthy_job_followed_as_it_grows(tmp_path: Path) -> None:
    from ddptui.cli_printer import Printer

    job = Job(tmp_path / "slurm-77.out")
    lines = {"node02": [f"master line {i}" for i in range(300)], "node03": [f"worker line {i}" for i in range(300)]}
    text = HEAD + "".join(f"0: {a}\n1: {b}\n" for a, b in zip(lines["node02"], lines["node03"]))
    text += "0: last line without newline"
    events: list[E.Event] = []
    printer = Printer(False, 6)
    printer.out = io.StringIO()

    def sink(ev: E.Event) -> None:
        events.append(ev)
        printer(ev)

    t = writer(job, text.encode(), "COMPLETED")
    att = attachment(job, tmp_path, sink)
    assert att.run() is True
    t.join()
    got: dict[str, list[str]] = {}
    for ev in events:
        if isinstance(ev, E.NodeOutput):
            assert ev.first_line == len(got.get(ev.node, [])) + 1
            got.setdefault(ev.node, []).extend(ev.lines)
    lines["node02"].append("last line without newline")
    assert got == lines
    notices = [ev.text for ev in events if isinstance(ev, E.Notice)]
    assert notices[0] == "slurm job 77: PENDING (Resources)" and any("RUNNING" in n for n in notices)
    # recorded as a run directory that diagnose reads
    rd = att.run_dir.path
    assert (rd / "node02.log").read_text().splitlines() == lines["node02"]
    assert "nodes: [node02, node03]" in (rd / "playbook.yaml").read_text()  # named once the job left PENDING
    summary = json.loads((rd / "summary.json").read_text())
    assert summary["slurm"]["state"] == "COMPLETED" and summary["ok"] is True
    assert list(summary["nodes"]) == ["node02", "node03"] and summary["nodes"]["node02"]["role"] == "master"
    assert not [f for f in diagnose_paths([rd]) if f.severity in ("error", "warning")]
    assert isinstance(events[-1], E.RunFinished) and events[-1].ok
    shown = printer.out.getvalue()
    assert "node03 │ worker line 299\n" in shown and f"→ {rd}" in shown


def test_a_failing_job_raises_its_findings_and_the_exit_codes(tmp_path: Path) -> None:
    key = next(k for k in GROUPS if "worker-killed" in GROUPS[k][0].name)
    bodies = [split(f)[1] for f in GROUPS[key]]  # node02, node03
    text = HEAD + "".join(f"{task}: {x}\n" for task, body in enumerate(bodies) for x in body)
    text += "srun: error: node03: task 1: Exited with exit code 1\n"
    job = Job(tmp_path / "slurm-77.out")
    events: list[E.Event] = []
    t = writer(job, text.encode(), "FAILED")
    att = attachment(job, tmp_path, events.append)
    assert att.run() is False
    t.join()
    raised = {ev.finding.id for ev in events if isinstance(ev, E.FindingRaised)}
    assert "host-oom-exit-9" in raised
    summary = json.loads((att.run_dir.path / "summary.json").read_text())
    assert summary["nodes"]["node03"]["exit_code"] == 1 and summary["nodes"]["node03"]["state"] == "failed"
    assert summary["nodes"]["node02"]["state"] == "failed"  # the job FAILED: no node is left "running"
    ended = {ev.node: ev.state for ev in events if isinstance(ev, E.NodeState) and ev.state != "running"}
    assert ended == {"node02": "failed", "node03": "failed"}
    assert {f.id for f in diagnose_paths([att.run_dir.path])} >= {"host-oom-exit-9"}


def test_stderr_in_its_own_file_gets_the_headers_names(tmp_path: Path) -> None:
    job = Job(tmp_path / "o.out", tmp_path / "o.err")
    events: list[E.Event] = []
    t = writer(job, (HEAD + "0: out a\n1: out b\n").encode(), "COMPLETED", err_text=b"1: Traceback (most recent call last):\n")
    att = attachment(job, tmp_path, events.append)
    att.run()
    t.join()
    errs = [(ev.node, ev.lines) for ev in events if isinstance(ev, E.NodeOutput) and ev.stream == "stderr"]
    assert errs == [("node03", ("Traceback (most recent call last):",))]


def test_an_output_that_is_not_a_file_is_bad_input(tmp_path: Path) -> None:
    job = Job(tmp_path)  # a directory
    job.state, job.nodes = "RUNNING", "node[02-03]"
    with pytest.raises(OutputUnreadable, match="cannot read the job's stdout: Is a directory"):
        attachment(job, tmp_path, lambda ev: None).run()


def test_an_output_that_never_appears_here_is_bad_input(tmp_path: Path) -> None:
    job = Job(tmp_path / "elsewhere" / "slurm-77.out")
    job.state, job.nodes = "COMPLETED", "node[02-03]"
    att = attachment(job, tmp_path, lambda ev: None)
    att.missing_grace = 0.3
    with pytest.raises(OutputUnreadable, match="not there from here"):
        att.run()


def test_stop_ends_the_following_and_the_job_is_left_alone(tmp_path: Path) -> None:
    job = Job(tmp_path / "slurm-77.out")
    att = attachment(job, tmp_path, lambda ev: None)
    threading.Timer(0.5, att.stop).start()
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(att.run()), daemon=True)
    t.start()
    t.join(30)  # a bound for a hang only: the job stays PENDING for ever, so only stop() ends run()
    assert not t.is_alive(), "stop() did not end the following"
    assert result == [False]  # still PENDING: not a success
    assert job.state == "PENDING" and job.asked >= 1


def test_no_slurm_here_is_bad_input(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no scontrol on it
    r = subprocess.run([sys.executable, "-m", "ddptui", "attach", "12", "--headless", "--runs-dir", str(tmp_path / "r")],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2, r.stderr
    assert "no Slurm here" in r.stderr


# scontrol's words on a machine with Slurm's commands and no cluster (this VM, no slurm.conf), as it printed them
NO_CLUSTER = """scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host
scontrol: error: fetch_config: DNS SRV lookup failed
scontrol: error: _establish_config_source: failed to fetch config
scontrol: fatal: Could not establish a configuration source
"""


def test_slurms_commands_without_a_cluster_are_bad_input_too(tmp_path: Path) -> None:
    """Exit 1 means the job failed; here there is no job to fail: exit 2, in one line that says so.
    TEST DOUBLE: an `scontrol` on PATH printing what the real one printed on this machine."""
    (tmp_path / "scontrol").write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{NO_CLUSTER}EOF\nexit 1\n")
    (tmp_path / "scontrol").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    r = subprocess.run([sys.executable, "-m", "ddptui", "attach", "12", "--headless", "--runs-dir", str(tmp_path / "r")],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "no Slurm cluster answers here" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("job_id", ["abc", "12x", "-1", "", "12_", "1 2"])
def test_a_job_id_that_is_not_slurms_is_bad_input(job_id: str, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "ddptui", "attach", job_id, "--headless", "--runs-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
