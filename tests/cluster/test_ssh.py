"""The ssh transport against real sshd's on the namespace cluster."""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ddptui.core.errors import ChangedHostKey, NodeError, UnknownHostKey
from ddptui.core.playbook.model import NodeSpec, SSHOptions
from ddptui.core.transport.base import LaunchSpec
from ddptui.core.transport.factory import SSHSettings
from ddptui.core.transport.ssh import SSHTransport
from tests.cluster.conftest import NODES, cluster_playbook
from tests.cluster.netns import Cluster

OPTS = SSHOptions(connect_timeout=3, command_timeout=30)


def transport(cl: Cluster, name: str, cfg: Path | None = None, **settings) -> SSHTransport:
    return SSHTransport(NodeSpec(name), OPTS, SSHSettings(ssh_config=cfg or cl.ssh_config, **settings))


def config_with(cl: Cluster, tmp_path: Path, known_hosts: Path | None = None, identity: Path | None = None) -> Path:
    text = cl.ssh_config.read_text()
    if known_hosts:
        text = text.replace(str(cl.known_hosts), str(known_hosts))
    if identity:
        text = text.replace(str(cl.client_key), str(identity))
    p = tmp_path / "ssh_config"
    p.write_text(text)
    return p


def test_commands_on_three_nodes_at_once(cluster: Cluster, ssh_env: Path) -> None:
    ts = [transport(cluster, n) for n in NODES]
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda t: t.connect(), ts))
        results = list(pool.map(lambda t: t.run(["sh", "-c", "hostname; ip -j route get 10.213.0.2"], timeout=20), ts))
    for name, t, r in zip(NODES, ts, results):
        assert r.rc == 0, r.stderr
        host, route = r.stdout.splitlines()
        assert host == name
        inside = cluster.ns_exec(name, "ip", "-j", "route", "get", "10.213.0.2").stdout
        assert json.loads(route)[0]["dev"] == json.loads(inside)[0]["dev"]
        assert json.loads(route)[0].get("prefsrc") == json.loads(inside)[0].get("prefsrc")
        assert t.address == cluster.nodes[name].ip
        t.close()


def test_env_reaches_the_command_through_stdin_not_argv(cluster: Cluster, ssh_env: Path) -> None:
    t = transport(cluster, "node02")
    t.connect()
    r = t.run(["sh", "-c", 'echo "$NCCL_IB_DISABLE|$WEIRD"; for p in $$ $PPID; do tr "\\0" " " < /proc/$p/cmdline; echo; done'],
              env={"NCCL_IB_DISABLE": "1", "WEIRD": "a b'c\"$HOME", "API_TOKEN": "s3cr3t-xyz"}, timeout=20)
    value, *cmdlines = r.stdout.splitlines()
    assert value == "1|a b'c\"$HOME"
    assert len(cmdlines) == 2 and not any("s3cr3t-xyz" in c for c in cmdlines)
    # a shell script with env, quoted once at the transport edge
    r = t.run([], shell="echo $((6*7)) \"$X\"", env={"X": "; rm -rf /"}, timeout=20)
    assert r.stdout.strip() == "42 ; rm -rf /"
    t.close()


def test_many_commands_over_one_connection(cluster: Cluster, ssh_env: Path) -> None:
    t = transport(cluster, "node03")
    t.connect()
    with ThreadPoolExecutor(16) as pool:  # more than sshd's MaxSessions (10): they queue, none fails
        rs = list(pool.map(lambda i: t.run(["echo", str(i)], timeout=30), range(40)))
    assert [r.stdout.strip() for r in rs] == [str(i) for i in range(40)]
    t.close()


def test_command_timeout(cluster: Cluster, ssh_env: Path) -> None:
    t = transport(cluster, "node02")
    t.connect()
    r = t.run(["sleep", "30"], timeout=1)
    assert r.rc is None  # cut at its timeout: a `sleep 30` waited for would have ended with rc 0
    t.close()


