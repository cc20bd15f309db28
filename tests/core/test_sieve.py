"""The sieves (sieve.py): an engine fed only the lines a sieve forwards finds exactly what it finds
reading every line (the same findings, summaries and evidence, to the line number), on every job
of the corpus, with its nodes' logs repeated (NCCL's init chatter, most of it spent after the first
copy), whether each node has a sieve of its own or one sieve takes them all; and it forwards few."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from bench.stream import children
from ddptui.core.diagnosis.engine import Engine
from ddptui.core.diagnosis.live import LiveDiagnosis
from ddptui.core.logs.rundir import RunDir
from ddptui.core.diagnosis.rules import Rule
from ddptui.core.diagnosis.engine import runs
from ddptui.core.diagnosis.sieve import CROSS_IDS, Sieve
from tests.core.test_diagnosis_corpus import CONTEXT, GROUPS, split

DATA = Path(__file__).resolve().parent.parent / "data"
COPIES = 3


def bodies(key: str) -> list[tuple[str, list[str]]]:
    return [(f.stem, split(f)[1] * COPIES) for f in GROUPS[key]]


def everything(key: str) -> list[dict]:
    e = Engine(**CONTEXT.get(key, {}))
    for node, lines in bodies(key):
        for i in range(0, len(lines), 50):
            e.feed_text(node, "\n".join(lines[i:i + 50]))
    return [f.to_json() for f in e.finish()]


def sieved(key: str, one_each: bool) -> tuple[list[dict], int, int]:
    """The findings of an engine fed only what the sieves forwarded, the lines read, the lines forwarded."""
    e = Engine(**CONTEXT.get(key, {}))
    shared = Sieve()
    read = sent = 0
    for node, lines in bodies(key):
        sieve = Sieve() if one_each else shared
        for i in range(0, len(lines), 50):
            sieve.feed_text(node, "\n".join(lines[i:i + 50]))
            fw = sieve.take()
            read += len(lines[i:i + 50])
            sent += len(fw)
            e.feed_sparse(node, fw)
    return [f.to_json() for f in e.finish()], read, sent


@pytest.mark.parametrize("one_each", [True, False], ids=["a-sieve-per-node", "one-sieve"])
def test_every_corpus_job_gives_the_same_findings_through_the_sieves(one_each: bool) -> None:
    read = sent = 0
    for key in GROUPS:
        got, r, s = sieved(key, one_each)
        assert got == everything(key), key
        read, sent = read + r, sent + s
    assert sent < read / 2, (sent, read)  # it sieves: most of the repeated copies stay behind


def test_init_chatter_is_sieved_to_the_lines_that_say_something() -> None:
    chatter = [x for x in (DATA / "corpus" / "nccl" / "90-healthy-socket-aws-64ranks.log").read_text().splitlines()
               if not x.startswith("# ")]
    failure = ("node02:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> "
               "returned 113(No route to host) errno 115(Operation now in progress)")
    lines = chatter * 1000 + [failure]
    s = Sieve()
    s.feed_text("node02", "\n".join(lines))
    fw = s.take()
    assert len(fw) <= 2 * len(chatter)  # the first copy's facts, then nothing until the failure
    assert fw[-1] == [len(lines), failure]
    e = Engine()
    for first, texts in runs(fw):
        e.feed("node02", texts, first)
    full = Engine()
    full.feed_text("node02", "\n".join(lines))
    assert [f.to_json() for f in e.finish()] == [f.to_json() for f in full.finish()]
    assert [f.id for f in e.findings] == ["firewall-or-unreachable"]


def test_a_sieve_raises_no_cross_finding_and_never_takes_a_cross_ids_lines_as_spent() -> None:
    s = Sieve()
    s.feed("node02", ["node02:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.2<0>"])
    s.feed("node03", ["node03:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>"])
    assert not s.findings  # the engine's cross rules say it, over every node
    # a rule of a cross rule's id (the engine's finding may be the cross rule's, whose evidence is
    # not this rule's lines): its lines are forwarded after the node's 5 pieces of evidence too,
    # where another id's are spent
    rules = (Rule("ib-socket-mismatch", (r"wrong type ([34]) != ([34])",)), Rule("firewall-or-unreachable", (r"link (\w+) down",)))
    assert "ib-socket-mismatch" in CROSS_IDS and "firewall-or-unreachable" not in CROSS_IDS
    s = Sieve(rules=rules, signs=())
    s.feed("n", [f"socketFinalizeAccept: wrong type 4 != 3 (try {i})" for i in range(10)])
    s.feed("n", [f"link eth{i} down" for i in range(10)])
    fw = s.take()
    assert [n for n, _ in fw] == [*range(1, 11), *range(11, 16)]


def test_runs_are_an_engines_batches() -> None:
    assert runs([[3, "a"], [4, "b"], [9, "c"]]) == [(3, ["a", "b"]), (9, ["c"])]
    # a line read whole (its facts) that a pattern also matches (a sign) is forwarded once
    s = Sieve()
    s.feed("n", ["x", "n:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>", "y",
                 "n:1:1 [0] misc/socket.cc:1 NCCL WARN Net : Connection closed by remote peer"])
    assert [n for n, _ in s.take()] == [2, 4] and s.take() == []


# ---- in a run: the diagnosis process and its sieves -------------------------------------------
CORPUS = DATA / "corpus" / "nccl"
IB = split(CORPUS / "92-healthy-ib-two-nodes-node0.log")[1]
SOCKET = split(CORPUS / "94-healthy-socket-after-ib-disable.log")[1]
CHATTER = split(CORPUS / "90-healthy-socket-aws-64ranks.log")[1]
FAILURE = ("node05:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> "
           "returned 113(No route to host) errno 115(Operation now in progress)")


def sieve_pids(parent: int) -> list[int]:
    return children(parent, b"ddptui.core.diagnosis.sieve")


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if "State:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def four_nodes() -> dict[str, list[list[str]]]:
    """node02 on IB, the others on Socket, node05's flood ending in a failure: batches of each."""
    logs = {"node02": IB, "node03": SOCKET, "node04": CHATTER * 50, "node05": CHATTER * 200 + [FAILURE]}
    return {n: [lines[i:i + 100] for i in range(0, len(lines), 100)] for n, lines in logs.items()}


