"""Which ciphers ddptui offers a node: AES-GCM first (the cheapest for paramiko to read a flood
through), then AES-CTR; ssh_config's `Ciphers` read as OpenSSH reads it. The negotiation with a
real sshd is in tests/cluster/test_ssh.py."""

from __future__ import annotations

from pathlib import Path

import paramiko

from ddptui.core.playbook.model import SSHOptions
from ddptui.core.transport.ssh import DISABLED_ALGORITHMS
from ddptui.core.transport.ssh_config import CIPHERS, ciphers, resolve

GCM = ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com"]
CTR = ["aes128-ctr", "aes192-ctr", "aes256-ctr"]


def test_without_ciphers_in_ssh_config_gcm_comes_first_then_ctr() -> None:
    assert ciphers(None) == GCM + CTR


def test_every_default_is_one_paramiko_offers_and_none_is_refused() -> None:
    offered = [c for c in paramiko.Transport._preferred_ciphers if c not in DISABLED_ALGORITHMS["ciphers"]]
    assert set(CIPHERS) <= set(offered)


def test_a_list_replaces_ours() -> None:
    assert ciphers("aes256-ctr,aes128-ctr") == ["aes256-ctr", "aes128-ctr"]


def test_plus_appends_minus_removes_with_wildcards_caret_puts_first() -> None:
    assert ciphers("+aes128-cbc") == GCM + CTR + ["aes128-cbc"]  # appended; the transport refuses CBC itself
    assert ciphers("-*-gcm@openssh.com") == CTR
    assert ciphers("-aes128-gcm@openssh.com,aes192-ctr") == ["aes256-gcm@openssh.com", "aes128-ctr", "aes256-ctr"]
    assert ciphers("^aes256-ctr") == ["aes256-ctr"] + GCM + ["aes128-ctr", "aes192-ctr"]


def test_ssh_config_ciphers_reach_the_target(tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host strict\n  Ciphers aes256-ctr\nHost *\n  User me\n")
    conf = paramiko.SSHConfig.from_path(str(cfg))
    assert resolve("strict", conf, SSHOptions()).ciphers == ["aes256-ctr"]
    assert resolve("other", conf, SSHOptions()).ciphers == GCM + CTR
