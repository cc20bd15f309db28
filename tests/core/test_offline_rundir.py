"""`ddptui diagnose RUN_DIR` says what the live run said: exit codes and the runner's own findings
come from summary.json, and a run made by `check` (no node logs) has the checks' findings."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ddptui.core.diagnosis.offline import diagnose_paths
from tests.conftest import ddptui_exe

MNS = {"id": "master-not-started", "severity": "warning", "nodes": ["node03"], "state": "active",
       "summary": "node03 waits in rendezvous, but torchrun is not running on the master node02",
       "evidence": [{"node": "node03", "line": 4, "text": "INFO Rendezvous'ing worker group", "command": ""}],
       "explanation": "A worker started before the master", "fix": {"env": {}, "scope": "manual", "explain": "x"}}


def run_dir(tmp_path: Path, logs: dict[str, str], nodes: dict, findings: list) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    for node, text in logs.items():
        (d / f"{node}.log").write_text(text)
    (d / "summary.json").write_text(json.dumps({"nodes": nodes, "findings": findings}))
    return d


def test_a_worker_first_run_reports_what_the_live_run_reported(tmp_path: Path) -> None:
    d = run_dir(tmp_path, {"node02": "hello\n", "node03": "[default0]:INFO Rendezvous'ing worker group\n"},
                {"node02": {"state": "exited", "exit_code": 0}, "node03": {"state": "exited", "exit_code": 0}}, [MNS])
    assert [(f.id, f.nodes, f.evidence[0].line) for f in diagnose_paths([d])] == [
        ("master-not-started", ["node03"], 4)]


def test_a_check_only_run_has_the_checks_findings(tmp_path: Path) -> None:
    port = {**MNS, "id": "port-in-use", "severity": "error", "nodes": ["node02"], "summary": "29500 is taken"}
    d = run_dir(tmp_path, {}, {"node02": {"state": "connected", "exit_code": None}}, [port])
    r = subprocess.run([ddptui_exe(), "diagnose", str(d)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "port-in-use" in r.stdout and "29500 is taken" in r.stdout, r.stdout + r.stderr


def test_a_failed_node_that_no_rule_explains_is_said_to_be_unrecognized(tmp_path: Path) -> None:
    d = run_dir(tmp_path, {"node02": "step 1\nstep 2\n", "node03": "step 1\n"},
                {"node02": {"state": "exited", "exit_code": 0}, "node03": {"state": "failed", "exit_code": 7}}, [])
    (f,) = diagnose_paths([d])
    assert f.id == "unrecognized-failure" and f.nodes == ["node03"] and f.severity == "error"
    assert any("7" in e.text for e in f.evidence)


def test_an_empty_folder_is_still_bad_input(tmp_path: Path) -> None:
    r = subprocess.run([ddptui_exe(), "diagnose", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "without node logs" in r.stderr and "Traceback" not in r.stderr


def test_counts_and_sizes_that_cannot_be_are_bad_input(tmp_path: Path) -> None:
    """--nnodes -3 was taken (the engine told of a job of -3 nodes); --max-size of 400 digits was a
    float infinity and an OverflowError traceback; --runs-dir '' put the run in the current folder,
    --from '' ran from the start."""
    log = tmp_path / "n.log"
    log.write_text("hello\n")
    for args in (["diagnose", str(log), "--nnodes", "-3"], ["diagnose", str(log), "--nnodes", "0"],
                 ["diagnose", str(log), "--nnodes", "x"], ["bundle", str(tmp_path), "--max-size", "9" * 400],
                 ["bundle", str(tmp_path), "--max-size", "0"], ["run", str(log), "--runs-dir", ""],
                 ["run", str(log), "--from", "", "--runs-dir", str(tmp_path / "r")]):
        r = subprocess.run([ddptui_exe(), *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == "", (args, r.stderr)
        assert next(a for a in args if a.startswith("--")) in r.stderr
    assert not (tmp_path / "r").exists()  # nothing ran


def test_fix_of_an_id_ddptui_does_not_have_is_bad_input_before_any_check(tmp_path: Path) -> None:
    """`fix --id nosuch` ran every check on every node, then said "the checks raised no nosuch",
    exit 1: a typo cost a preflight. It is refused first, with the ids it may have meant."""
    pb = Path(__file__).resolve().parents[2] / "playbooks" / "local-smoke.yaml"
    r = subprocess.run([ddptui_exe(), "fix", str(pb), "--id", "ib-socket-mismach", "--runs-dir", str(tmp_path / "runs")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no such diagnosis id" in r.stderr and "ib-socket-mismatch" in r.stderr, r.stderr
    assert r.stdout == "" and not (tmp_path / "runs").exists()  # nothing was run


def test_a_run_that_stops_before_any_output_has_a_log_per_node(tmp_path: Path) -> None:
    """The contract's "one <node>.log per node": a run stopped by a failed check or an unreachable
    node left only events.jsonl, playbook.yaml and summary.json. Once the run closes, every node of
    it has its log, empty if it printed nothing; one that printed keeps what it printed."""
    from ddptui.core.logs.rundir import RunDir

    rd = RunDir(tmp_path, "early", "name: early\n")
    rd.append("node02", ["connected"])
    rd.write_summary({"nodes": {"node02": {"state": "connected"}, "node03": {"state": "unreachable"}}})
    rd.close(["node02", "node03"])
    assert (rd.path / "node02.log").read_text() == "connected\n"
    assert (rd.path / "node03.log").read_text() == "" and (rd.path / "node03.times").is_file()


def test_diagnose_prints_a_fixs_alternatives_as_the_findings_tab_lists_them(tmp_path: Path) -> None:
    """gid-index's first fix is a GID index; where one HCA's port has no GID at all (NVIDIA/nccl#799,
    corpus 235) leaving that HCA out is the fix, and `ddptui diagnose` says so too, not only the TUI."""
    log = tmp_path / "node1.log"
    log.write_text("host:1:2 [0] NCCL WARN Call to ibv_modify_qp failed with error No such device\n")
    out = subprocess.run([ddptui_exe(), "diagnose", str(log)], capture_output=True, text=True, timeout=60).stdout
    assert "fix: NCCL_IB_GID_INDEX=3 — set NCCL_IB_GID_INDEX" in out
    assert "\n           or: leave out an HCA whose port has no GID: NCCL_IB_HCA=^mlx5_N" in out
