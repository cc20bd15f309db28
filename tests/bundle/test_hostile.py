"""Hostile or broken bundles: one clear line on stderr, exit 2, no traceback, nothing written anywhere."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from pathlib import Path

import pytest

from ddptui.core.bundle import BundleError, open_bundle
from ddptui.core.bundle.pack import pack
from tests.bundle.conftest import ddptui, fake_run


def manifest(members: dict[str, bytes], **over) -> bytes:
    m = {"format": "ddptui-bundle", "format_version": 1, "nodes": ["node02"],
         "members": {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in members.items()},
         "logs": {"node02": {"member": "logs/node02.log", "kept_head": 1, "elided": 0}}}
    m.update(over)
    return json.dumps(m).encode()


def write(path: Path, members: dict[str, bytes], man: bytes | None = None, infos: dict | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", man if man is not None else manifest(members))
        for name, data in members.items():
            zf.writestr((infos or {}).get(name, name), data)
    return path


GOOD = {"logs/node02.log": b"hello\n", "summary.json": b"{}"}


def _not_zip(d: Path) -> Path:
    (d / "b.ddpt").write_text("just text, not a zip\n")
    return d / "b.ddpt"


def _truncated(d: Path) -> Path:
    p = write(d / "b.ddpt", GOOD)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    return p


def _corrupt(d: Path) -> Path:
    import random

    rnd = random.Random(2)
    body = bytes(rnd.randrange(256) for _ in range(8192))
    p = write(d / "b.ddpt", {"logs/node02.log": body})
    data = bytearray(p.read_bytes())
    i = data.index(b"logs/node02.log") + 200  # inside the member's compressed bytes
    data[i:i + 64] = bytes(64)
    p.write_bytes(bytes(data))
    return p


def _bomb(d: Path) -> Path:
    big = b"\0" * (300 * 1024 * 1024)
    return write(d / "b.ddpt", {"logs/node02.log": big}, manifest({"logs/node02.log": b"x"}))


def _dotdot(d: Path) -> Path:
    return write(d / "b.ddpt", {"../../evil.txt": b"pwned"})


def _absolute(d: Path) -> Path:
    return write(d / "b.ddpt", {"/tmp/ddptui-evil-abs.txt": b"pwned"})


def _symlink(d: Path) -> Path:
    p = d / "b.ddpt"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("manifest.json", manifest({"logs/node02.log": b"/root/.ssh/id_rsa"}))
        zi = zipfile.ZipInfo("logs/node02.log")
        zi.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(zi, "/root/.ssh/id_rsa")
    return p


def _larger_than_manifest(d: Path) -> Path:
    real = b"hello\n" * 1000
    return write(d / "b.ddpt", {"logs/node02.log": real}, manifest({"logs/node02.log": b"hello\n"}))


def _future(d: Path) -> Path:
    return write(d / "b.ddpt", GOOD, manifest(GOOD, format_version=99))


def _wrong_version(d: Path) -> Path:
    return write(d / "b.ddpt", GOOD, manifest(GOOD, format_version="one"))


def _no_manifest(d: Path) -> Path:
    p = d / "b.ddpt"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("logs/node02.log", "x")
    return p


def _sha_mismatch(d: Path) -> Path:
    return write(d / "b.ddpt", {"logs/node02.log": b"HELLO\n"}, manifest({"logs/node02.log": b"hello\n"}))


def _unlisted(d: Path) -> Path:
    return write(d / "b.ddpt", {**GOOD, "extra.bin": b"x"}, manifest(GOOD))


CASES = {
    "not-a-zip": (_not_zip, "not a zip file"),
    "truncated": (_truncated, "truncated"),
    "corrupt": (_corrupt, "corrupt"),
    "zip-bomb": (_bomb, "zip bomb"),
    "dotdot-path": (_dotdot, "unsafe path"),
    "absolute-path": (_absolute, "unsafe path"),
    "symlink-member": (_symlink, "symbolic link"),
    "member-larger-than-manifest": (_larger_than_manifest, "larger than the manifest says"),
    "future-version": (_future, "newer than this ddptui reads"),
    "wrong-version": (_wrong_version, "unknown bundle format version"),
    "no-manifest": (_no_manifest, "no manifest.json"),
    "sha256-mismatch": (_sha_mismatch, "sha256"),
    "unlisted-member": (_unlisted, "not listed in the manifest"),
}


@pytest.mark.parametrize("kind", list(CASES))
@pytest.mark.parametrize("command", ["report", "diagnose", "diff"])
def test_hostile_bundle_is_refused_in_one_line(kind: str, command: str, tmp_path: Path) -> None:
    make, words = CASES[kind]
    d = tmp_path / "in"
    d.mkdir()
    p = make(d)
    cwd, tmp, home = tmp_path / "cwd", tmp_path / "tmp", tmp_path / "home"
    for x in (cwd, tmp, home):
        x.mkdir()
    args = [command, str(p)] + ([str(p)] if command == "diff" else [])
    r = ddptui(*args, cwd=cwd, TMPDIR=str(tmp), HOME=str(home))
    assert r.returncode == 2, (r.stdout, r.stderr)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and words in err[0] and str(p) in err[0], r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert list(cwd.iterdir()) == list(tmp.iterdir()) == list(home.iterdir()) == []
    assert sorted(x.name for x in d.iterdir()) == ["b.ddpt"]
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/ddptui-evil-abs.txt").exists()


def test_the_reader_raises_bundle_error_for_each_kind(tmp_path: Path) -> None:
    for kind, (make, words) in CASES.items():
        d = tmp_path / kind
        d.mkdir()
        with pytest.raises(BundleError, match=words):
            open_bundle(make(d))


def test_a_good_bundle_still_opens_and_unknown_members_are_never_unpacked(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "run", {"node02": "hello\n"})
    b = open_bundle(pack(run, tmp_path / "ok.ddpt").path)
    assert b.lines("node02") == ["hello"] and b.name == "fake"


SHAPES = {  # a well-formed bundle whose files hold the wrong types: each was a traceback and exit 1
    "nodes-a-list": {"summary.json": {"nodes": ["node02", "node03"]}},
    "nodes-a-string": {"summary.json": {"nodes": "x"}},
    "node-a-string": {"summary.json": {"nodes": {"node02": "failed"}}},
    "facts-a-list": {"summary.json": {"facts": [1]}},
    "findings-a-string": {"summary.json": {"findings": "none"}, "findings.json": {"findings": "abc"}},
    "findings-not-dicts": {"findings.json": {"findings": [1, "x"]}},
    "started-out-of-range": {"summary.json": {"started": 1e300, "nodes": {"node02": {"started": -5, "ended": "x"}}}},
    "summary-a-list": {"summary.json": [1, 2]},
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("command", ["report", "diagnose", "diff", "open"])
def test_wrong_types_in_a_bundle_are_left_out_not_a_traceback(shape: str, command: str, tmp_path: Path) -> None:
    members = {"logs/node02.log": b"hello\nRuntimeError: boom\n",
               **{n: json.dumps(v).encode() for n, v in SHAPES[shape].items()}}
    p = write(tmp_path / "b.ddpt", members)
    args = [command, str(p)] + ([str(p)] if command == "diff" else []) + (["--headless"] if command == "open" else [])
    r = ddptui(*args)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr and r.stderr == "", r.stderr
    assert r.stdout  # it says what it could read


def test_a_manifests_line_counts_are_held_to_the_member(tmp_path: Path) -> None:
    """`kept_head` of 10**9 made a list of a billion line numbers (the process killed for memory);
    a count that is not a number was a ValueError traceback."""
    for head, elided in ((10**9, 1), ("x", "y"), (-3, 2), (True, 10**12)):
        logs = {"node02": {"member": "logs/node02.log", "kept_head": head, "elided": elided}}
        p = write(tmp_path / "b.ddpt", GOOD, manifest(GOOD, logs=logs))
        b = open_bundle(p)
        assert b.lines("node02") == ["hello"]
        r = ddptui("report", str(p))
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def test_a_run_directory_with_wrong_types_or_bytes_is_read_as_far_as_it_goes(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "run", {"node02": "hello\nRuntimeError: boom\n"})
    (run / "summary.json").write_text(json.dumps({"nodes": ["node02"], "findings": "none", "facts": [1],
                                                  "started": 1e300}))
    (run / "playbook.yaml").write_bytes(b"name: caf\xe9\n")  # not UTF-8
    for args in (["report", str(run)], ["diagnose", str(run)], ["diff", str(run), str(run)],
                 ["open", str(run), "--headless"], ["bundle", str(run), "-o", str(tmp_path / "r.ddpt")]):
        r = ddptui(*args)
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr and r.stdout, (args, r.stderr)


def test_diagnose_prints_no_terminal_escape_from_a_log(tmp_path: Path) -> None:
    """A log line's OSC 52 (writes the clipboard) or OSC 0 (the window title) is the log's, not the
    terminal's: the evidence printed has it stripped (as report and open do)."""
    log = tmp_path / "n.log"
    log.write_text("n:1:1 [0] NCCL WARN \x1b]52;c;cHduZWQ=\x07 bad \x1b]0;owned\x07\nRuntimeError: boom\n")
    r = ddptui("diagnose", str(log))
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "NCCL WARN" in r.stdout, r.stdout


@pytest.mark.parametrize("command", ["report", "diagnose", "open"])
def test_a_pipe_or_a_device_is_named_as_one(command: str, tmp_path: Path) -> None:
    """`diagnose /dev/null` and `report FIFO` said "no such file" about paths that exist."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for p in (fifo, Path("/dev/null")):
        r = ddptui(command, str(p), *(["--headless"] if command == "open" else []), timeout=30)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith(f"ddptui: {p}: is not a regular file (a pipe, a device or a socket)"), r.stderr
