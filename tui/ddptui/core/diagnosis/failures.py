"""Never leave a failed node unexplained: the failure signs each node showed (signs.FAILURE_SIGNS)
and its exit code, kept so that `unrecognized-failure` can say what failed when no rule knew why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .catalog import CATALOG
from .classify import signal_name, signal_of_exit
from .model import Evidence, Finding
from .signs import CONSEQUENCE, Sign


@dataclass
class NodeFailure:
    traceback_at: int = 0  # the line of the first "Traceback (most recent call last)"
    traceback_line: str = ""  # and its text: the evidence of a traceback cut before its exception
    exception: tuple[int, str] | None = None  # the first traceback's exception line (or the first one seen)
    own: tuple[int, str] | None = None  # the first exception that no other rank's failure caused (CONSEQUENCE)
    warn: tuple[int, str] | None = None  # the first NCCL WARN that is no known notice
    exit: tuple[int, str] | None = None  # the first line that says the exit code or the signal
    rc: int | None = None  # the exit code the runner reported (node_exited)
    stopped: bool = False  # a traceback ended in a benign exception (the agent was told to stop)

    @property
    def failed(self) -> bool:
        """Any failure sign; a traceback cut before its exception line counts, one that ends in a stop does not."""
        return bool(self.exception or self.warn or self.exit or self.rc or (self.traceback_at and not self.stopped))


@dataclass
class Failures:
    nodes: dict[str, NodeFailure] = field(default_factory=dict)

    def sign(self, node: str, sign: Sign, n: int, line: str, m: re.Match) -> None:
        nf = self.nodes.setdefault(node, NodeFailure())
        if any(b.search(line) for b in sign.compiled):
            nf.stopped = nf.stopped or sign.kind == "exception"
            return
        if sign.ok_values and m.groups() and m.group(1) in sign.ok_values:
            return
        text = line.strip()
        if sign.kind == "traceback":
            if not nf.traceback_at:
                nf.traceback_at, nf.traceback_line = n, text
        elif sign.kind == "exception":
            # the exception line that ends the first traceback wins over one seen before it
            if nf.exception is None or (nf.traceback_at and nf.exception[0] < nf.traceback_at):
                nf.exception = (n, text)
            if nf.own is None and not CONSEQUENCE.search(text):  # in whatever order the ranks' lines came
                nf.own = (n, text)
        elif sign.kind == "warn":
            nf.warn = nf.warn or (n, text)
        elif sign.kind == "exit":
            nf.exit = nf.exit or (n, text)

    def exited(self, node: str, rc: int) -> None:
        nf = self.nodes.setdefault(node, NodeFailure())
        nf.rc = rc

    def own_error(self, node: str) -> bool:
        """A rank on the node raised an error of its own (the training script's), not only ones that
        another rank's failure caused (signs.CONSEQUENCE)."""
        nf = self.nodes.get(node)
        return bool(nf and nf.own)

    def unexplained(self, findings: Iterable[Finding]) -> tuple[list[str], str, list[Evidence]]:
        """The nodes that failed with none of `findings` of their own, what each showed, and the evidence.

        A finding covers the nodes it names and those its evidence comes from (a cross rule over
        the hosts of one log names the hosts); a consequence (a peer died first) not a node whose
        first error is its own: that error is what the user needs to read."""
        explained = {n for f in findings for n in [*f.nodes, *(e.node for e in f.evidence)]
                     if not (_is_consequence(f.id) and self.own_error(n))}
        nodes, parts, evidence = [], [], []
        for node, nf in self.nodes.items():
            if not nf.failed or node in explained:
                continue
            nodes.append(node)
            exc = nf.own or nf.exception  # the node's own error before the broken link it caused
            ev = [Evidence(node, it[0], it[1]) for it in (nf.warn, exc, nf.exit) if it]
            if not ev and nf.traceback_at:  # all there is: a traceback, its exception line cut off
                ev.append(Evidence(node, nf.traceback_at, nf.traceback_line))
            if nf.rc:
                sig = signal_of_exit(nf.rc)
                ev.append(Evidence(node, 0, f"exit code {nf.rc}" + (f" ({signal_name(sig)})" if sig else "")))
            evidence += ev
            first = exc or nf.warn or nf.exit
            if first:
                parts.append(said(node, first[1]))
            elif nf.traceback_at and not nf.rc:
                parts.append(f"{node}: a traceback, cut before its exception")
            else:
                parts.append(f"{node}: {ev[-1].text if ev else 'failed'}")
        return nodes, "; ".join(parts), evidence


_RANK_HEAD = re.compile(r"^(?:\[default\d+\]:)?\[rank(\d+)\]:\s*")  # torchrun --tee's, then torch's own
_TEE_HEAD = re.compile(r"^\[default\d+\]:\s*")


def _is_consequence(fid: str) -> bool:
    cause = CATALOG.get(fid)
    return bool(cause and cause.consequence)


def said(node: str, line: str) -> str:
    """A failure line as a summary says it: `node02 rank 3: ValueError: ...` for a rank's line that
    torchrun (`[default1]:`) and torch (`[rank3]:`) prefixed; the line as it is otherwise."""
    m = _RANK_HEAD.match(line)
    if m is not None:
        return f"{node} rank {m.group(1)}: {line[m.end():][:160]}"
    return f"{node}: {_TEE_HEAD.sub('', line)[:160]}"
