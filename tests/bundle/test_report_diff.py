"""report, diff and diagnose on bundles and run directories."""

from __future__ import annotations

import json
from pathlib import Path

from ddptui.core.bundle import open_bundle
from ddptui.core.bundle.pack import pack
from tests.bundle.conftest import MY_VAR, SECRETS, corpus, ddptui, fake_run
from tests.conftest import needs_torch

PROBE = json.dumps({"python": "3.11.7", "torch": "2.4.0", "cuda": "12.1", "nccl": "2.20.5"})
CHECKS = [{"node": n, "check": "python", "status": "pass", "summary": "Python 3.11.7", "command": "python -c ..",
           "output": PROBE} for n in ("node02", "node03")] + [
    {"node": "node02", "check": "gpus", "status": "pass", "summary": "4 GPUs", "command": "nvidia-smi ...",
     "output": "0, NVIDIA A100-SXM4-80GB, 81920, 0, 550.54.15"}]
FINDING = {"id": "ib-socket-mismatch", "severity": "error", "nodes": ["node02", "node03"], "state": "active",
           "summary": "node02 will use NET/IB, node03 NET/Socket",
           "evidence": [{"node": "node03", "line": 7, "text": "NCCL WARN NET/IB : No device found."}],
           "fix": {"env": {"NCCL_IB_DISABLE": "1"}, "scope": "all-nodes", "explain": "use sockets everywhere"}}


def test_report_has_the_job_nodes_versions_findings_and_first_warn(tmp_path: Path) -> None:
    logs = {"node02": "NCCL INFO NCCL version 2.20.5+cuda12.1\nNCCL INFO Using network IB\n",
            "node03": "a\nb\nnode03:1:1 [0] NCCL WARN NET/IB : No device found.\nc\nNCCL WARN later\n"}
    run = fake_run(tmp_path / "run", logs, findings=[FINDING], checks=CHECKS)
    res = pack(run, tmp_path / "r.ddpt")
    for source in (res.path, run):
        r = ddptui("report", str(source))
        assert r.returncode == 0, r.stderr
        md = r.stdout
        for heading in ("## ddptui: fake", "### Nodes", "### Versions", "### Findings", "### First `NCCL WARN`",
                        "### Fix applied"):
            assert heading in md, heading
        assert "| node | python | torch | cuda | nccl | driver |" in md
        assert "| node02 | 3.11.7 | 2.4.0 | 12.1 | 2.20.5 | 550.54.15 |" in md
        assert "**ib-socket-mismatch** (error, active)" in md and "node03:7: NCCL WARN NET/IB" in md
        assert "node03:3: node03:1:1 [0] NCCL WARN NET/IB : No device found." in md
        assert "NCCL WARN later" not in md  # only the first per node
        assert "`NCCL_IB_DISABLE=1`" in md
        assert "| node02 | master | 0 | failed | 1 | 10.0 | IB |" in md


@needs_torch
def test_report_of_a_run_directory_is_redacted_too(real_run: Path) -> None:
    r = ddptui("report", str(real_run))
    assert r.returncode == 0, r.stderr
    assert not any(s in r.stdout for s in SECRETS) and "| localhost | 3.11" in r.stdout


