"""Build the transport a node asks for."""

from __future__ import annotations

from collections.abc import Callable

from ..playbook.model import Playbook
from .base import Transport
from .local import LocalTransport
from .settings import SSHSettings

__all__ = ["SSHSettings", "make_factory"]


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
