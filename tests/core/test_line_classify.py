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


def test_torch_log_prefixes_fold_to_level_time_and_source():
    from ddptui.core.logs.classify import fold, line_kind

    raw = ("I1201 13:37:48.503000 31418 /venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/"
           "api.py:254] [default] Starting worker group")
    assert fold(raw) == "I1201 13:37:48 server/api] [default] Starting worker group"
    warn = "[default0]:W1201 13:37:48.5 77 torch/csrc/distributed/c10d/socket.cpp:1040] [c10d] failed to connect"
    assert fold(warn) == "[default0]:W1201 13:37:48 c10d/socket] [c10d] failed to connect"
    assert line_kind(fold(warn)) == line_kind(warn) == "warn" and line_kind(fold(raw)) == "info"
    for other in ("plain", "[default0]:ddptui-smoke result rank=0", "I am not a glog line] at all", ""):
        assert fold(other) == other
