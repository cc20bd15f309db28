from ddptui.core.logs.torchrun import RootCauseParser, first_failure

BLOCK = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
smoke.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-01_08:59:19
  host      : node03
  rank      : 2 (local_rank: 0)
  exitcode  : -15 (pid: 3354)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 3354
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_08:59:18
  host      : node03
  rank      : 3 (local_rank: 1)
  exitcode  : -9 (pid: 3355)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 3355
============================================================
"""


def test_root_cause_block():
    p = RootCauseParser()
    for line in BLOCK.splitlines():
        p.feed(line)
    assert p.root_cause == {"time": "2026-12-01_08:59:18", "host": "node03", "rank": 3, "local_rank": 1,
                            "exitcode": -9, "pid": 3355, "signal": "SIGKILL", "error_file": "<N/A>",
                            "traceback": "Signal 9 (SIGKILL) received by PID 3355"}


def test_plain_exit_code_and_world_size():
    p = RootCauseParser()
    p.feed("I1201 api.py:553]   global_world_sizes=[5, 5]")
    for line in BLOCK.replace("-9 (pid: 3355)  (SIGKILL)", "1 (pid: 3355)").splitlines():
        p.feed("[default0]:" + line)
    assert p.world_size == 5 and p.root_cause["exitcode"] == 1 and "signal" not in p.root_cause


def test_first_failure_prefers_the_earliest():
    causes = {"node02": {"time": "2026-12-01_08:59:20", "exitcode": 1},
              "node03": {"time": "2026-12-01_08:59:18", "exitcode": -9, "signal": "SIGKILL"}}
    assert first_failure(causes)[0] == "node03" and first_failure({}) is None
