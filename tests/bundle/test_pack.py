"""`ddptui bundle` on real local runs: secrets gone from every byte, manifest honest, caps explicit."""

from __future__ import annotations

import hashlib
import os
import stat
import json
import zipfile
from pathlib import Path

import pytest

from ddptui.cli import main
from ddptui.core.bundle import BundleRefused, open_bundle, open_run
from ddptui.core.bundle.pack import pack
from ddptui.core.redact import Redactor
from tests.bundle.conftest import SECRETS, ddptui, fake_run
from tests.conftest import needs_torch


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


@needs_torch
def test_round_trip_of_a_real_run_hides_every_seeded_secret(real_run: Path, tmp_path: Path) -> None:
    raw = b"".join(p.read_bytes() for p in real_run.iterdir())
    assert not any(s.encode() in raw for s in SECRETS)  # masked at rest already...
    assert b"***REDACTED:MY_VAR***" in raw  # ...where the job printed them: the test means something
    out = tmp_path / "x.ddpt"
    r = ddptui("bundle", str(real_run), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "redacted:" in r.stdout
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    for name, data in members(out).items():
        for s in SECRETS:
            assert s.encode() not in data, (s, name)
        assert b"\x1b" not in data, name
    b = open_bundle(out)
    log = b.lines("localhost")
    assert "my var is ***REDACTED:MY_VAR***" in log and "red" in log
    assert any(x.startswith("token ***REDACTED:") for x in log)
    assert "cloud=***REDACTED:CLOUD_ID***" in log  # known at rest by its name, not only by its shape
    assert all(t is not None for t, _ in b.node_logs["localhost"])  # arrival times from <node>.times
    assert any("ddptui-smoke result" in x for x in log)
    assert b.plan and "torch.distributed.run" in b.plan[0]["command"]
    assert {c["check"] for c in b.checks} >= {"python", "torch", "env"}
    assert b.events and all("t" in e for e in b.events) and b.summary["ok"] is True
    assert b.manifest["redaction"]["escape_sequences"] == "stripped"
    assert b.manifest["playbook"] == "secret-smoke" and b.manifest["nodes"] == ["localhost"]
    # the run directory reads through the same type
    run = open_run(real_run)
    assert run.lines("localhost") and run.node_logs["localhost"][0][0] is not None


@needs_torch
def test_manifest_sizes_and_sha256_match_every_member(real_run: Path, tmp_path: Path) -> None:
    res = pack(real_run, tmp_path / "m.ddpt")
    got = members(res.path)
    man = json.loads(got.pop("manifest.json"))
    assert set(man["members"]) == set(got)
    for name, data in got.items():
        assert man["members"][name] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert man["format_version"] == 1 and man["max_size"] == 25 * 1024 * 1024
    assert {"playbook.yaml", "summary.json", "events.jsonl", "plan.json", "checks.json", "findings.json",
            "logs/localhost.log", "logs/localhost.times"} <= set(got)


def test_refuses_to_write_when_a_value_to_hide_is_still_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys) -> None:
    # a run folder recorded before secrets were masked at rest: the values are still in it
    old = fake_run(tmp_path / "old-run", {"localhost": f"my var is {SECRETS[1]}\n"},
                   playbook=f"name: old\nnodes: [localhost]\nredact: [MY_VAR]\n"
                            f"job: {{script: train.py, env: {{MY_VAR: {SECRETS[1]}}}}}\n")
    monkeypatch.setattr(Redactor, "text", lambda self, s, place="text": s)  # a broken redactor
    out = tmp_path / "leak.ddpt"
    assert main(["bundle", str(old), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "refusing to write the bundle" in err and "MY_VAR" in err
    assert not any(s in err for s in SECRETS)
    assert not out.exists() and not list(tmp_path.glob(".ddpt-*"))


def test_a_long_log_keeps_head_and_tail_with_an_elided_line(tmp_path: Path) -> None:
    lines = [f"line {i:06d} " + "x" * 80 for i in range(1, 20001)]
    run = fake_run(tmp_path / "run", {"node02": "\n".join(lines) + "\n", "node03": "short\n"})
    (run / "node02.times").write_text("1 10000 1000.5\n10001 10000 1009.5\n")
    res = pack(run, tmp_path / "c.ddpt", node_cap=256 * 1024)
    info = res.manifest["logs"]["node02"]
    assert info["lines"] == 20000 and info["elided"] > 0
    assert info["kept_head"] + info["kept_tail"] + info["elided"] == 20000
    b = open_bundle(res.path)
    got = b.lines("node02")
    head = info["kept_head"]
    assert got[:head] == lines[:head] and got[head + 1:] == lines[-info["kept_tail"]:]
    assert f"{info['elided']} lines elided (lines {head + 1}-{head + info['elided']})" in got[head]
    assert b.line_number("node02", head) is None and b.line_number("node02", head + 1) == head + info["elided"] + 1
    assert b.node_logs["node02"][0][0] == 1000.5 and b.node_logs["node02"][-1][0] == 1009.5
    assert b.lines("node03") == ["short"] and res.manifest["logs"]["node03"]["elided"] == 0
    assert any("lines of node02's log" in m["what"] for m in res.manifest["missing"])


def test_over_max_size_logs_are_cut_further_and_then_refused(tmp_path: Path) -> None:
    import random

    rnd = random.Random(1)  # incompressible lines
    text = "".join("".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(100)) + "\n"
                   for _ in range(30000))
    run = fake_run(tmp_path / "run", {"node02": text})
    res = pack(run, tmp_path / "fit.ddpt", max_size=1024 * 1024)
    assert res.size <= 1024 * 1024 and res.manifest["logs"]["node02"]["elided"] > 0
    with pytest.raises(BundleRefused, match="over --max-size"):
        pack(run, tmp_path / "no.ddpt", max_size=20 * 1024)
    assert not (tmp_path / "no.ddpt").exists()
    r = ddptui("bundle", str(run), "-o", str(tmp_path / "no.ddpt"), "--max-size", "20KB")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert "over --max-size 20 KB" in r.stderr, r.stderr  # not "0.0 MB"


def test_bundle_of_a_folder_that_is_not_a_run_is_bad_input(tmp_path: Path) -> None:
    r = ddptui("bundle", str(tmp_path))
    assert r.returncode == 2 and "not a run directory" in r.stderr and "Traceback" not in r.stderr
    r = ddptui("bundle", str(tmp_path / "nope"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_the_output_is_never_a_device_a_pipe_or_the_run_itself(tmp_path: Path) -> None:
    """`-o` that names something other than a file to (re)write is bad input and left as it is: as
    root `-o /dev/null` had replaced the device with a 0600 file, `-o RUN/summary.json` the run's
    own record with the bundle."""
    run = fake_run(tmp_path / "run", {"node02": "hello\n"})
    summary = (run / "summary.json").read_text()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for out, words in ((fifo, "is not a regular file"), (tmp_path, "is not a regular file"),
                       (run / "summary.json", "is inside"), (run / "new.ddpt", "is inside")):
        r = ddptui("bundle", str(run), "-o", str(out))
        assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode) and (run / "summary.json").read_text() == summary
    assert not (run / "new.ddpt").exists()


def test_a_member_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "run", {"node02": "hello\n", "node03": "world\n"})
    (run / "node03.times").unlink(missing_ok=True)
    (run / "node03.log").unlink()
    (run / "node03.log").mkdir()  # a folder where a log was: not a log, left out
    r = ddptui("bundle", str(run), "-o", str(tmp_path / "b.ddpt"))
    assert r.returncode == 0, r.stderr
    assert set(open_bundle(tmp_path / "b.ddpt").node_logs) == {"node02"}


def test_the_summary_line_speaks_the_units_of_max_size_and_a_plain_run_lacks_nothing(tmp_path: Path) -> None:
    """"(cap 26.2 MB)" for the default 25MB (its bytes in decimal MB), and "missing: revisions" for
    every run no fix was applied to (revisions exist only after a fix)."""
    run = fake_run(tmp_path / "run", {"node02": "hello\n"})
    r = ddptui("bundle", str(run), "-o", str(tmp_path / "p.ddpt"))
    assert r.returncode == 0 and "(cap 25 MB)" in r.stdout, r.stdout
    r = ddptui("bundle", str(run), "-o", str(tmp_path / "q.ddpt"), "--max-size", "500KB")
    assert "(cap 500 KB)" in r.stdout, r.stdout
    assert "revisions" not in r.stdout
    assert all(m["what"] != "revisions" for m in open_bundle(tmp_path / "q.ddpt").manifest["missing"])
