"""Issue 14: playbooks that ended in a traceback. Each now exits 2 saying where and why, writes nothing.

`ddptui.cli.main` runs in-process with stdout encoding strictly, as a terminal's does (a lone
surrogate printed there was one of the tracebacks), and stderr with backslashreplace, as Python's.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from ddptui.cli import main
from ddptui.core.playbook.loader import load_playbook
from tests.conftest import ddptui_exe

HEAD = "name: hostile\n"


def cli(*argv: str) -> tuple[int, str, str]:
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
        out.flush()
        err.flush()
    return rc, out.buffer.getvalue().decode(), err.buffer.getvalue().decode()


def refused(tmp_path: Path, text: str | bytes, where: tuple[int, int], words: str, *argv: str) -> str:
    """Validate (or run `argv`) `text`: exit 2, `path:line:col: ...words...`, no traceback, nothing written."""
    f = tmp_path / "pb.yaml"
    f.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    before = sorted(tmp_path.rglob("*"))
    rc, out, err = cli(*(argv or ("validate",)), str(f), *(("--runs-dir", str(tmp_path / "runs")) if argv else ()))
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in out + err
    assert f"{f}:{where[0]}:{where[1]}: " in err, err
    first = err.split(f"{f}:{where[0]}:{where[1]}: ", 1)[1].splitlines()[0]
    assert words in first, err
    assert sorted(tmp_path.rglob("*")) == before
    return err


def job(extra: str = "", nodes: str = "nodes: a\n") -> str:
    return HEAD + nodes + "job:\n  script: builtin:smoke\n" + extra


# ---- YAML the loader did not handle -----------------------------------------------------------------

def test_a_raw_control_character_is_pointed_at(tmp_path: Path) -> None:
    err = refused(tmp_path, "name: ho\x01stile\nnodes: a\njob: {script: builtin:smoke}\n", (1, 9),
                  "the control character U+0001 is not allowed")
    assert "\x01" not in err  # the source line is shown without it


@pytest.mark.parametrize("tag", ["!!python/object:os.system", "!foo", "!!map", "!!int", "!!bool", "!!timestamp",
                                 "!!python/name:os.system", "!"])
def test_every_explicit_tag_is_refused_where_it_is(tmp_path: Path, tag: str) -> None:
    value = {"!!int": "abc", "!!bool": "maybe", "!!timestamp": "junk"}.get(tag, "x")
    refused(tmp_path, job(f"  rdzv_id: {tag} {value}\n"), (5, 12), "YAML tags are not allowed in a playbook")


def test_a_tag_on_a_collection_is_refused_too(tmp_path: Path) -> None:
    refused(tmp_path, job("  env: !!omap [a: 1]\n"), (5, 8), "YAML tags are not allowed")


@pytest.mark.parametrize("value,words", [("2001-13-45", "looks like a date but is not one"),
                                         ("0x_", "looks like an integer but is not one"),
                                         ("1" * 5000, "a number with 5,000 digits is too large")],
                         ids=["date", "hex", "5000-digits"])
def test_a_plain_value_that_only_looks_like_a_number_or_date(tmp_path: Path, value: str, words: str) -> None:
    refused(tmp_path, job(f"  rdzv_id: {value}\n"), (5, 12), words)


def test_600_nested_brackets_are_refused_before_the_composer_recurses(tmp_path: Path) -> None:
    refused(tmp_path, job("  args: " + "[" * 600 + "]" * 600 + "\n"), (5, 57), "nested more than 50 levels deep")


def test_a_lone_surrogate_is_refused_before_anything_prints_it(tmp_path: Path) -> None:
    refused(tmp_path, '"name": "\\ud800"\nnodes: a\njob: {script: builtin:smoke}\n', (1, 9),
            "a lone surrogate U+D800")


def test_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    refused(tmp_path, b"name: \xff\nnodes: a\njob: {script: builtin:smoke}\n", (1, 7), "not UTF-8: byte 0xff")


# ---- what is read --------------------------------------------------------------------------------------

def test_a_hostlist_of_ten_billion_names_is_counted_not_expanded(tmp_path: Path) -> None:
    refused(tmp_path, job(nodes="nodes: n[0-100000][0-100000]\n"), (2, 8),
            "expands to at least 10,000,200,001 names; at most 4096 are allowed")


def test_more_than_4096_nodes_through_aliases(tmp_path: Path) -> None:
    nodes = "nodes: [&h 'n[1-4000]', " + ", ".join(["*h"] * 3) + "]\n"
    err = refused(tmp_path, job(nodes=nodes), (2, 9), "more than 4096 nodes")  # an alias is where its anchor is
    assert "node 'n1' is listed twice (and 3,999 more names from here)" in err and len(err) < 10_000


def test_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "pb.yaml"
    os.mkfifo(fifo)
    r = subprocess.run([ddptui_exe(), "validate", str(fifo)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{fifo}:1:1: is not a regular file (a pipe, a device or a socket)" in r.stderr


def test_dev_zero_is_refused_without_reading_it() -> None:
    rc, _, err = cli("validate", "/dev/zero")
    assert rc == 2 and "/dev/zero:1:1: is not a regular file" in err


def test_a_file_over_1_mib_is_refused(tmp_path: Path) -> None:
    refused(tmp_path, job() + "#" * (1 << 20) + "\n", (1, 1), "a playbook may be at most 1,048,576 bytes")


def test_a_folder_is_not_a_playbook(tmp_path: Path) -> None:
    rc, _, err = cli("validate", str(tmp_path))
    assert rc == 2 and f"{tmp_path}:1:1: is a folder" in err


# ---- values accepted that crashed later -----------------------------------------------------------

@pytest.mark.parametrize("line,col,words", [
    ("  stop_grace: .inf\n", 15, "job.stop_grace must be a finite number, not inf"),
    ("  stop_grace: .nan\n", 15, "job.stop_grace must be a finite number, not nan"),
    ("  master_wait_timeout: 1.0e+300\n", 24, "must be at most 604800 seconds (a week), not 1e+300"),
    ("  rdzv_timeout: 1" + "0" * 400 + "\n", 17, "must be at most 604800 seconds (a week), not a 401-digit number"),
    ("  nproc_per_node: 100000\n", 19, "must be at most 1024 processes per node"),
    ("  master_port: 70000\n", 16, "must be a port number between 1 and 65535"),
], ids=["inf", "nan", "1e300", "401-digits", "nproc", "port"])
def test_numbers_out_of_range(tmp_path: Path, line: str, col: int, words: str) -> None:
    refused(tmp_path, job(line), (5, col), words)


def test_a_step_timeout_of_1e300(tmp_path: Path) -> None:
    refused(tmp_path, job("steps:\n  - {kind: connect, timeout: 1.0e+300}\n"), (6, 30),
            "steps[0].timeout must be at most 604800 seconds")


def test_ssh_options_are_bounded_too(tmp_path: Path) -> None:
    refused(tmp_path, job("ssh: {connect_timeout: .inf}\n"), (5, 24), "ssh.connect_timeout must be a finite number")


@pytest.mark.parametrize("piece,where", [
    ("  env: {\"A\\0B\": x}\n", (5, 9)),
    ("  env: {A: \"x\\0y\"}\n", (5, 12)),
    ("  args: [\"--x=\\0\"]\n", (5, 10)),
    ("  workdir: \"/tmp/\\0\"\n", (5, 12)),
    ("  python: \"py\\0\"\n", (5, 11)),
])
def test_a_nul_written_as_an_escape_in_the_job(tmp_path: Path, piece: str, where: tuple[int, int]) -> None:
    refused(tmp_path, job(piece), where, "the control character U+0000 is not allowed in a value")


@pytest.mark.parametrize("key", ["host", "user", "name"])
def test_a_nul_in_a_node(tmp_path: Path, key: str) -> None:
    node = {"name": '"a\\0"'}.get(key, "a") + (f', {key}: "x\\0"' if key != "name" else "")
    refused(tmp_path, job(nodes=f"nodes:\n  - {{name: {node}}}\n"), (3, 12 + (len(node) - 5 if key != "name" else 0)),
            "U+0000 is not allowed in a value")


def test_a_nul_in_the_script(tmp_path: Path) -> None:
    refused(tmp_path, HEAD + 'nodes: a\njob: {script: "x\\0.py"}\n', (3, 15), "U+0000 is not allowed")


def test_a_node_name_over_200_characters(tmp_path: Path) -> None:
    refused(tmp_path, job(nodes="nodes:\n  - name: " + "a" * 300 + "\n"), (3, 11),
            "node name is 300 characters long; at most 200 are allowed")


@pytest.mark.parametrize("names,where,words", [
    ("[a_b, 'a:b']", (2, 14), "nodes 'a_b' and 'a:b' would write the same log file (a_b.log)"),
    ("[gpu1, GPU1]", (2, 15), "nodes 'gpu1' and 'GPU1' would write the same log file"),
    ("[x, '.x']", (2, 12), "nodes 'x' and '.x' would write the same log file (x.log)"),
])
def test_names_that_collide_on_disk(tmp_path: Path, names: str, where: tuple[int, int], words: str) -> None:
    refused(tmp_path, job(nodes=f"nodes: {names}\n"), where, words)


@pytest.mark.parametrize("node,col,words", [
    ("{name: a/b}", 12, "node name 'a/b' contains '/', which OpenSSH refuses in a host name"),
    ("{name: 'a;touch x'}", 12, "node name 'a;touch x' contains ';'"),
    ("'a$(id)'", 7, "bad hostlist 'a$(id)' in nodes[0]: '$' is not allowed in a host name"),
    ("{name: '-oProxyCommand'}", 12, "node name '-oProxyCommand' starts with '-'"),
    ("{name: a, host: '$(reboot)'}", 21, "nodes[0].host '$(reboot)' contains '$'"),
    ("{name: a, host: -oProxyCommand}", 21, "nodes[0].host '-oProxyCommand' starts with '-'"),
    ("{name: a, user: 'x;id'}", 21, "nodes[0].user 'x;id' is not a user name OpenSSH would pass on"),
    ("{name: a, user: -lroot}", 21, "nodes[0].user '-lroot' is not a user name"),
])
def test_names_hosts_and_users_as_openssh_takes_them(tmp_path: Path, node: str, col: int, words: str) -> None:
    refused(tmp_path, job(nodes=f"nodes:\n  - {node}\n"), (3, col), words)


def test_a_workdir_of_a_user_that_does_not_exist(tmp_path: Path) -> None:
    refused(tmp_path, HEAD + "transport: local\nnodes: localhost\njob:\n  script: train.py\n"
            "  workdir: ~nosuchuser4711/x\n", (6, 12), "there is no user 'nosuchuser4711' on this machine")


def test_a_5000_character_script_path(tmp_path: Path) -> None:
    refused(tmp_path, HEAD + "nodes: a\njob:\n  script: " + "a/" * 2500 + "\n", (4, 11),
            "job.script is 5,000 characters long; at most 4,096 are allowed")


def test_a_script_name_longer_than_the_file_system_allows(tmp_path: Path) -> None:
    refused(tmp_path, HEAD + "transport: local\nnodes: localhost\njob:\n  script: " + "s" * 300 + ".py\n", (5, 11),
            "cannot look at it: File name too long")


def test_a_missing_python_with_from_launch_master(tmp_path: Path) -> None:
    pb = HEAD + "transport: local\nnodes: localhost\njob:\n  script: builtin:smoke\n  python: /no/such/python\n"
    refused(tmp_path, pb, (6, 11), "job.python '/no/such/python': no such program on this machine",
            "run", "--headless", "--from", "launch-master")


def test_a_python_gone_after_validation_fails_the_step_in_words(tmp_path: Path) -> None:
    from ddptui.core.runbook import Runbook
    from ddptui.core.transport.factory import SSHSettings, make_factory

    py = tmp_path / "python"
    py.write_text("#!/bin/sh\n")
    py.chmod(0o755)
    f = tmp_path / "pb.yaml"
    f.write_text(HEAD + f"transport: local\nnodes: localhost\njob:\n  script: builtin:smoke\n  python: {py}\n")
    pb = load_playbook(f)
    py.unlink()
    events: list = []
    rb = Runbook(pb, events.append, tmp_path / "runs", make_factory(SSHSettings()))
    try:
        assert rb.run_step("connect") and not rb.run_step("launch-master")
    finally:
        rb.close()
    failed = [e for e in events if getattr(e, "state", None) == "failed" and hasattr(e, "step")]
    assert failed and f"localhost: cannot start '{py}': No such file or directory" in failed[-1].message


@pytest.mark.parametrize("config,line,words", [
    ("Host b\n  HostName b.example\nHost a\n  HostName\n", 4, "Unparsable line HostName"),
    ("# Match foo\nMatch foo\n", 2, "Missing parameter to Match 'foo' keyword"),
    ("Host b\n  Port 22\nHost a\n  Port = abc\n", 4, "port 'abc' is not a number"),
])
def test_a_malformed_ssh_config_is_named_with_why(tmp_path: Path, config: str, line: int, words: str) -> None:
    """Where, by line (paramiko's words number none), and why."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text(config)
    f = tmp_path / "pb.yaml"
    f.write_text(job())
    rc, out, err = cli("check", str(f), "--ssh-config", str(cfg), "--runs-dir", str(tmp_path / "runs"))
    assert rc == 2 and "Traceback" not in out + err
    assert f"ddptui: ssh_config {cfg}:{line}: cannot use it: {words}" in err
    assert not (tmp_path / "runs").exists()


def test_an_env_value_over_the_kernels_limit(tmp_path: Path) -> None:
    refused(tmp_path, job("  env: {BIG: " + "x" * 140_000 + "}\n"), (5, 14), "the kernel refuses a variable")


def test_sane_values_still_load(tmp_path: Path) -> None:
    f = tmp_path / "pb.yaml"
    f.write_text(HEAD + "nodes:\n  - {name: gpu01, host: 'fe80::1%eth0', user: svc.train@corp}\n  - gpu[02-03]\n"
                 "job: {script: builtin:smoke, stop_grace: 30, rdzv_timeout: 604800, env: {A: '=', B: <<}}\n")
    pb = load_playbook(f)
    assert [n.name for n in pb.nodes] == ["gpu01", "gpu02", "gpu03"] and pb.job.env == (("A", "="), ("B", "<<"))
    assert sys.getrecursionlimit() >= 1000


def test_ssh_config_dev_null_means_no_config_as_with_ssh_F(tmp_path: Path) -> None:
    """`ssh -F /dev/null` is how one says "no config"; it was refused as "no such file"."""
    f = tmp_path / "pb.yaml"
    f.write_text(job(nodes="nodes:\n  - {name: a, host: 127.0.0.1, port: 1}\n"))
    rc, out, err = cli("check", str(f), "--ssh-config", "/dev/null", "--runs-dir", str(tmp_path / "runs"))
    assert rc == 1, (rc, out, err)  # it got as far as the node: nothing listens on port 1
    assert "connection refused by 127.0.0.1:1" in out + err and "Traceback" not in out + err


@pytest.mark.parametrize("which,words", [("missing", "no such file"), ("dir", "is a directory")])
def test_an_ssh_config_that_is_not_a_file(tmp_path: Path, which: str, words: str) -> None:
    f = tmp_path / "pb.yaml"
    f.write_text(job())
    cfg = tmp_path / which
    if which == "dir":
        cfg.mkdir()
    rc, out, err = cli("check", str(f), "--ssh-config", str(cfg), "--runs-dir", str(tmp_path / "runs"))
    assert rc == 2 and "Traceback" not in out + err
    assert f"ddptui: --ssh-config {cfg}: {words}" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("target,words", [("loop.yaml", "cannot read: Too many levels of symbolic links"),
                                          ("gone.yaml", "is a symbolic link to gone.yaml, which does not exist")])
def test_a_link_that_leads_nowhere_says_so(tmp_path: Path, target: str, words: str) -> None:
    """Both were "no such playbook file", about a file the user can see in `ls`."""
    f = tmp_path / "loop.yaml"
    f.symlink_to(target)
    for command in ("validate", "check"):
        rc, out, err = cli(command, str(f), "--runs-dir", str(tmp_path / "runs"))
        assert rc == 2 and "Traceback" not in out + err
        assert f"{f}:1:1: {words}" in err, err


def test_the_common_flags_may_come_before_the_command(tmp_path: Path) -> None:
    """`ddptui --runs-dir X check PB` (git's order) was "unrecognized arguments: PB", exit 2."""
    f = tmp_path / "pb.yaml"
    f.write_text(job(nodes="nodes:\n  - {name: a, host: 127.0.0.1, port: 1}\n"))
    rc, out, err = cli("--runs-dir", str(tmp_path / "runs"), "--ssh-config=/dev/null", "check", str(f))
    assert rc == 1 and "connection refused by 127.0.0.1:1" in out + err, (rc, out, err)
    assert len(list((tmp_path / "runs").iterdir())) == 1  # the run went where the flag said
    with pytest.raises(SystemExit) as e:  # anything else is still the parser's to refuse
        cli("--bogus", "check", str(f))
    assert e.value.code == 2


def test_master_without_nodes_is_said_only_where_no_nodes_are_given(tmp_path: Path) -> None:
    """A bad hostlist in `nodes:` also got "master is named but the nodes are not: the allocation
    names them", words for a Slurm playbook with no nodes, about an ssh one that names them."""
    refused(tmp_path, HEAD + "nodes: node[02-x]\nmaster: node09\njob: {script: builtin:smoke}\n", (2, 13),
            "bad hostlist 'node[02-x]' in nodes")
    rc, out, err = cli("validate", str(tmp_path / "pb.yaml"))
    assert "master is named" not in err and "1 problem;" in err
    f = tmp_path / "slurm.yaml"
    f.write_text(HEAD + "transport: slurm\nmaster: node09\njob: {script: builtin:smoke}\n")
    rc, out, err = cli("validate", str(f))
    assert rc == 2 and f"{f}:3:9: master is named but the nodes are not: the allocation names them" in err
