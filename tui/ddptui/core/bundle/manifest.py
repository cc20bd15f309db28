"""The hand-off file's format: its members, its manifest, its limits and its errors.

A bundle (`*.ddpt`) is a zip. `manifest.json` names every other member with its size and sha256,
says what is missing and why, and what was redacted (where, how many; never a value).
"""

from __future__ import annotations

from ..errors import DdptuiError

FORMAT = "ddptui-bundle"
FORMAT_VERSION = 1  # readers accept 1..FORMAT_VERSION and refuse newer ones
EXTENSION = ".ddpt"
MANIFEST = "manifest.json"

DEFAULT_MAX_SIZE = 25 * 1024 * 1024  # GitHub's attachment limit
NODE_CAP_MAX = 8 * 1024 * 1024  # bytes of one node's log kept in a bundle (head + tail), at most
NODE_CAP_MIN = 64 * 1024  # below this, the bundle is refused rather than cut further

# Members, beside manifest.json and logs/<node>.log|.times and revisions/<file>
PLAYBOOK = "playbook.yaml"
SUMMARY = "summary.json"
EVENTS = "events.jsonl"
PLAN = "plan.json"
CHECKS = "checks.json"
FINDINGS = "findings.json"

# What a reader accepts (a hostile file must not exhaust memory or disk)
READ_MAX_MEMBERS = 4096
READ_MAX_MEMBER = 256 * 1024 * 1024  # uncompressed bytes of one member
READ_MAX_TOTAL = 1024 * 1024 * 1024  # uncompressed bytes of all members
READ_MAX_RATIO = 200  # uncompressed/compressed above this (and above 1 MiB) is a zip bomb


class BundleError(DdptuiError):
    """A file that is not a bundle ddptui can read: bad input, exit 2, one line."""


class BundleRefused(DdptuiError):
    """`bundle` would not write: over the size cap, or a value it had to hide is still there (exit 1)."""


def elided_line(count: int, first: int, last: int, head: int, tail: int) -> str:
    return (f"[ddptui] … {count} lines elided (lines {first}-{last}); the bundle keeps the first {head} "
            f"and the last {tail} lines of this log …")