def test_proxyjump_through_the_jump_host(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    t = transport(cluster, "inner")
    t.connect()
    r = t.run(["hostname"], timeout=20)
    assert r.stdout.strip() == "inner"
    t.close()
    # and the login node really cannot reach it without the hop (its subnet is unreachable here)
    cfg = tmp_path / "nojump"
    cfg.write_text(cluster.ssh_config.read_text().replace("  ProxyJump jump\n", "  ProxyJump none\n"))
    with pytest.raises(NodeError) as ei:
        transport(cluster, "inner", cfg).connect()
    assert ei.value.kind == "unreachable" and "10.214.0.2:22" in ei.value.reason


def test_jump_host_failure_is_named(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "badjump"
    cfg.write_text(cluster.ssh_config.read_text().replace("  ProxyJump jump\n", "  ProxyJump nosshd\n"))
    with pytest.raises(NodeError) as ei:
        transport(cluster, "inner", cfg).connect()
    assert ei.value.kind == "jump" and "jump host nosshd failed" in ei.value.reason
    assert "connection refused" in ei.value.reason


def test_unknown_host_key_is_refused_then_accepted_with_the_flag_and_saved(cluster: Cluster, ssh_env: Path,
                                                                          tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    cfg = config_with(cluster, tmp_path, known_hosts=kh)
    with pytest.raises(UnknownHostKey) as ei:
        transport(cluster, "node02", cfg).connect()
    fp = subprocess.run(["ssh-keygen", "-lf", str(cluster.root / "node02" / "ssh_host_ed25519_key.pub")],
                        capture_output=True, text=True).stdout.split()[1]
    assert ei.value.fingerprint == fp and fp in ei.value.reason
    assert kh.read_text() == ""  # refusing saves nothing
    t = transport(cluster, "node02", cfg, accept_new_host_keys=True)
    t.connect()
    t.close()
    assert kh.read_text().split() == ["10.213.0.2", *cluster.nodes["node02"].host_key_pub.split()]
    transport(cluster, "node02", cfg).connect()  # known now, without the flag


def test_the_tui_callback_sees_the_fingerprint(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    cfg = config_with(cluster, tmp_path, known_hosts=kh)
    asked = []
    t = transport(cluster, "node03", cfg, confirm_host_key=lambda *a: asked.append(a) or True)
    t.connect()
    t.close()
    assert asked and asked[0][0] == "node03" and asked[0][3].startswith("SHA256:")
    assert "10.213.0.3 ssh-ed25519" in kh.read_text()


def test_changed_host_key_is_refused_even_with_the_flag(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kh = tmp_path / "known_hosts"
    kh.write_text("10.213.0.4 " + " ".join(Path(f"{other}.pub").read_text().split()[:2]) + "\n")
    before = kh.read_text()
    cfg = config_with(cluster, tmp_path, known_hosts=kh)
    for accept in (False, True):
        with pytest.raises(ChangedHostKey) as ei:
            transport(cluster, "node04", cfg, accept_new_host_keys=accept,
                      confirm_host_key=lambda *a: True).connect()
        assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in ei.value.reason
        hint = f"ssh-keygen -f {kh} -R 10.213.0.4"  # the file it is in, not ~/.ssh/known_hosts
        assert hint in ei.value.reason
    assert kh.read_text() == before
    subprocess.run(hint.split(), check=True, capture_output=True)  # the hint does what it says
    assert "10.213.0.4" not in kh.read_text()
    t = transport(cluster, "node04", cfg, accept_new_host_keys=True)
    t.connect()
    t.close()


def node_key(cl: Cluster, node: str = "node02") -> str:
    return cl.nodes[node].host_key_pub  # "ssh-ed25519 AAAA..."


def test_a_revoked_host_key_is_refused_even_when_listed_and_with_the_flag(cluster: Cluster, ssh_env: Path,
                                                                         tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(cluster.known_hosts.read_text() + f"@revoked * {node_key(cluster)}\n")
    before = kh.read_text()
    line = len(before.splitlines())
    cfg = config_with(cluster, tmp_path, known_hosts=kh)
    for accept in (False, True):
        with pytest.raises(NodeError) as ei:
            transport(cluster, "node02", cfg, accept_new_host_keys=accept, confirm_host_key=lambda *a: True).connect()
        assert ei.value.kind == "hostkey-revoked" and "REVOKED HOST KEY" in ei.value.reason
        assert f"{kh}:{line}" in ei.value.reason
    transport(cluster, "node03", cfg).connect()  # another host's key is not touched by it
    kh.write_text(f"@revoked * {node_key(cluster)}\n")  # revoked and otherwise unknown
    with pytest.raises(NodeError) as ei:
        transport(cluster, "node02", cfg, accept_new_host_keys=True).connect()
    assert ei.value.kind == "hostkey-revoked"
    assert kh.read_text() == f"@revoked * {node_key(cluster)}\n"  # not saved as trusted


def test_a_cert_authority_host_is_refused_in_words(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    ca = tmp_path / "ca"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ca)], check=True)
    kh = tmp_path / "known_hosts"
    kh.write_text("@cert-authority 10.213.0.* " + " ".join(Path(f"{ca}.pub").read_text().split()[:2]) + "\n")
    before = kh.read_text()
    cfg = config_with(cluster, tmp_path, known_hosts=kh)
    for accept in (False, True):
        with pytest.raises(NodeError) as ei:
            transport(cluster, "node02", cfg, accept_new_host_keys=accept).connect()
        assert ei.value.kind == "hostkey-cert" and f"{kh}:1" in ei.value.reason
        assert "cannot check host certificates" in ei.value.reason and "ssh-keyscan" in ei.value.reason
    assert kh.read_text() == before
    kh.write_text(before + f"10.213.0.2 {node_key(cluster)}\n")  # the plain key, as the words say
    transport(cluster, "node02", cfg).connect()


def test_a_hashed_known_hosts_entry_is_accepted(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(cluster.known_hosts.read_text())
    subprocess.run(["ssh-keygen", "-H", "-f", str(kh)], check=True, capture_output=True)
    assert "10.213.0.2" not in kh.read_text() and kh.read_text().startswith("|1|")
    t = transport(cluster, "node02", config_with(cluster, tmp_path, known_hosts=kh))
    t.connect()
    assert t.run(["hostname"], timeout=10).stdout.strip() == "node02"
    t.close()


def _forward_once(to: tuple[str, int]) -> int:
    """A TCP port on 127.0.0.1 that forwards one connection to `to`: sshd on another port."""
    import socket
    import threading

    srv = socket.create_server(("127.0.0.1", 0))

    def pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            b.close()

    def serve() -> None:
        c, _ = srv.accept()
        srv.close()
        up = socket.create_connection(to)
        threading.Thread(target=pump, args=(c, up), daemon=True).start()
        pump(up, c)

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def test_a_bracketed_host_port_entry_is_accepted(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    cfg = config_with(cluster, tmp_path, known_hosts=kh)
    port = _forward_once(("10.213.0.2", 22))
    kh.write_text(f"127.0.0.1 {node_key(cluster, 'node03')}\n")  # port 22's entry does not count
    with pytest.raises(UnknownHostKey):
        SSHTransport(NodeSpec("node02", host="127.0.0.1", port=port), OPTS, SSHSettings(ssh_config=cfg)).connect()
    port = _forward_once(("10.213.0.2", 22))
    kh.write_text(f"[127.0.0.1]:{port} {node_key(cluster)}\n")
    t = SSHTransport(NodeSpec("node02", host="127.0.0.1", port=port), OPTS, SSHSettings(ssh_config=cfg))
    t.connect()
    assert t.run(["hostname"], timeout=10).stdout.strip() == "node02"
    t.close()


def test_what_the_ssh_layer_notes_is_shown_as_notices(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                       runs_dir: Path) -> None:
    from ddptui.core.events import Notice
    from ddptui.core.playbook.loader import load_playbook
    from ddptui.core.runbook import Runbook
    from ddptui.core.transport.factory import make_factory

    kh = tmp_path / "known_hosts"
    kh.write_text("@frobnicate * ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZha2U=\n"
                  + "\n".join(x for x in cluster.known_hosts.read_text().splitlines() if "10.213.0.3" not in x) + "\n")
    cfg = config_with(cluster, tmp_path, known_hosts=kh)
    seen: list = []
    pb = load_playbook(cluster_playbook(tmp_path, ["node02", "node03"], steps="steps: [connect]"))
    rb = Runbook(pb, seen.append, runs_dir, make_factory(SSHSettings(ssh_config=cfg, accept_new_host_keys=True)))
    assert rb.run_step("connect")
    rb.close()
    notices = [(e.level, e.text) for e in seen if isinstance(e, Notice)]
    skipped = [t for lv, t in notices if lv == "warning" and f"{kh}:1: @frobnicate lines are not supported" in t]
    assert len(skipped) == 1  # both nodes read it; said once
    assert any(lv == "info" and t.startswith("added 10.213.0.3 (ssh-ed25519 SHA256:") for lv, t in notices)


def test_down_node_times_out_while_the_others_finish(cluster: Cluster, ssh_env: Path) -> None:
    names = ["node02", "dead", "node03"]
    ts = {n: transport(cluster, n) for n in names}

    done: list[str] = []  # the order the nodes' answers came in

    def one(n):
        try:
            ts[n].connect()
            r = ts[n].run(["hostname"], timeout=10).stdout.strip()
        except NodeError as e:
            r = e
        done.append(n)
        return n, r

    with ThreadPoolExecutor(3) as pool:
        out = dict(pool.map(one, names))
    assert out["node02"] == "node02" and out["node03"] == "node03"
    assert done[-1] == "dead"  # the others answered while it was still being waited for
    err = out["dead"]
    assert isinstance(err, NodeError) and err.kind == "timeout" and "timed out after 3 s" in err.reason


def test_refused_and_unresolvable(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    with pytest.raises(NodeError) as ei:
        transport(cluster, "nosshd").connect()
    assert ei.value.kind == "refused" and "connection refused" in ei.value.reason
    t = SSHTransport(NodeSpec("ghost", host="no-such-host.invalid"), OPTS, SSHSettings(ssh_config=cluster.ssh_config))
    with pytest.raises(NodeError) as ei:
        t.connect()
    assert ei.value.kind == "dns" and "cannot resolve host name 'no-such-host.invalid'" in ei.value.reason


def test_auth_failure_names_the_key_it_tried(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "id_wrong"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong)], check=True)
    fp = subprocess.run(["ssh-keygen", "-lf", f"{wrong}.pub"], capture_output=True, text=True).stdout.split()[1]
    with pytest.raises(NodeError) as ei:
        transport(cluster, "node02", config_with(cluster, tmp_path, identity=wrong)).connect()
    assert ei.value.kind == "auth"
    assert f"authentication failed for root@10.213.0.2:22; tried {wrong} ({fp})" == ei.value.reason


def test_gcm_is_negotiated_and_ssh_config_ciphers_are_honoured(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    t = transport(cluster, "node02")
    t.connect()
    assert t._t.remote_cipher == t._t.local_cipher == "aes128-gcm@openssh.com"  # the cheapest to read a flood through
    t.close()
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host node02\n  Ciphers aes256-ctr\n" + cluster.ssh_config.read_text())
    t = transport(cluster, "node02", cfg)
    t.connect()
    assert t._t.remote_cipher == "aes256-ctr" and t.run(["hostname"], timeout=10).stdout.strip() == "node02"
    t.close()
    cfg.write_text("Host node02\n  Ciphers chacha20-poly1305@openssh.com\n" + cluster.ssh_config.read_text())
    with pytest.raises(NodeError) as e:
        transport(cluster, "node02", cfg).connect()
    assert e.value.kind == "config" and "Ciphers" in e.value.reason and "aes128-gcm@openssh.com" in e.value.reason


def test_playbook_values_override_ssh_config(cluster: Cluster, ssh_env: Path) -> None:
    t = SSHTransport(NodeSpec("node02", host="10.213.0.3"), OPTS, SSHSettings(ssh_config=cluster.ssh_config,
                                                                             accept_new_host_keys=False))
    t.connect()  # node03's address under node02's config block: its key is known as 10.213.0.3
    assert t.run(["hostname"], timeout=10).stdout.strip() == "node03"
    t.close()


def test_a_launch_streams_and_stops_its_process_group(cluster: Cluster, ssh_env: Path) -> None:
    t = transport(cluster, "node03")
    t.connect()
    lines: list[str] = []
    code = ("import subprocess,sys,time\n"
            "subprocess.Popen([sys.executable,'-c','import time; time.sleep(300)'], start_new_session=True)\n"
            "for i in range(3): print('tick', i, flush=True); time.sleep(0.2)\n"
            "time.sleep(300)\n")
    import sys
    proc = t.start(LaunchSpec((sys.executable, "-c", code), {"A": "1"}, None, 2.0), lines.extend, sys.executable)
    assert proc.started.wait(10) and proc.pid
    deadline = time.time() + 10
    while len([x for x in lines if x.startswith("tick")]) < 3 and time.time() < deadline:
        time.sleep(0.05)
    assert [x for x in lines if x.startswith("tick")] == ["tick 0", "tick 1", "tick 2"]
    before = set(cluster.pids("node03"))
    assert proc.pid in before
    proc.stop()
    assert proc.wait(20) in (143, 137)
    time.sleep(0.3)
    assert proc.pid not in set(cluster.pids("node03"))
    t.close()


def test_a_dropped_connection_stops_the_job(cluster: Cluster, ssh_env: Path) -> None:
    import sys

    t = transport(cluster, "node04")
    t.connect()
    proc = t.start(LaunchSpec((sys.executable, "-c", "import time; time.sleep(300)"), {}, None, 2.0),
                   lambda _: None, sys.executable)
    assert proc.started.wait(10)
    pid = proc.pid
    assert pid in cluster.pids("node04")
    t.close()  # no stop: just the connection going away
    deadline = time.time() + 15
    while pid in cluster.pids("node04") and time.time() < deadline:
        time.sleep(0.1)
    assert pid not in cluster.pids("node04")


def test_a_key_with_a_passphrase(cluster: Cluster, ssh_env: Path, tmp_path: Path) -> None:
    locked = tmp_path / "id_locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "open sesame", "-f", str(locked)], check=True)
    auth = cluster.root / "client" / "authorized_keys"
    original = auth.read_text()
    auth.write_text(original + Path(f"{locked}.pub").read_text())
    try:
        cfg = config_with(cluster, tmp_path, identity=locked)
        with pytest.raises(NodeError) as ei:  # headless, nobody to ask
            transport(cluster, "node02", cfg).connect()
        assert f"tried {locked} (needs a passphrase)" in ei.value.reason
        with pytest.raises(NodeError) as ei:
            transport(cluster, "node02", cfg, ask_passphrase=lambda n, p: "wrong").connect()
        assert "(wrong passphrase)" in ei.value.reason
        asked = []
        t = transport(cluster, "node02", cfg, ask_passphrase=lambda n, p: asked.append((n, p)) or "open sesame")
        t.connect()
        assert t.run(["hostname"], timeout=10).stdout.strip() == "node02"
        assert asked == [("node02", str(locked))]
        t.close()
    finally:
        auth.write_text(original)


async def test_the_tui_asks_about_an_unknown_host_key(cluster: Cluster, ssh_env: Path, tmp_path: Path,
                                                      runs_dir: Path) -> None:
    from ddptui.ui.app import DdptuiApp
    from ddptui.ui.dialogs.host_key import HostKeyDialog
    from ddptui.ui.screens.playbook import PlaybookScreen

    kh = tmp_path / "known_hosts"
    cfg = config_with(cluster, tmp_path, known_hosts=kh)
    pb = cluster_playbook(tmp_path, ["node02"], steps="steps: [connect]")
    app = DdptuiApp(playbook=pb, runs_dir=runs_dir, ssh_settings=SSHSettings(ssh_config=cfg))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("r")
        for _ in range(200):  # the dialog comes from the connect worker
            await pilot.pause(0.05)
            if isinstance(app.screen, HostKeyDialog):
                break
        assert isinstance(app.screen, HostKeyDialog)
        text = " ".join(str(w.render()) for w in app.screen.query("Static"))
        fp = subprocess.run(["ssh-keygen", "-lf", str(cluster.root / "node02" / "ssh_host_ed25519_key.pub")],
                            capture_output=True, text=True).stdout.split()[1]
        assert fp in text and "10.213.0.2" in text
        assert str(app.screen.query_one("#fingerprint").render()) == fp  # whole, on a line of its own
        await pilot.click("#yes")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, PlaybookScreen)
        assert app.screen.runbook.states["connect"] == "passed"
    assert kh.read_text().startswith("10.213.0.2 ssh-ed25519 ")



def test_a_job_left_running_survives_the_connection(cluster: Cluster, ssh_env: Path) -> None:
    import sys

    t = transport(cluster, "node03")
    t.connect()
    code = "import os, time\nfor i in range(600):\n print('tick', i, os.environ['API_TOKEN'], flush=True); time.sleep(0.05)\n"
    log = f"/tmp/ddptui-detach-test-{time.time_ns()}.log"
    token = "tok-7c6d5e4f3a2b1c"  # the run's secret: the file on the node must not have it in clear
    proc = t.start(LaunchSpec((sys.executable, "-c", code), {"API_TOKEN": token}, None, 2.0, detach_log=log,
                              mask=("API_TOKEN",)), lambda _: None, sys.executable)
    assert proc.started.wait(10)
    assert proc.detach() and proc.detach_log == log
    t.close()  # ddptui quits: the connection goes away
    time.sleep(1.5)
    try:
        assert proc.pid in cluster.pids("node03")
        n1 = len(Path(log).read_text().splitlines())
        time.sleep(0.5)
        text = Path(log).read_text()
        assert len(text.splitlines()) > n1 > 0
        assert token not in text and text.count("***REDACTED:API_TOKEN***") >= n1
    finally:
        cluster.ns_exec("node03", "kill", "-TERM", "--", f"-{proc.pgid}", check=False)
        Path(log).unlink(missing_ok=True)
    deadline = time.time() + 10
    while proc.pid in cluster.pids("node03") and time.time() < deadline:
        time.sleep(0.1)
    assert proc.pid not in cluster.pids("node03")
