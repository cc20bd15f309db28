"""known_hosts as OpenSSH reads it: @revoked, @cert-authority, hashed names, [host]:port, patterns."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from ddptui.core.errors import NodeError, UnknownHostKey
from ddptui.core.transport.factory import SSHSettings
from ddptui.core.transport.known_hosts import KnownHosts, host_matches, lookup_name
from ddptui.core.transport.ssh_auth import check_host_key
from ddptui.core.transport.ssh_config import Target

KEY = paramiko.ECDSAKey.generate()
OTHER = paramiko.ECDSAKey.generate()


def line(names: str, key: paramiko.PKey = KEY) -> str:
    return f"{names} {key.get_name()} {key.get_base64()}\n"


class _T:
    closed = False

    def close(self) -> None:
        self.closed = True


def check(kh_file: Path, name: str = "10.0.0.1", port: int = 22, key: paramiko.PKey = KEY, **settings):
    target = Target(alias="n1", hostname="10.0.0.1", port=port, known_hosts_files=[kh_file])
    kh = KnownHosts.load([kh_file])
    return check_host_key("n1", SSHSettings(**settings), target, kh, lookup_name(name, port), key, _T())


def test_a_revoked_key_is_refused_even_when_listed_and_with_the_flag(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("# ours\n" + line("10.0.0.1") + "@revoked * " + line("")[1:])
    before = kh.read_text()
    for accept in (False, True):
        with pytest.raises(NodeError) as ei:
            check(kh, accept_new_host_keys=accept, confirm_host_key=lambda *a: True)
        assert ei.value.kind == "hostkey-revoked"
        assert "REVOKED HOST KEY" in ei.value.reason and f"{kh}:3" in ei.value.reason
        assert KEY.fingerprint in ei.value.reason
    assert kh.read_text() == before  # nothing saved
    with pytest.raises(NodeError, match="REVOKED"):  # unknown and revoked: still refused, not saved
        check(tmp_path / "known_hosts", name="10.0.0.9", accept_new_host_keys=True)
    assert kh.read_text() == before


def test_revoked_honours_host_patterns_and_other_keys_pass(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("@revoked 10.0.0.*,!10.0.0.1 " + line("")[1:] + line("10.0.0.1") + line("10.0.0.2", OTHER))
    assert check(kh) is None  # the negated pattern wins
    loaded = KnownHosts.load([kh])
    assert loaded.revoked("10.0.0.3", KEY) is not None and loaded.revoked("10.0.0.3", OTHER) is None
    assert loaded.revoked("10.0.1.3", KEY) is None


def test_cert_authority_hosts_are_refused_in_words_unless_their_plain_key_is_known(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("@cert-authority 10.0.0.* " + line("", OTHER)[1:])
    for accept in (False, True):
        with pytest.raises(NodeError) as ei:
            check(kh, accept_new_host_keys=accept, confirm_host_key=lambda *a: True)
        why = ei.value.reason
        assert ei.value.kind == "hostkey-cert" and f"{kh}:1" in why
        assert "cannot check host certificates" in why and "ssh-keyscan" in why and KEY.fingerprint in why
    assert "10.0.0.1 " not in kh.read_text()
    with pytest.raises(UnknownHostKey):  # a host the CA line does not cover is only unknown
        check(kh, name="10.9.9.9")
    kh.write_text(kh.read_text() + line("10.0.0.1"))
    assert check(kh) is None


def test_hashed_and_bracketed_port_entries(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    hashed = paramiko.HostKeys.hash_host("10.0.0.1")
    kh.write_text(line(hashed) + line("[10.0.0.1]:2222", OTHER))
    assert check(kh) is None
    assert check(kh, port=2222, key=OTHER) is None
    with pytest.raises(UnknownHostKey):
        check(kh, port=2200, key=OTHER)
    assert host_matches([hashed], "10.0.0.1") and not host_matches([hashed], "10.0.0.2")
    assert host_matches(["[10.0.0.1]:2222"], "[10.0.0.1]:2222") and not host_matches(["[10.0.0.1]:2222"], "1")


def test_unknown_markers_and_bad_lines_are_skipped_with_a_note(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("@frobnicate * " + line("")[1:] + "10.0.0.1 ssh-ed25519 !!!notbase64\n" + line("10.0.0.1"))
    loaded = KnownHosts.load([kh])
    assert any(f"{kh}:1: @frobnicate lines are not supported" in n for n in loaded.skipped)
    assert any(f"{kh}:2:" in n for n in loaded.skipped)
    assert loaded.verify("10.0.0.1", KEY) == "known"


def test_the_refusals_read_whole_through_the_redactor(tmp_path: Path) -> None:
    from ddptui.core.redact import Redactor

    kh = tmp_path / "known_hosts"
    kh.write_text("@revoked * " + line("")[1:])
    with pytest.raises(NodeError) as ei:
        check(kh, accept_new_host_keys=True)
    assert Redactor().text(ei.value.reason) == ei.value.reason  # headless prints it through one
    kh.write_text("@cert-authority * " + line("")[1:])
    with pytest.raises(NodeError) as ei:
        check(kh)
    assert Redactor().text(ei.value.reason) == ei.value.reason
