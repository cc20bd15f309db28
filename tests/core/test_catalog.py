"""The diagnosis catalog: one definition per contract id, used by the rules, the engine and preflight."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ddptui.core.checks import facts as F
from ddptui.core.checks import judge
from ddptui.core.checks.preflight import NodeTarget, Preflight
from ddptui.core.diagnosis.facts import NodeState
from ddptui.core.diagnosis import catalog
from ddptui.core.diagnosis.catalog import CATALOG, finding
from ddptui.core.diagnosis.merge import merge_by_id
from ddptui.core.diagnosis.engine import Engine
from ddptui.core.diagnosis.model import SEVERITIES, Evidence, Finding, Fix
from ddptui.core.diagnosis.cross_rules import CROSS_RULES
from ddptui.core.diagnosis.rules import RULES
from ddptui.core.playbook.loader import parse_playbook
from tests.conftest import DATA
from tests.core.recorded_nodes import MASTER_ADDR, RecordedNode
from tests.core.test_diagnosis_corpus import split

# The command-line contract: every id ddptui can report.
CONTRACT = """ib-socket-mismatch net-plugin-mismatch nccl-version-mismatch ib-not-detected ib-device-open-failed
bad-socket-ifname wrong-interface loopback-hostname hostname-resolution bad-master-addr firewall-or-unreachable
master-not-started rendezvous-timeout tcpstore-timeout port-in-use missing-rank ranks-not-joined duplicate-rank
duplicate-gpu nproc-mismatch gpu-count-short cuda-driver-mismatch fabric-manager-down shm-too-small watchdog-timeout collective-desync
collective-mismatch segfault-exit-11 host-oom-exit-9 remote-rank-died gid-index ib-completion-error
ib-async-fatal-event p2p-hang slow-interconnect unrecognized-failure nvls-setup-failed shm-not-writable
exit-barrier-race nccl-known-bug gpu-hardware-fault gpudirect-rdma-missing memlock-too-low""".split()
CORPUS = DATA / "corpus" / "nccl"


def body(name: str) -> list[str]:
    return split(CORPUS / name)[1]


# ---- the catalog itself -------------------------------------------------------------------------
def test_every_contract_id_has_exactly_one_cause() -> None:
    assert len(CONTRACT) == len(set(CONTRACT)) == 43
    ids = [c.id for c in catalog._CAUSES]
    assert sorted(ids) == sorted(CONTRACT)  # each once: a second definition would show up twice here
    assert set(CATALOG) == set(CONTRACT) and all(CATALOG[i].id == i for i in CATALOG)


def test_every_cause_is_complete_and_suppresses_only_catalog_ids() -> None:
    for c in CATALOG.values():
        assert c.severity in SEVERITIES and c.title and c.explanation, c.id
        assert c.fix is not None and c.fix.explain, c.id
        assert set(c.suppresses) <= set(CATALOG) and c.id not in c.suppresses, c.id


def test_every_rule_and_cross_rule_names_a_catalog_id() -> None:
    for r in RULES:
        assert r.id in CATALOG, r.id
        assert r.severity is None or r.severity in SEVERITIES, r.id
    for cr in CROSS_RULES:
        # the fact is one that NodeState keeps by host (or rank): what cross_verdicts reads
        assert cr.id in CATALOG and isinstance(getattr(NodeState("n"), cr.fact, None), dict), cr.id


def test_rules_carry_their_own_words_only_where_a_variant_needs_them() -> None:
    own = {(r.id, r.severity, r.fix is not catalog.DEFAULT) for r in RULES if r.severity or r.fix is not catalog.DEFAULT}
    # ib-not-detected's NCCL_NET variant: NCCL has no network left, so the job fails (an error, not the
    # fallback to sockets the cause's warning is about), and unsetting NCCL_NET is the first fix
    # collective-desync's desync report: it names the rank that fell behind, and what to look at is that rank
    # gpudirect-rdma-missing as NCCL says it: a job copying through host memory is slower, never failed
    # (the cause's error is NVSHMEM's, which cannot start without it)
    assert own == {("wrong-interface", None, True), ("hostname-resolution", "warning", True),
                   ("ib-not-detected", "error", True), ("collective-desync", None, True),
                   ("gpudirect-rdma-missing", "info", False)}


# ---- finding() --------------------------------------------------------------------------------------
def test_finding_takes_severity_explanation_and_fix_from_the_catalog() -> None:
    ev = [Evidence("node02", 3, "x")]
    f = finding("ib-socket-mismatch", ["node02", "node03"], "s", ev)
    c = CATALOG["ib-socket-mismatch"]
    assert (f.id, f.severity, f.explanation, f.fix) == (c.id, c.severity, c.explanation, c.fix)
    assert f.nodes == ["node02", "node03"] and f.evidence == ev and f.state == "active"
    assert f.fix.env == {"NCCL_IB_DISABLE": "1"} and f.fix.scope == "all-nodes"


def test_finding_keeps_what_the_caller_knows_better() -> None:
    sharper = Fix(env={"GLOO_SOCKET_IFNAME": "eth0"}, scope="nodes", per_node={"n": {"GLOO_SOCKET_IFNAME": "eth0"}})
    f = finding("bad-socket-ifname", ["n"], "s", [], fix=sharper, severity="warning", explanation="because")
    assert (f.severity, f.explanation, f.fix) == ("warning", "because", sharper)
    assert finding("remote-rank-died", ["n"], "s", [], fix=None).fix is None


def test_an_unknown_id_or_severity_is_a_bug() -> None:
    with pytest.raises(KeyError):
        finding("no-such-cause", ["n"], "s", [])
    with pytest.raises(ValueError):
        finding("p2p-hang", ["n"], "s", [], severity="fatal")


def test_master_not_started_reads_as_the_runbook_says_it() -> None:
    f = finding("master-not-started", ["node03"], "s", [])
    assert f.severity == "warning"
    assert f.explanation == ("A worker started before the master: it is waiting for the master's rendezvous store "
                             "and will time out (rdzv_timeout, 900 s by default) unless the master starts.")
    assert f.fix == Fix(scope="manual", explain="start the master (run launch-master); the worker joins as soon as "
                                                "its port listens")


def test_the_engine_and_preflight_say_ib_socket_mismatch_in_the_same_words() -> None:
    e = Engine()
    e.feed("a", ["h1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>"])
    e.feed("b", ["h2:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>"])
    e.feed("c", body("02-ib-socket-mismatch-wrong-type-4-3.log"))
    (live,) = e.findings
    ib, sock = F.NodeFacts(predicted_transport="IB"), F.NodeFacts(predicted_transport="Socket")
    (pre,) = judge.cross_node({"a": ib, "b": sock}, {"a": 1, "b": 1}, "nccl")
    assert live.id == pre.id == "ib-socket-mismatch"
    assert live.explanation == pre.explanation == CATALOG["ib-socket-mismatch"].explanation
    assert live.fix.env == pre.fix.env and live.fix.explain == pre.fix.explain


# ---- suppression, from the catalog ------------------------------------------------------------------
def test_a_job_wide_cause_suppresses_on_every_node() -> None:
    e = Engine()
    e.feed("node0", body("03-nccl-version-mismatch-node0.log"))
    e.feed("node1", body("03-nccl-version-mismatch-node1.log"))
    assert {f.id for f in e._findings.values()} == {"nccl-version-mismatch", "net-plugin-mismatch"}
    assert [f.id for f in e.findings] == ["nccl-version-mismatch"]


def test_ib_socket_mismatch_suppresses_a_remote_rank_that_died() -> None:
    e = Engine()
    e.feed("node02", body("02-ib-socket-mismatch-wrong-type-4-3.log"))
    e.feed("node03", body("53-remote-rank-died-broken-pipe.log"))
    assert {f.id for f in e._findings.values()} == {"ib-socket-mismatch", "remote-rank-died"}
    assert [f.id for f in e.findings] == ["ib-socket-mismatch"]


def test_a_node_level_cause_suppresses_only_on_its_own_nodes() -> None:
    firewall, died = body("14-bootstrap-connect-timed-out.log"), body("53-remote-rank-died-broken-pipe.log")
    apart = Engine()
    apart.feed("node02", firewall)
    apart.feed("node03", died)
    assert {f.id for f in apart.findings} == {"firewall-or-unreachable", "remote-rank-died"}
    together = Engine()
    together.feed("node02", firewall + died)
    assert [f.id for f in together.findings] == ["firewall-or-unreachable"]


def test_suppression_follows_the_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    e = Engine()
    e.feed("n", body("27-hostname-reverse-lookup.log"))
    assert [f.id for f in e.findings] == ["hostname-resolution"]
    monkeypatch.setitem(CATALOG, "hostname-resolution", replace(CATALOG["hostname-resolution"], suppresses=()))
    assert {f.id for f in e.findings} == {"hostname-resolution", "bad-master-addr"}



def test_an_id_this_version_does_not_know_hides_nothing_and_stays() -> None:
    """A bundle made by a newer ddptui can carry a cause this one has no entry for: the Findings tab
    that opens it applies the suppression and must not fail on it (it raised KeyError)."""
    died = finding("remote-rank-died", ["n1"], "n1: a peer rank died first", [Evidence("n1", 3, "x")])
    newer = Finding("a-cause-from-a-newer-ddptui", "error", ["n1"], "something new", [], "")
    assert catalog.hidden_ids([newer, died]) == set()
    segv = finding("segfault-exit-11", ["n1"], "n1: a rank died of SIGSEGV", [Evidence("n1", 0, "exit code -11")])
    assert catalog.hidden_ids([newer, died, segv]) == {"remote-rank-died"}

# ---- one finding per cause in preflight -----------------------------------------------------------
def _bad_ifname(node: str, route_if: str = "eth0") -> Finding:
    return finding("bad-socket-ifname", [node], f"{node}: GLOO_SOCKET_IFNAME=eth9 names no usable interface",
                   [Evidence(node, 0, "GLOO_SOCKET_IFNAME=eth9: no such interface", "ip -o addr")],
                   fix=Fix(env={"GLOO_SOCKET_IFNAME": route_if}, scope="nodes",
                           per_node={node: {"GLOO_SOCKET_IFNAME": route_if}}, explain="set it on each node"))


def test_merge_makes_one_finding_per_id_with_a_fix_per_node() -> None:
    other = finding("nproc-mismatch", ["node02", "node03"], "nproc differs", [])
    merged = merge_by_id([_bad_ifname("node02"), other, _bad_ifname("node03"), _bad_ifname("node04", "ens3")])
    assert [f.id for f in merged] == ["bad-socket-ifname", "nproc-mismatch"] and merged[1] is other
    f = merged[0]
    assert f.nodes == ["node02", "node03", "node04"] and [e.node for e in f.evidence] == f.nodes
    assert f.summary == "node02, node03, node04: GLOO_SOCKET_IFNAME=eth9 names no usable interface"
    assert f.fix.scope == "nodes" and f.fix.explain == "set it on each node"
    assert f.fix.per_node == {"node02": {"GLOO_SOCKET_IFNAME": "eth0"}, "node03": {"GLOO_SOCKET_IFNAME": "eth0"},
                              "node04": {"GLOO_SOCKET_IFNAME": "ens3"}}
    assert f.fix.env == {}  # the nodes differ: no common value


def test_merge_keeps_the_worst_severity_and_every_summary_that_differs() -> None:
    a = finding("wrong-interface", ["a"], "a: Gloo would use docker0", [], severity="warning",
                fix=Fix(scope="manual", explain="x"))
    b = finding("wrong-interface", ["b"], "b: Gloo would use lo", [], severity="error",
                fix=Fix(scope="manual", explain="y"))
    (f,) = merge_by_id([a, b])
    assert f.severity == "error" and f.nodes == ["a", "b"]
    assert f.summary == "a: Gloo would use docker0; b: Gloo would use lo"
    assert f.fix == Fix(scope="manual", explain="x; y")


def test_a_bad_gloo_ifname_on_three_nodes_is_one_finding() -> None:
    pb = parse_playbook("name: eth9\nnodes: node[02-04]\nmaster: node02\njob:\n  script: train.py\n"
                        "  backend: gloo\n  nproc_per_node: 1\n  env:\n    GLOO_SOCKET_IFNAME: eth9\n")
    targets = [NodeTarget(n.name, "master" if n.name == pb.master else "worker", RecordedNode(n.name),
                          "python3", {**pb.job.env_dict(), **dict(n.env)}, pb.nproc_of(n)) for n in pb.nodes]
    result = Preflight(pb, targets, MASTER_ADDR, on_check=lambda row: None).run()
    (f,) = [f for f in result.findings if f.id == "bad-socket-ifname"]
    assert [x.id for x in result.findings] == ["bad-socket-ifname"]
    assert f.nodes == ["node02", "node03", "node04"] and f.severity == "error"
    assert f.summary == "node02, node03, node04: GLOO_SOCKET_IFNAME=eth9 names no usable interface"
    assert [e.node for e in f.evidence] == f.nodes and all("eth9" in e.text for e in f.evidence)
    assert f.explanation == CATALOG["bad-socket-ifname"].explanation
    assert f.fix.scope == "nodes" and f.fix.env == {"GLOO_SOCKET_IFNAME": "eth0"}
    assert f.fix.per_node == {n: {"GLOO_SOCKET_IFNAME": "eth0"} for n in ("node02", "node03", "node04")}
