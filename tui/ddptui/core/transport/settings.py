"""How this ddptui process makes ssh connections: small, so that the TUI's first screen needs no transport."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class SSHSettings:
    """How ssh connections are made for this ddptui process (from the command line or the TUI)."""

    ssh_config: Path | None = None  # default ~/.ssh/config
    accept_new_host_keys: bool = False
    # Asked when a host key is unknown: (node, hostname, key type, fingerprint) -> accept?
    confirm_host_key: Callable[[str, str, str, str], bool] | None = None
    # Asked for a key file's passphrase: (node, key path) -> passphrase or None.
    ask_passphrase: Callable[[str, str], str | None] | None = None
