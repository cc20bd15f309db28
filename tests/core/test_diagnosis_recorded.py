"""torch.distributed's own failures, recorded on the namespace cluster (tests/cluster/record.py).

Files sharing a number are the nodes of one job; their `# expected-diagnosis` headers (the test's
answers, never shown to the engine) together give the ids the job must get.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from ddptui.core.diagnosis.engine import Engine
from tests.conftest import DATA
from tests.core.test_diagnosis_corpus import split

RECORDED = DATA / "recorded"


def groups() -> dict[str, list[Path]]:
    out = defaultdict(list)
    for f in sorted(RECORDED.glob("*.log")):
        out[f.name.split("-")[0]].append(f)
    return dict(out)


GROUPS = groups()


@pytest.mark.parametrize("key", sorted(GROUPS), ids=[GROUPS[k][0].name.rsplit("-", 1)[0] for k in sorted(GROUPS)])
def test_recorded_failure_gives_exactly_the_expected_ids(key: str) -> None:
    engine = Engine(expected_nnodes=2)
    expected: set[str] = set()
    for f in GROUPS[key]:
        header, body = split(f)
        expected |= set(header["expected-diagnosis"].split()) - {"none"}
        engine.feed(f.stem.rsplit("-", 1)[1], body)
    findings = engine.finish()
    got = {x.id for x in findings if x.severity in ("error", "warning")}
    assert got == expected, [(x.id, x.severity, x.summary) for x in findings]


def test_every_scenario_the_issue_names_is_recorded() -> None:
    names = {f.name.split("-", 1)[1].rsplit("-", 1)[0] for f in RECORDED.glob("*.log")}
    assert {"workers-first", "master-never-started", "wrong-master-addr", "port-taken", "node-never-launched",
            "worker-killed", "nproc-differs", "hostname-unresolvable", "bad-gloo-ifname", "firewall-ephemeral",
            "link-cut", "torch-versions-differ", "nnodes-more-on-worker", "nnodes-more-on-master"} <= names


def test_a_line_is_evidence_once_on_its_node() -> None:
    """The recorded port-taken run's EADDRINUSE line is matched by two port-in-use patterns: the finding
    names it once. A retry loop's repeats of one line do not fill a node's evidence either."""
    engine = Engine(expected_nnodes=2)
    for f in GROUPS["12"]:
        engine.feed(f.stem.rsplit("-", 1)[1], split(f)[1])
    (f,) = [x for x in engine.finish() if x.id == "port-in-use"]
    assert [e.node for e in f.evidence] == ["node02"] and "EADDRINUSE" in f.evidence[0].text
    for key, files in [*GROUPS.items(), *((p.name, [p]) for p in sorted((DATA / "corpus" / "nccl").glob("*.log")))]:
        engine = Engine(expected_nnodes=2)
        for p in files:
            engine.feed(p.stem.rsplit("-", 1)[-1], split(p)[1])
        for x in engine.finish():
            shown = [(e.node, e.text) for e in x.evidence]
            assert len(shown) == len(set(shown)), (key, x.id, shown)


# A real line from a healthy job: ddptui's CI, tests/cluster/test_slurm.py's c10d sbatch job on the
# namespace Slurm cluster, 2026-12-02 (torch 2.13.0). The workers' agents met the store already gone
# while shutting the rendezvous down (the race of 24-c10d-master-exits-first, whose recording cuts
# C++ frames) and torch printed its warning with a C++ backtrace; the job COMPLETED. A frame names
# C++'s `c10::DistError::DistError`: no Python exception, no failure.
DIST_ERROR_FRAME = ("frame #1: c10::DistError::DistError(c10::SourceLocation, std::__cxx11::basic_string<char, "
                    "std::char_traits<char>, std::allocator<char> >) + 0x72 (0x7f8a4eb52b62 in "
                    "/tmp/tmp.BAqysEdSlM/p/.venv/lib/python3.11/site-packages/torch/lib/libc10.so)")


def test_a_cpp_frame_naming_an_error_class_is_no_failure() -> None:
    engine = Engine(expected_nnodes=2)
    for f in GROUPS["24"]:
        body = split(f)[1]
        engine.feed(f.stem.rsplit("-", 1)[1], body + ["Exception raised from recvBytes at "
                                                        "/__w/pytorch/pytorch/torch/csrc/distributed/c10d/Utils.hpp:787 "
                                                        "(most recent call first):", DIST_ERROR_FRAME])
    assert [(x.id, x.severity) for x in engine.finish() if x.severity in ("error", "warning")] == []
    # while a Python exception line still is one
    engine = Engine(expected_nnodes=1)
    engine.feed("node03", ["[rank1]: torch.distributed.DistError: the store went away"])
    assert [x.id for x in engine.finish()] == ["unrecognized-failure"]


def test_a_ranks_own_error_is_the_finding_not_the_broken_link_it_caused() -> None:
    """A training script raised on one rank; the other rank on the node saw "Connection closed by
    peer". The node was explained by remote-rank-died ("a peer rank died first") and the error the
    user had to read, the ValueError, was in no finding. It is now the unrecognized-failure's summary
    and first evidence, which covers remote-rank-died there, in whatever order the ranks' lines came."""
    (log,) = GROUPS["25"]
    body = split(log)[1]
    own = [i for i, x in enumerate(body) if x.startswith("[default1]:")]
    peer = [i for i, x in enumerate(body) if x.startswith("[default0]:[rank0]:")]
    assert own and peer and max(own) < min(peer)  # as recorded: the raising rank's traceback first
    swapped = [body[i] for i in range(min(own))] + [body[i] for i in peer] + [body[i] for i in own] + [
        body[i] for i in range(max(peer) + 1, len(body))]
    assert sorted(swapped) == sorted(body)
    for lines in (body, swapped):
        engine = Engine()
        engine.feed("localhost", lines)
        engine.node_exited("localhost", 1)
        (f,) = engine.finish()
        assert f.id == "unrecognized-failure", (f.id, f.summary)
        error = "ValueError: batch 17 has 0 samples: the dataset shard for rank 1 is empty"
        assert f.summary == f"localhost rank 1: {error}"  # torchrun's and torch's prefixes said as words
        assert f.evidence[0].text == f"[default1]:[rank1]: {error}"  # the line as the log has it
        assert lines[f.evidence[0].line - 1].strip() == f.evidence[0].text  # the line it names


