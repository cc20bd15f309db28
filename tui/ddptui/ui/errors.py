"""Errors into words for the TUI: the one place a worker's exception becomes a notification.

A `DdptuiError` is something the user can act on: its own words (a PlaybookError lists every
problem). Anything else is a bug: "internal error: ...". Either way the app keeps running.
"""

from __future__ import annotations

from textual.notifications import SeverityLevel

from ..core.errors import DdptuiError, PlaybookError


def error_words(error: BaseException) -> tuple[str, SeverityLevel]:
    """The notification text and severity for an exception raised in a worker."""
    if isinstance(error, PlaybookError):
        return "\n".join([str(error)] + [p.render() for p in error.problems]), "error"
    if isinstance(error, DdptuiError):
        return str(error), "error"
    return f"internal error: {type(error).__name__}: {error}", "error"