def engine_of(batches: dict[str, list[list[str]]], exits: dict[str, int]) -> list[dict]:
    e = Engine(expected_nnodes=4)
    for node, bs in batches.items():
        for lines in bs:
            e.feed(node, lines)
    for node, rc in exits.items():
        e.node_exited(node, rc)
    return [f.to_json() for f in e.finish()]


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_a_run_over_sieves_finds_what_one_engine_finds(tmp_path: Path, processes: int) -> None:
    seen: list = []
    live = LiveDiagnosis(4, "node02", lambda: True, seen.append, processes=processes)
    rd = RunDir(tmp_path, "sieved", "name: sieved\n")
    batches = four_nodes()
    try:
        for node, bs in batches.items():
            for b in bs:
                live.deliver(rd, lambda e: None, node, b)
            # one node after the other, as engine_of reads them: a cross finding's evidence is the
            # facts when its nodes or summary last changed, which depends on the order of the nodes
            live.flush()
        live.node_exited("node05", 1)
        live.node_exited("node04", -9)
        live.finish()
        child = live._engine._proc.pid
        sieves = sieve_pids(child)
        assert len(sieves) == processes - 1  # a sieve for each group of nodes but the child's own
        got = [f.to_json() for f in live.findings]
        assert got == engine_of(batches, {"node05": 1, "node04": -9})
        assert {f["id"] for f in got} >= {"ib-socket-mismatch", "firewall-or-unreachable"}
        mismatch = next(f for f in got if f["id"] == "ib-socket-mismatch")
        assert set(mismatch["nodes"]) == {"node02", "node03", "node04", "node05"}  # across every process
    finally:
        live.close()
        rd.close()
    assert all(gone(p) for p in [child, *sieves])  # the sieves end with the diagnosis process


