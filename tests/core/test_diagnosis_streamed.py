"""A healthy job's log read the way a live run reads it: each host's lines as its own node, arriving
in batches of any size, the nodes interleaved at random. The cross-node rules compare the nodes'
facts after every batch, so a fact that a host states in two steps (NCCL's `Loaded net plugin NAME`
then `Plugin Path : PATH`) must not look like a difference between the nodes in between: a finding,
once raised, stays on the user's screen. Corpus 155 (a healthy 2 x 8 H100 run with HPC-X's plugin)
raised `net-plugin-mismatch` in 20 of 20 such interleavings before the plugin fact compared like
with like (cross_rules.plugins_differ).

A failing job's log, read the same way, must give what it gives read whole: the user sees the
finding while the job runs, not only in the report made from the file afterwards."""

from __future__ import annotations

import random

import pytest

from ddptui.core.diagnosis.engine import Engine
from ddptui.core.diagnosis.facts import NCCL_HEAD
from tests.core.test_diagnosis_corpus import CONTEXT, GROUPS, HEALTHY, alarms, split

SEEDS = range(12)


def by_host(body: list[str]) -> dict[str, list[str]]:
    """Each NCCL host's lines, in order; a line that names no host goes with the first host's."""
    hosts = [m.group(1) if (m := NCCL_HEAD.search(line)) else None for line in body]
    first = next((h for h in hosts if h), "node0")
    out: dict[str, list[str]] = {}
    for line, host in zip(body, hosts):
        out.setdefault(host or first, []).append(line)
    return out


def healthy_multi_host() -> list[str]:
    keys = []
    for key, files in sorted(GROUPS.items()):
        header, body = split(files[0])
        if len(files) == 1 and header["expected-diagnosis"] == HEALTHY and len(by_host(body)) >= 2:
            keys.append(key)
    return keys


KEYS = healthy_multi_host()


def test_the_set_holds_the_logs_it_is_for() -> None:
    assert {"90", "154", "155"} <= set(KEYS), KEYS


def streamed(nodes: dict[str, list[str]], seed: int, **context) -> Engine:
    """The nodes' lines fed in batches of 1 to 60, a node at random each time."""
    rnd = random.Random(seed)
    e = Engine(**context)
    at = dict.fromkeys(nodes, 0)
    while left := [n for n in nodes if at[n] < len(nodes[n])]:
        node = rnd.choice(left)
        k = rnd.choice((1, 2, 3, rnd.randint(1, 60)))
        e.feed_text(node, "\n".join(nodes[node][at[node]:at[node] + k]))
        at[node] += k
    return e


@pytest.mark.parametrize("key", KEYS)
def test_a_healthy_log_streamed_node_by_node_raises_no_alarm(key: str) -> None:
    _, body = split(GROUPS[key][0])
    nodes = by_host(body)
    for seed in SEEDS:
        findings = streamed(nodes, seed, expected_nnodes=len(nodes)).finish()
        assert alarms(findings) == [], (key, seed, [(f.id, f.summary) for f in findings])


def failing() -> list[str]:
    return [key for key, files in sorted(GROUPS.items())
            if split(files[0])[0]["expected-diagnosis"] != HEALTHY]


def nodes_of(files: list) -> dict[str, list[str]]:
    """A job's nodes: one file per node (`-node0`, `-node1`), or one file's hosts."""
    if len(files) > 1:
        return {f.stem: split(f)[1] for f in files}
    return by_host(split(files[0])[1])


@pytest.mark.parametrize("key", failing())
def test_a_failing_log_streamed_node_by_node_gives_what_it_gives_whole(key: str) -> None:
    nodes = nodes_of(GROUPS[key])
    whole = Engine(**CONTEXT.get(key, {}))
    for node, lines in nodes.items():
        whole.feed(node, lines)
    expected = sorted((f.id, f.severity) for f in whole.finish())
    assert expected, key
    for seed in range(6):
        got = sorted((f.id, f.severity) for f in streamed(nodes, seed, **CONTEXT.get(key, {})).finish())
        assert got == expected, (key, seed)


def test_net_plugins_are_compared_like_with_like() -> None:
    from ddptui.core.diagnosis.cross_rules import plugins_differ

    path = "h{} NCCL INFO Plugin Path : {}"
    name = "h{} NCCL INFO NET/Plugin: Loaded net plugin {} (v8)"

    def seen(*facts: tuple[str, str]) -> dict:
        return {(f"n{i}", f"h{i}"): (value, 1, text.format(i, value.split(":", 1)[-1]))
                for i, (value, text) in enumerate(facts)}

    sharp, ofi = "external:/opt/hpcx/lib/libnccl-net.so", "external:/opt/aws-ofi-nccl/lib/libnccl-net.so"
    assert plugins_differ(seen((sharp, path), ("internal", "h{} NCCL INFO NET/Plugin: Could not find: libnccl-net.so")))
    assert plugins_differ(seen((sharp, path), (ofi, path)))
    assert plugins_differ(seen(("external:NCCL", name), ("external:AWS", name)))
    assert not plugins_differ(seen((sharp, path), (sharp, path)))
    assert not plugins_differ(seen((sharp, path), ("external:NCCL", name)))  # one node's path line not in yet


