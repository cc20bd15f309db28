"""The states a step and a node go through, as enums (their values are the words in JSON)."""

from __future__ import annotations

from enum import Enum


class _Words(str, Enum):
    """A str enum whose str() and format() are its value (enum.StrEnum is 3.11+)."""

    __str__ = str.__str__
    __format__ = str.__format__


class StepState(_Words):
    PENDING = "pending"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"

    @property
    def done(self) -> bool:
        """Passed or skipped: a run continues past it."""
        return self in (StepState.PASSED, StepState.SKIPPED)


class NodeStatus(_Words):
    PENDING = "pending"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    UNREACHABLE = "unreachable"
    LAUNCHING = "launching"
    RUNNING = "running"
    EXITED = "exited"
    FAILED = "failed"
    LOST = "lost"
    STOPPED = "stopped"
    DETACHED = "detached"

    @property
    def bad(self) -> bool:
        """A state the run's verdict names: the node did not do its part."""
        return self in (NodeStatus.UNREACHABLE, NodeStatus.FAILED, NodeStatus.LOST)