def test_a_killed_sieve_takes_the_diagnosis_with_it_and_nothing_is_missed(tmp_path: Path) -> None:
    live = LiveDiagnosis(4, "node02", lambda: True, lambda f: None, processes=2)
    rd = RunDir(tmp_path, "sieved", "name: sieved\n")
    batches = four_nodes()
    try:
        half = {n: bs[:len(bs) // 2] for n, bs in batches.items()}
        for n, bs in half.items():
            for b in bs:
                live.deliver(rd, lambda e: None, n, b)
        live.flush()
        first = live._engine._proc.pid
        (sieve,) = sieve_pids(first)
        os.kill(sieve, signal.SIGKILL)
        for n, bs in batches.items():
            for b in bs[len(bs) // 2:]:
                live.deliver(rd, lambda e: None, n, b)
        live.finish()
        assert live._engine._proc.pid != first and live._engine.restarts == 1
        assert [f.to_json() for f in live.findings] == engine_of(batches, {})
    finally:
        live.close()
        rd.close()


def test_a_killed_diagnosis_process_leaves_no_sieve(tmp_path: Path) -> None:
    live = LiveDiagnosis(2, "node02", lambda: True, lambda f: None, processes=2)
    rd = RunDir(tmp_path, "sieved", "name: sieved\n")
    try:
        live.deliver(rd, lambda e: None, "node02", IB)
        live.deliver(rd, lambda e: None, "node03", SOCKET)
        live.flush()
        child = live._engine._proc.pid
        (sieve,) = sieve_pids(child)
        os.kill(child, signal.SIGKILL)  # the OOM killer's way: no word to the sieve
        assert gone(sieve)  # its input ended with the child
        assert "ib-socket-mismatch" in [f.id for f in live.findings]  # a new child read it all again
    finally:
        live.close()
        rd.close()


def test_where_no_sieve_can_start_one_process_reads_every_node(tmp_path: Path, monkeypatch) -> None:
    """A login node's limit on processes (or open files) refuses the sieve: the diagnosis process
    reads that node itself, and a sync is answered, not left waiting for a sieve that never was."""
    import io
    import json
    import queue

    from ddptui.core.diagnosis import child

    def refuse(*a, **k):
        raise BlockingIOError(11, "Resource temporarily unavailable")
    monkeypatch.setattr(child.subprocess, "Popen", refuse)
    logs = {"node02": IB, "node03": SOCKET}
    for node, lines in logs.items():
        (tmp_path / f"{node}.log").write_text("\n".join(lines) + "\n")
    out = io.StringIO()
    server = child.Server(out, queue.SimpleQueue())
    ends = {n: (tmp_path / f"{n}.log").stat().st_size for n in logs}
    words = [{"op": "reset", "expected_nnodes": 2, "processes": 2}]
    words += [{"op": "node", "node": n, "path": str(tmp_path / f"{n}.log"), "offset": 0, "line": 1} for n in logs]
    words += [{"op": "grew", "ends": ends}, {"op": "sync", "seq": 1, "ends": ends}]
    for w in words:
        server.step(json.dumps(w))
    (answer,) = [m for m in map(json.loads, out.getvalue().splitlines()) if m["op"] == "synced"]
    assert "ib-socket-mismatch" in [f["id"] for f in answer["findings"]] and answer["error"] is None


def test_lines_that_missed_the_log_are_read_after_the_lines_the_log_holds(tmp_path: Path) -> None:
    """A node's log that stops being written (a full disk) sends its next lines as text: on a node a
    sieve reads, they wait for the sieve's lines before them (a line that resolves a finding must
    come after the line that raised it)."""
    import io
    import json
    import queue

    from ddptui.core.diagnosis.child import Server

    waiting = ("[W1204 10:00:01 socket.cpp:752] [c10d] The server socket on node02:29500 is not yet "
               "listening (Error: 111 - Connection refused), retrying")
    joined = "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers."
    (tmp_path / "node02.log").write_text("hello\n")
    (tmp_path / "node03.log").write_text(waiting + "\n")
    out, inbox = io.StringIO(), queue.SimpleQueue()
    server = Server(out, inbox)
    ends = {n: (tmp_path / f"{n}.log").stat().st_size for n in ("node02", "node03")}
    for w in [{"op": "reset", "expected_nnodes": 2, "processes": 2},
              *({"op": "node", "node": n, "path": str(tmp_path / f"{n}.log"), "offset": 0, "line": 1} for n in ends),
              {"op": "grew", "ends": ends},
              {"op": "text", "node": "node03", "line": 2, "text": joined},  # before the sieve has said a word
              {"op": "sync", "seq": 1, "ends": ends}]:
        server.step(json.dumps(w))
    (f,) = until_synced(server, inbox, out)["findings"]
    assert (f["id"], f["state"], f["evidence"][0]["line"]) == ("master-not-started", "resolved", 1)


def end_sieves(server) -> None:
    for proc in server.sieves.values():
        proc.stdin.close()
        proc.wait(10)


def until_synced(server, inbox, out) -> dict:
    """A diagnosis process (child.Server) stepped through its sieves' words until it answers the
    sync; its sieves then end. The answer."""
    import json

    try:
        while '"synced"' not in out.getvalue():
            server.step(inbox.get(timeout=30))  # the sieves' words
    finally:
        end_sieves(server)
    (answer,) = [m for m in map(json.loads, out.getvalue().splitlines()) if m["op"] == "synced"]
    return answer


# ---- `ddptui diagnose`: logs read by sieves beside it ------------------------------------------
def _sieve_children() -> list[int]:
    return sieve_pids(os.getpid())


@pytest.fixture
def spawned(monkeypatch) -> list:
    """The sieves `ddptui diagnose` started (the real ones, counted): an answer that equals one
    process's must not be one process's for want of sieves."""
    from ddptui.core.diagnosis import sieve

    started: list = []
    real = sieve.spawn
    monkeypatch.setattr(sieve, "spawn", lambda: started.append(real()) or started[-1])
    return started


def test_diagnose_over_sieves_finds_what_one_process_finds(spawned: list) -> None:
    from ddptui.core.diagnosis.offline import diagnose_paths

    every = [f for files in GROUPS.values() for f in files]  # each corpus job, and all of them as one run
    for files in [*GROUPS.values(), every]:
        one = [f.to_json() for f in diagnose_paths(files, processes=1)]
        assert not spawned
        for processes in (2, 3):
            assert [f.to_json() for f in diagnose_paths(files, processes=processes)] == one, (files, processes)
        # a sieve for each group of logs but the one read here, at 2 and then 3 processes
        assert len(spawned) == sum(min(p, len(files)) - 1 for p in (2, 3)), files
        spawned.clear()
    assert not _sieve_children()  # they ended with it


def test_diagnose_over_sieves_reads_a_run_directory_as_one_process_does(tmp_path: Path, spawned: list) -> None:
    import json

    from ddptui.core.diagnosis.offline import diagnose_paths

    run = tmp_path / "run"
    run.mkdir()
    logs = {"node02": IB * 20, "node03": SOCKET * 20, "node04": CHATTER * 50 + [FAILURE], "node05": ["step 1"]}
    for node, lines in logs.items():
        (run / f"{node}.log").write_text("\n".join(lines) + "\n")
    (run / "summary.json").write_text(json.dumps({"nodes": {
        "node04": {"state": "failed", "exit_code": 1}, "node05": {"state": "failed", "exit_code": 7}}, "findings": []}))
    one = [f.to_json() for f in diagnose_paths([run], processes=1)]
    assert {f["id"] for f in one} >= {"ib-socket-mismatch", "firewall-or-unreachable", "unrecognized-failure"}
    assert [f.to_json() for f in diagnose_paths([run], processes=4)] == one
    assert len(spawned) == 3  # the 4 logs: one read here, three by sieves


def test_a_log_a_sieve_cannot_read_is_said_as_diagnose_says_it() -> None:
    from ddptui.core.diagnosis.offline import DiagnoseInputError, diagnose_paths

    files = [CORPUS / "92-healthy-ib-two-nodes-node0.log", Path("/proc/self/mem"),  # a read of offset 0: EIO
             CORPUS / "94-healthy-socket-after-ib-disable.log"]
    said = []
    for processes in (1, 2, 3):
        with pytest.raises(DiagnoseInputError) as e:
            diagnose_paths(files, processes=processes)
        said.append(str(e.value))
    assert said == ["/proc/self/mem: cannot read: Input/output error"] * 3
    assert not _sieve_children()


def test_a_relaunch_does_not_drop_what_waited_for_a_sieve(tmp_path: Path) -> None:
    """A node's exit and the run's finish that wait for a sieve's lines when the next launch
    begins are carried out with what was read: the failure is still said."""
    import io
    import json
    import queue

    from ddptui.core.diagnosis.child import Server

    for n in ("node02", "node03"):
        (tmp_path / f"{n}.log").write_text("step 1\n")
    out = io.StringIO()
    server = Server(out, queue.SimpleQueue())
    ends = {n: (tmp_path / f"{n}.log").stat().st_size for n in ("node02", "node03")}
    try:
        for w in [{"op": "reset", "expected_nnodes": 2, "processes": 2},
                  *({"op": "node", "node": n, "path": str(tmp_path / f"{n}.log"), "offset": 0, "line": 1} for n in ends),
                  {"op": "grew", "ends": ends},
                  {"op": "exited", "node": "node03", "rc": 7, "end": ends["node03"]},  # waits for the sieve
                  {"op": "finish", "ends": ends},
                  {"op": "reset", "expected_nnodes": 2, "processes": 2}]:  # before the sieve said a word
            server.step(json.dumps(w))
    finally:
        end_sieves(server)
    said = [m["finding"] for m in map(json.loads, out.getvalue().splitlines()) if m["op"] == "change"]
    assert [(f["id"], f["nodes"]) for f in said] == [("unrecognized-failure", ["node03"])]


def test_the_sieves_are_asked_before_the_diagnosis_process_reads_its_own_nodes(tmp_path: Path) -> None:
    """One word of where the logs end may cover a flood's worth of every node (words coalesce while
    the diagnosis process is busy): the sieves must have their share before this process starts on
    its own, or they wait for it and the nodes are read one process after the other."""
    import io
    import json
    import queue

    from ddptui.core.diagnosis.child import Server

    nodes = ("node02", "node03", "node04", "node05")
    for n in nodes:
        (tmp_path / f"{n}.log").write_text("step 1\nstep 2\n")
    out, inbox = io.StringIO(), queue.SimpleQueue()
    server = Server(out, inbox)
    order: list[tuple[str, str]] = []
    to_sieve, read = server.to_sieve, server.read
    server.to_sieve = lambda k, msg: (order.append(("sieve", msg["op"])), to_sieve(k, msg))[1]
    server.read = lambda node, end: (order.append(("read", node)), read(node, end))[1]
    ends = {n: (tmp_path / f"{n}.log").stat().st_size for n in nodes}
    try:
        for w in [{"op": "reset", "expected_nnodes": 4, "processes": 2},
                  *({"op": "node", "node": n, "path": str(tmp_path / f"{n}.log"), "offset": 0, "line": 1} for n in nodes)]:
            server.step(json.dumps(w))
        order.clear()
        server.step(json.dumps({"op": "grew", "ends": ends}))
        server.step(json.dumps({"op": "sync", "seq": 1, "ends": ends}))
        answer = until_synced(server, inbox, out)
    finally:
        end_sieves(server)  # closing twice is nothing
    assert order[:3] == [("sieve", "grew"), ("read", "node02"), ("read", "node04")], order
    assert answer["error"] is None


def test_every_id_the_engine_raises_across_nodes_is_one_a_sieve_never_takes_as_spent(monkeypatch) -> None:
    """CROSS_IDS is written down (the cross rules' ids and the engine's own three): every id the
    engine raises through `_raise_cross` on the corpus must be in it, or a sieve would take that
    id's lines as spent against a finding that is not its own."""
    raised: set[str] = set()
    real = Engine._raise_cross
    monkeypatch.setattr(Engine, "_raise_cross", lambda self, fid, *a, **k: (raised.add(fid), real(self, fid, *a, **k))[1])
    for key in GROUPS:
        e = Engine(**CONTEXT.get(key, {}))
        for node, lines in bodies(key):
            e.feed(node, lines)
        e.finish()
    assert {"nccl-version-mismatch", "ranks-not-joined", "unrecognized-failure"} <= raised  # it looked
    assert raised <= CROSS_IDS, raised - CROSS_IDS
