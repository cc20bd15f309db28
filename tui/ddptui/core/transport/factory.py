"""Build the transport a node asks for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

from ..playbook.model import Playbook
from .base import Transport
from .local import LocalTransport


@dataclass
class SSHSettings:
    """How ssh connections are made for this ddptui process (from the command line or the TUI)."""

    ssh_config: Path | None = None  # default ~/.ssh/config
    accept_new_host_keys: bool = False
    # Asked when a host key is unknown: (node, hostname, key type, fingerprint) -> accept?
    confirm_host_key: Callable[[str, str, str, str], bool] | None = None
    # Asked for a key file's passphrase: (node, key path) -> passphrase or None.
    ask_passphrase: Callable[[str, str], str | None] | None = None


def make_factory(settings: SSHSettings | None = None) -> Callable[[Playbook, str], Transport]:
    settings = settings or SSHSettings()

    def factory(pb: Playbook, node: str) -> Transport:
        spec = next(n for n in pb.nodes if n.name == node)
        if spec.transport == "local":
            return LocalTransport(node)
        if spec.transport == "slurm":
            from .slurm import SlurmTransport

            s = pb.slurm
            if s is None or not s.job:
                raise ValueError("a slurm node is reached only after the allocate step")
            return SlurmTransport(node, s.job, pb.ssh.command_timeout, s.gpus_per_node)
        from .ssh import SSHTransport  # paramiko costs ~0.14 s to import: only when needed

        return SSHTransport(spec, pb.ssh, settings)

    return factory