def test_a_host_on_a_net_plugins_network_beside_one_on_sockets_is_a_plugin_mismatch() -> None:
    """aws-ofi-nccl under NCCL 2.9 names no plugin path, only its network (`Using network AWS
    Libfabric`, corpus 157): a node where the plugin is missing says `Using network Socket` and the
    two cannot connect. Real lines of three logs, each host a node, streamed (their `NCCL version`
    lines left out: the logs come from jobs on different versions, which would be the finding):
    net-plugin-mismatch, and IB beside Socket stays ib-socket-mismatch's alone."""
    def host(key: str, name: str | None = None) -> list[str]:
        hosts = by_host(split(GROUPS[key][0])[1])
        return [x for x in hosts[name or next(iter(hosts))] if "NCCL version" not in x]

    efa, sockets, ib = host("157", "nccl-tests-efa-16-worker-0"), host("94"), host("148")
    for seed in SEEDS:
        found = {f.id: f for f in streamed({"n1": efa, "n2": sockets}, seed).finish()}
        assert "net-plugin-mismatch" in found and "ib-socket-mismatch" not in found, (seed, sorted(found))
        assert "AWS Libfabric" in found["net-plugin-mismatch"].summary and "Socket" in found["net-plugin-mismatch"].summary
        assert sorted(found["net-plugin-mismatch"].nodes) == ["n1", "n2"]
        ids = {f.id for f in streamed({"n1": ib, "n2": sockets}, seed).finish()}
        assert "ib-socket-mismatch" in ids and "net-plugin-mismatch" not in ids, (seed, sorted(ids))


def test_a_finding_two_cross_rules_can_raise_is_raised_once_not_flipped_each_batch() -> None:
    """The plugin's path on one node, the internal plugin and sockets on the other: both of
    net-plugin-mismatch's rules apply. The first one's finding is raised once; the screen is not told
    of a new one after every batch (each rule's summary replacing the other's)."""
    from ddptui.core.diagnosis.cross_rules import networks_differ

    changes = []
    e = Engine(on_change=changes.append)
    e.feed_text("n1", "h1:1:1 [0] NCCL INFO Plugin Path : /opt/hpcx/lib/libnccl-net.so\n"
                      "h1:1:1 [0] NCCL INFO Using network IBext")
    e.feed_text("n2", "h2:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
                      "h2:1:1 [0] NCCL INFO Using network Socket")
    for i in range(5):
        e.feed_text("n1" if i % 2 else "n2", f"h{1 + i % 2}:1:1 [0] NCCL INFO step {i}")
    assert [f.id for f in changes] == ["net-plugin-mismatch"]
    assert changes[0].summary.startswith("net plugins differ")
    seen = {("n1", "h1"): ("IB", 1, ""), ("n2", "h2"): ("Socket", 1, "")}
    assert not networks_differ(seen) and networks_differ({**seen, ("n3", "h3"): ("IBext", 1, "")})


def test_the_cross_rules_look_again_only_when_a_fact_or_a_finding_moved(monkeypatch) -> None:
    """A running job's stream is mostly batches of a line or a few that say no fact: the cross rules
    (a pure function of the facts, raising only what differs from the findings) are not run again
    for them, and still see at once the batch that brings a fact (the seed's IB beside Socket)."""
    import ddptui.core.diagnosis.engine as engine_module

    from tests.core.test_diagnosis_corpus import CORPUS

    def body(name: str) -> list[str]:
        return [x for x in (CORPUS / name).read_text().splitlines() if not x.startswith("# ")]

    looks = []
    real = engine_module.cross_verdicts
    monkeypatch.setattr(engine_module, "cross_verdicts", lambda *a: looks.append(1) or real(*a))
    ib, sock = body("92-healthy-ib-two-nodes-node0.log"), body("94-healthy-socket-after-ib-disable.log")
    cut = next(i for i, line in enumerate(sock) if "NET/Socket : Using" in line)
    raised = []
    e = Engine(on_change=raised.append)
    e.feed("node02", ib)
    e.feed("node03", sock[:cut])
    assert [(f.id, f.severity) for f in raised] == [("gpudirect-rdma-missing", "info")]  # node0 of 92: "(no module)"
    raised.clear()
    before = len(looks)
    for i in range(200):  # a training loop's lines, a batch each, on both nodes
        e.feed("node02" if i % 2 else "node03", [f"[default0]:epoch 1 step {i} loss=0.{i:03d}"])
    assert len(looks) == before and not raised  # nothing moved: no look
    e.feed("node03", sock[cut:cut + 1])
    assert len(looks) == before + 1
    assert [f.id for f in raised] == ["ib-socket-mismatch"]
