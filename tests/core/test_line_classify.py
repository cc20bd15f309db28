"""Log line classification: the kinds the panes colour by, and the filters they cycle through."""

from ddptui.core.logs.classify import filter_cycle, line_kind, line_matches


def test_line_kinds() -> None:
    assert line_kind("x NCCL WARN y") == "warn" and line_kind("W1201 12:00 foo") == "warn"
    assert line_kind("RuntimeError: boom") == "error" and line_kind("x NCCL INFO y") == "info"
    assert line_kind("ddptui-smoke result host=a") == "result" and line_kind("hello") == "plain"
    assert line_kind("$ torchrun --nnodes=2") == "command"


def test_filters() -> None:
    assert filter_cycle(2) == ["all", "NCCL", "warnings+errors", "rank 0", "rank 1"]
    assert line_matches("anything", "all")
    assert line_matches("a NCCL INFO b", "NCCL") and not line_matches("plain", "NCCL")
    assert line_matches("Traceback (most recent call last):", "warnings+errors")
    assert not line_matches("plain", "warnings+errors")
    assert line_matches("[default1]:hello", "rank 1") and not line_matches("[default0]:hello", "rank 1")
