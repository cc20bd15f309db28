"""Every diagnosis in the corpus (real output from users' public issues), by the engine.

The `# ` header of each file holds the answer (expected-diagnosis); it is read here, by the test,
and stripped before the engine sees the log.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from ddptui.core.diagnosis.engine import Engine
from tests.conftest import DATA

CORPUS = DATA / "corpus" / "nccl"
HEALTHY = ("healthy", "topology-reference")
# What a live run knows from its playbook that a pasted log does not say: the job's node count.
CONTEXT = {"23": {"expected_nnodes": 2}}


def split(path: Path) -> tuple[dict, list[str]]:
    header, body = {}, []
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"^# ([\w-]+): (.*)$", line)
        if m and not body:
            header[m.group(1)] = m.group(2)
        else:
            body.append(line)
    return header, body


def groups() -> dict[str, list[Path]]:
    out = defaultdict(list)
    for f in sorted(CORPUS.glob("*.log")):
        out[f.name.split("-")[0]].append(f)
    return dict(out)


GROUPS = groups()


@pytest.mark.parametrize("key", sorted(GROUPS), ids=[f"{k}-{GROUPS[k][0].name.split('-', 1)[1].rsplit('.', 1)[0]}" for k in sorted(GROUPS)])
def test_corpus_file_gives_exactly_the_expected_diagnosis(key: str) -> None:
    files = GROUPS[key]
    engine = Engine(**CONTEXT.get(key, {}))
    expected = set()
    for f in files:
        header, body = split(f)
        expected.add(header["expected-diagnosis"])
        engine.feed(f.stem, body)
    findings = engine.finish()
    if expected <= set(HEALTHY):
        bad = [(x.id, x.severity, x.summary) for x in findings if x.severity in ("error", "warning") and x.state == "active"]
        assert bad == [], bad
    else:
        assert {x.id for x in findings} == expected, [(x.id, x.summary) for x in findings]
        for x in findings:
            assert x.evidence and all(e.line >= 1 and e.text for e in x.evidence)
            assert x.explanation and x.fix is not None


def test_every_corpus_diagnosis_is_covered() -> None:
    ids = {split(f)[0]["expected-diagnosis"] for f in CORPUS.glob("*.log")} - set(HEALTHY)
    assert len(ids) >= 30  # the corpus is copied whole; nothing was left out


def test_cross_node_ib_log_beside_a_socket_log() -> None:
    """node A chose IB, node B Socket -> ib-socket-mismatch as soon as B's transport line arrives."""
    _, ib = split(CORPUS / "92-healthy-ib-two-nodes-node0.log")
    _, sock = split(CORPUS / "94-healthy-socket-after-ib-disable.log")
    raised = []
    e = Engine(on_change=lambda f: raised.append((f.id, f.state)))
    e.feed("node02", ib)
    assert raised == []
    first_socket = next(i for i, l in enumerate(sock) if "NET/Socket : Using" in l)
    e.feed("node03", sock[: first_socket])
    assert raised == []
    e.feed("node03", sock[first_socket: first_socket + 1], first_line=first_socket + 1)
    assert raised == [("ib-socket-mismatch", "active")]
    (f,) = [x for x in e.findings if x.id == "ib-socket-mismatch"]
    assert sorted(f.nodes) == ["node02", "node03"]
    assert {ev.node for ev in f.evidence} == {"node02", "node03"}
    assert any(ev.node == "node03" and ev.line == first_socket + 1 and "NET/Socket : Using" in ev.text for ev in f.evidence)
    assert f.fix.env == {"NCCL_IB_DISABLE": "1"} and f.fix.scope == "all-nodes"


def test_master_not_started_is_resolved_when_the_worker_joins() -> None:
    _, body = split(CORPUS / "62-master-not-yet-listening.log")
    e = Engine()
    retry = next(i for i, l in enumerate(body) if "not yet listening" in l)
    e.feed("node03", body[: retry + 1])
    (f,) = e.findings
    assert (f.id, f.state) == ("master-not-started", "active")
    e.feed("node03", body[retry + 1:])
    assert e.findings[0].state == "resolved"


def test_launcher_prefixes_and_ansi_colors_parse() -> None:
    lines = ["\x1b[36m[1,3]<stdout>:\x1b[0mhost1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
             "[default0]:host2:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>"]
    e = Engine()
    e.feed("a", lines[:1])
    e.feed("b", lines[1:])
    assert [f.id for f in e.findings] == ["ib-socket-mismatch"]
    assert e.findings[0].summary == "host1 use NET/IB, host2 NET/Socket"


def test_healthy_ethernet_only_no_device_found_is_fine() -> None:
    e = Engine()
    e.feed("n", ["h:1:1 [0] NCCL INFO NET/IB : No device found.", "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>",
                 "h:1:1 [0] NCCL INFO Using network Socket"])
    assert e.finish() == []


def test_trie_gate_matches_exactly_the_literals() -> None:
    import re

    from ddptui.core.diagnosis.engine import trie_regex

    words = ["abc", "abd", "ab", "x y", "NET/IB : No device", "NET/IB : Using ["]
    r = re.compile(trie_regex(words))
    for text in ["zzab", "abd", "x y", "..NET/IB : Using [0]", "NET/IB : No device found"]:
        assert r.search(text)
    for text in ["a b", "x", "NET/IB : Us", "NET/Socket"]:
        assert not r.search(text)
