"""TEST DOUBLE, named as such: a node's transport that answers preflight's commands with what the
namespace cluster's nodes answered (tests/data/recorded/probe/: the probe script's output and the
software probe's JSON, recorded over ssh), so that preflight's own code reads and judges real
output. The port check's listener and connect answer as a test tells them to."""

from __future__ import annotations

import json
from pathlib import Path

from ddptui.core.checks.probe import BEGIN, CONNECT, LISTENER
from ddptui.core.checks.software import PROBE
from ddptui.core.transport.base import CommandResult

RECORDED = Path(__file__).resolve().parent.parent / "data" / "recorded" / "probe"
MASTER_ADDR = "10.213.0.2"  # node02's address on the cluster the probes were recorded on
SOFTWARE = json.loads((RECORDED / "software.json").read_text())


class RecordedNode:
    """node02, node03 or node04 as recorded; `port`: (stdout, rc) of its port-check command."""

    kind = "ssh"
    address = "127.0.0.1"  # the login node's ping goes to this machine: the recorded nodes are not up

    def __init__(self, name: str, port: tuple[str, int] | None = None) -> None:
        self.name = name
        self.port = port

    def run(self, argv, shell=None, env=None, timeout=None) -> CommandResult:
        if shell is not None and BEGIN in shell:
            return CommandResult((), 0, (RECORDED / f"{self.name}.txt").read_text(), "", 0.1)
        if PROBE in argv:
            return CommandResult(tuple(argv), 0, json.dumps(SOFTWARE[self.name]) + "\n", "", 0.1)
        if LISTENER in argv or CONNECT in argv:
            default = ("listening\naccepted 10.213.0.3\naccepted 10.213.0.4\ndone accepted=2", 0) if LISTENER in argv \
                else (f"connected {MASTER_ADDR}:29500", 0)
            out, rc = self.port or default
            return CommandResult(tuple(argv), rc, out, "", 0.1)
        raise AssertionError(f"the recorded node {self.name} has no answer to {argv!r}")
