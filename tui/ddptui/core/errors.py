"""One error type per failure a user can act on.

The CLI and the UI each turn these into words in exactly one place; nothing below them prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class DdptuiError(Exception):
    """Base class: something the user can act on (never a bug)."""


@dataclass(frozen=True)
class Problem:
    """One problem in an input file, with its position (1-based line and column)."""

    path: str
    line: int
    col: int
    message: str
    hint: str = ""
    source_line: str = ""
    width: int = 1

    def location(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"

    def render(self) -> str:
        """`path:line:col: message`, then the offending line with a caret, then the hint."""
        out = [f"{self.location()}: {self.message}"]
        if self.source_line:
            gutter = f"{self.line:>5} | "
            out.append(gutter + self.source_line.rstrip("\n"))
            out.append(" " * (len(gutter) - 2) + "| " + " " * (self.col - 1) + "^" * max(1, self.width))
        if self.hint:
            out.append(f"      hint: {self.hint}")
        return "\n".join(out)


@dataclass
class PlaybookError(DdptuiError):
    """A playbook that cannot be used; carries every problem found, not just the first."""

    path: str
    problems: list[Problem] = field(default_factory=list)

    def __str__(self) -> str:
        n = len(self.problems)
        return f"{self.path}: {n} problem{'s' if n != 1 else ''}"


class StepFailed(DdptuiError):
    """A step did not pass; the message says why in words."""


class UsageError(DdptuiError):
    """A flag, a file or an argument that cannot be used (exit code 2)."""


@dataclass
class NodeError(DdptuiError):
    """A node that cannot be used: the words say why and what to do."""

    node: str
    reason: str
    kind: str = "error"  # timeout, refused, dns, auth, hostkey-unknown, hostkey-changed, jump, ...

    def __str__(self) -> str:
        return f"{self.node}: {self.reason}"


@dataclass
class UnknownHostKey(NodeError):
    """The node's host key is not in known_hosts; the user may accept the fingerprint shown."""

    hostname: str = ""
    key_type: str = ""
    fingerprint: str = ""
    key_base64: str = ""
    known_hosts: str = ""


@dataclass
class ChangedHostKey(NodeError):
    """The node presented a key other than the one in known_hosts. Never accepted."""

    hostname: str = ""
    fingerprint: str = ""
    expected_fingerprint: str = ""
    known_hosts: str = ""