def test_a_node_whose_errors_are_all_consequences_stays_remote_rank_died() -> None:
    """The other side of the rule: a node whose ranks only saw their links break (here the recorded
    master whose worker was killed, and a real user's log) is remote-rank-died, as before."""
    for files in (GROUPS["14"][:1], [DATA / "corpus" / "nccl" / "53-remote-rank-died-broken-pipe.log"]):
        engine = Engine()
        for f in files:
            engine.feed("n", split(f)[1])
        engine.node_exited("n", 1)
        assert [x.id for x in engine.finish()] == ["remote-rank-died"], files


@pytest.mark.parametrize("key, node", [("27", "n5"), ("28", "node09")], ids=["local", "ssh"])
def test_the_exit_barrier_race_after_success_is_said_as_such_not_as_a_failure(key: str, node: str) -> None:
    """8 nodes (local; over ssh on the namespace cluster), every worker succeeded, every node exited
    0; the last agent at torchrun's exit barrier found the master's store closed and logged a
    traceback. ddptui said `unrecognized-failure` (an error) on that node of a good run; it is the
    race, said as information, with the line that shows it."""
    engine = Engine(expected_nnodes=8)
    for f in GROUPS[key]:
        engine.feed(f.stem.rsplit("-", 1)[1], split(f)[1])
        engine.node_exited(f.stem.rsplit("-", 1)[1], 0)
    (f,) = engine.finish()
    assert (f.id, f.severity, f.nodes) == ("exit-barrier-race", "info", [node])
    assert "Error waiting on exit barrier" in f.evidence[0].text


def test_an_exit_barrier_error_after_failed_workers_is_still_a_failure() -> None:
    """The same node's log with its workers failed (the word torch prints then, and exit 1): the
    barrier's traceback explains nothing, and the node is a failed one."""
    (log,) = [f for f in GROUPS["27"] if f.stem.endswith("-n5")]
    body = [l.replace("WorkerState.SUCCEEDED", "WorkerState.FAILED") for l in split(log)[1]]
    assert body != split(log)[1]
    engine = Engine(expected_nnodes=8)
    engine.feed("n5", body)
    engine.node_exited("n5", 1)
    assert [x.id for x in engine.finish()] == ["unrecognized-failure"]