@needs_torch
def test_diff_of_two_real_runs_shows_the_changed_env(real_run: Path, real_run_b: Path, tmp_path: Path) -> None:
    a = pack(real_run, tmp_path / "a.ddpt").path
    r = ddptui("diff", str(a), str(real_run_b), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["a"]["outcome"] == d["b"]["outcome"] == "passed" and d["a"]["ok"] is True
    node = d["nodes"]["localhost"]
    assert node["env"]["NCCL_DEBUG"] == ["WARN", "INFO"]
    assert node["exit_code"] == [0, 0] and all(isinstance(x, float) for x in node["duration_s"])
    assert "MY_VAR" not in node["env"]  # the same (hidden) on both sides
    assert node["checks"]  # A ran the checks, B did not
    assert not any(s in r.stdout for s in SECRETS)
    text = ddptui("diff", str(real_run), str(real_run_b))
    assert text.returncode == 0 and "≠ env.NCCL_DEBUG" in text.stdout and "WARN" in text.stdout
    assert text.stdout.startswith(f"A: {real_run} (run, ok)\nB: {real_run_b} (run, ok)\n"), text.stdout
    assert MY_VAR not in text.stdout


def test_diagnose_a_bundle_marks_the_findings_the_bundle_did_not_have(tmp_path: Path) -> None:
    logs = {"node02": corpus("15-firewall-no-route-to-host.log")}
    run = fake_run(tmp_path / "run", logs, findings=[{**FINDING, "id": "old-rule-finding"}])
    out = pack(run, tmp_path / "d.ddpt").path
    r = ddptui("diagnose", str(out), "--json")
    d = json.loads(r.stdout)
    assert d["stored"] == ["old-rule-finding"]
    new = [f for f in d["findings"] if f["new"]]
    assert [f["id"] for f in new] == ["firewall-or-unreachable"]  # corpus 15's confirmed cause, today's rule
    assert r.returncode == 1  # an active error finding
    text = ddptui("diagnose", str(out))
    assert f"NEW {new[0]['severity'].upper():7} {new[0]['id']}" in text.stdout
    # stored in the bundle already: not new
    run2 = fake_run(tmp_path / "run2", logs, findings=[{**FINDING, "id": f["id"]} for f in d["findings"]])
    d2 = json.loads(ddptui("diagnose", str(pack(run2, tmp_path / "d2.ddpt").path), "--json").stdout)
    assert not any(f["new"] for f in d2["findings"])


def test_diagnose_a_bundle_keeps_the_original_line_numbers_past_the_elided_part(tmp_path: Path) -> None:
    tail = corpus("15-firewall-no-route-to-host.log")
    text = "".join(f"filler {i} " + "y" * 60 + "\n" for i in range(30000)) + tail
    run = fake_run(tmp_path / "run", {"node02": text})
    b = open_bundle(pack(run, tmp_path / "e.ddpt", node_cap=128 * 1024).path)
    assert b.elided["node02"][1] > 0
    from ddptui.core.bundle.rediagnose import rediagnose

    findings, _ = rediagnose(b)
    lines = text.splitlines()
    ev = [e for f in findings for e in f.evidence if e.line]
    assert ev and all(lines[e.line - 1] == e.text or e.text in lines[e.line - 1] for e in ev)


@needs_torch
def test_diagnose_gives_a_bundle_the_verdict_of_its_run_directory(tmp_path: Path) -> None:
    """A real `check` that fails (GLOO_SOCKET_IFNAME names no interface) leaves no node log, only the
    check's finding: `diagnose RUN` said bad-socket-ifname and exit 1, `diagnose` of its bundle said
    "no findings" and exit 0 (it fed the logs alone). And a failed node's exit code with logs that
    do not say why: unrecognized-failure from both."""
    pb = tmp_path / "ifname.yaml"
    pb.write_text("name: ifname\ntransport: local\nnodes: localhost\njob:\n  script: builtin:smoke\n"
                  "  backend: gloo\n  env: {GLOO_SOCKET_IFNAME: nosuch0}\n")
    r = ddptui("check", str(pb), "--runs-dir", str(tmp_path / "runs"), timeout=240)
    assert r.returncode == 1, r.stdout + r.stderr
    (checked,) = (tmp_path / "runs").iterdir()
    assert (checked / "localhost.log").read_text() == ""  # a log per node, as the contract says
    failed = fake_run(tmp_path / "failed", {"node02": "step 1 loss 0.3\n", "node03": "step 1 loss 0.3\n"})
    for run, want in ((checked, {"bad-socket-ifname"}), (failed, {"unrecognized-failure"})):
        of_run = ddptui("diagnose", str(run), "--json")
        of_bundle = ddptui("diagnose", str(pack(run, tmp_path / f"{run.name}.ddpt").path), "--json")
        ids = [{f["id"] for f in json.loads(r.stdout)["findings"]} for r in (of_run, of_bundle)]
        assert ids == [want, want], (of_run.stdout, of_bundle.stdout)
        assert of_run.returncode == of_bundle.returncode == 1


def test_diagnose_a_bundle_takes_nnodes(tmp_path: Path) -> None:
    """`--nnodes` was read and dropped for a bundle: corpus 23 (one node of a 2-node job built a
    communicator of 1 node) is ranks-not-joined only once the job's node count is known."""
    run = fake_run(tmp_path / "run", {"hw14": corpus("23-ranks-not-joined-nnodes-1.log")})
    out = pack(run, tmp_path / "n.ddpt").path
    ids = [{f["id"] for f in json.loads(ddptui("diagnose", str(out), "--json", *extra).stdout)["findings"]}
           for extra in ((), ("--nnodes", "2"))]
    assert "ranks-not-joined" not in ids[0] and "ranks-not-joined" in ids[1], ids
