"""Log line classification: the kinds the panes colour by, and the filters they cycle through."""

from ddptui.core.logs.classify import filter_cycle, is_launcher_chatter, line_kind, line_matches


def test_line_kinds() -> None:
    assert line_kind("x NCCL WARN y") == "warn" and line_kind("W1201 12:00 foo") == "warn"
    assert line_kind("RuntimeError: boom") == "error" and line_kind("x NCCL INFO y") == "info"
    assert line_kind("ddptui-smoke result host=a") == "result" and line_kind("hello") == "plain"
    assert line_kind("$ torchrun --nnodes=2") == "command"
    # glog's level letter in any month: January's lines are I0101, W0101, E0101
    assert line_kind("W0101 12:00:00.1 7 torch/distributed/run.py:792] *****") == "warn"
    assert line_kind("E0315 12:00:00.1 7 torch/distributed/elastic/multiprocessing/api.py:869] x") == "error"
    assert line_kind("I0101 12:00:00.1 7 torch/distributed/run.py:650] Using nproc_per_node=2.") == "info"


def test_filters() -> None:
    assert filter_cycle(2) == ["all", "no launcher INFO", "NCCL", "warnings+errors", "rank 0", "rank 1"]
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


AGENT = "I1201 13:37:48.503000 31418 /venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py"


def test_launcher_chatter_is_torchruns_own_info_and_nothing_else() -> None:
    chatter = [f"{AGENT}:553]   master_addr=10.213.0.2",
               f"{AGENT}:715] [default] Starting worker group",
               "I0101 12:00:00.123456 4242 site-packages/torch/distributed/run.py:650] Using nproc_per_node=2.",
               "I1201 10:22:25.1 28322 .venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py:188] x"]
    kept = [f"{AGENT}:380] ('local_rank %s FAILED with no error file', 0)",  # INFO, but a failure
            "W1201 10:24:15.742000 28369 .venv/torch/distributed/elastic/agent/server/api.py:753] Received 15 death signal",
            "E1201 10:22:33.3 28322 .venv/torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1)",
            "[default0]:I1201 13:37:48.5 77 torch/csrc/distributed/c10d/ProcessGroupGloo.cpp:100] the job's rank",
            "[I1201 10:22:24.532379404 socket.cpp:207] [c10d] torch's C++ in the job",
            "ddptui-smoke result host=node02 rank=0", "a plain line", ""]
    assert [is_launcher_chatter(x) for x in chatter] == [True] * len(chatter)
    assert [is_launcher_chatter(x) for x in kept] == [False] * len(kept)
    assert [line_matches(x, "no launcher INFO") for x in chatter + kept] == [False] * len(chatter) + [True] * len(kept)


def test_a_panes_lines_filtered_at_once_are_the_lines_each_filter_keeps() -> None:
    """`matching` (a pane's 5,000 lines at a filter change) keeps exactly what `line_matches` keeps,
    line by line, on every log the tests hold and on the edge cases of each filter."""
    from ddptui.core.logs.classify import matching
    from tests.conftest import DATA

    lines = [x for f in sorted(DATA.rglob("*.log")) for x in f.read_text(errors="replace").split("\n")]
    lines += ["", "I", "[default0]:W1201 12:00:00.0 1 a/b.py:1] w", "[default10]:x", "[default1]:E0101 z",
              f"{AGENT}:553]   master_addr=10.213.0.2", f"{AGENT}:553] FAILED exitcode 1",
              # glog's level after a prefix whose first "]:" is late, or behind a "]"; a digit only str.isdigit knows
              "[default12345]:E0101 x", "[default123456]:E0101 x", "[a]b]:F0101 y", "E\u00b2000 z", "Epoch 3", "W"]
    assert len(lines) > 4000
    for flt in filter_cycle(11):
        want = [x for x in lines if line_matches(x, flt)]
        assert matching(lines, flt) == want and matching(iter(lines), flt) == want, flt
    assert matching(lines, "rank 1") != matching(lines, "rank 10")


def test_a_floods_newest_lines_are_the_last_a_filter_keeps() -> None:
    """`newest_matching` (a pane's turn under a flood, a filter chosen then) is the tail of what `line_matches`
    keeps, among the last `within` lines if given, whichever way the filter looks for them."""
    import collections

    from ddptui.core.logs.classify import newest_matching
    from tests.conftest import DATA

    lines = [x for f in sorted(DATA.rglob("*.log")) for x in f.read_text(errors="replace").split("\n")]
    extra = ["[default1]:E0101 12:00:00.0 1 a/b.py:1] e", "[default0]:W0101 w", "[default1]:step 3", "NCCL INFO x"]
    buffer = collections.deque(lines[-4000:] + extra * 50 + lines[:1000], maxlen=5000)
    for flt in filter_cycle(2):
        kept = [x for x in buffer if line_matches(x, flt)]
        assert kept, flt
        assert newest_matching(buffer, flt, 200) == kept[-200:], flt
        assert newest_matching(buffer, flt, 10**6) == kept, flt
        recent = [x for x in list(buffer)[-700:] if line_matches(x, flt)]
        assert newest_matching(buffer, flt, 50, within=700) == recent[-50:], flt
    assert newest_matching([], "warnings+errors", 5) == [] and newest_matching(["a\nNCCL WARN b", "c"], "warnings+errors", 5) == ["a\nNCCL WARN b"]
