"""Bandwidth: the smoke workload's lines, busbw, the time-bounded sweep, the reference table, the
playbook's `bandwidth:` block and the slow-interconnect finding (live engine and offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddptui.core.diagnosis.links import BUSBW_REFERENCE, healthy_floor, link_figures
from ddptui.core.diagnosis.engine import Engine
from ddptui.core.diagnosis.offline import diagnose_paths
from ddptui.core.errors import PlaybookError
from ddptui.core.logs.bandwidth import Bandwidth, bus_factor, size_words
from ddptui.core.logs.results import parse_bandwidth_line, parse_result_line
from ddptui.core.playbook.loader import parse_playbook
from ddptui.workloads import smoke

MiB = 1 << 20
INTER = ("[default0]:ddptui-smoke bandwidth scope=inter-node size=33554432 algbw_gbps=0.8123 busbw_gbps=0.8123 "
         "backend=gloo ranks=2 iters=7 time_ms=41.3 sizes=1048576,8388608,33554432 busbw_by_size=0.5,0.7,0.8123 "
         "host=node02 rank=0")
RESULT = ("[default0]:ddptui-smoke result host=node02 rank=0 local_rank=0 world_size=4 backend=gloo all_reduce=ok "
          "sum=6 expected=6 params_in_sync=true allreduce_ms=3.10 total_s=4.20")


def inter(busbw: float, backend: str = "gloo", host: str = "node02", rank: int = 0) -> str:
    algo = " nccl_algo=Ring" if backend == "nccl" else ""
    return (f"[default0]:ddptui-smoke bandwidth scope=inter-node size=33554432 algbw_gbps={busbw} busbw_gbps={busbw} "
            f"backend={backend} ranks=2 iters=3 time_ms=1.0 sizes=1048576,8388608,33554432 "
            f"busbw_by_size={busbw},{busbw},{busbw} host={host} rank={rank}{algo}")


# ---- the lines -----------------------------------------------------------------------------------------
def test_a_bandwidth_line_parses_into_typed_figures() -> None:
    d = parse_bandwidth_line(INTER)
    assert d["scope"] == "inter-node" and d["size"] == 32 * MiB and d["ranks"] == 2 and d["iters"] == 7
    assert d["algbw_gbps"] == d["busbw_gbps"] == 0.8123 and d["backend"] == "gloo" and d["host"] == "node02"
    assert d["sizes"] == [MiB, 8 * MiB, 32 * MiB] and d["busbw_by_size"] == [0.5, 0.7, 0.8123]


def test_other_lines_are_not_bandwidth_lines_and_the_result_line_is_unchanged() -> None:
    assert parse_bandwidth_line(RESULT) is None and parse_result_line(INTER) is None
    assert parse_bandwidth_line("ddptui-smoke bandwidth scope=world size=big algbw_gbps=1 busbw_gbps=1 ranks=2") is None
    assert parse_bandwidth_line("ddptui-smoke bandwidth scope=world") is None  # no figures, not skipped
    r = parse_result_line(RESULT)
    assert r["rank"] == 0 and r["world_size"] == 4 and r["all_reduce"] == "ok" and r["sum"] == "6"
    skipped = parse_bandwidth_line("ddptui-smoke bandwidth scope=inter-node skipped=single-node backend=gloo ranks=1 "
                                   "host=vm rank=0")
    assert skipped["skipped"] == "single-node" and skipped["ranks"] == 1


def test_busbw_is_algbw_times_2_n_minus_1_over_n() -> None:
    assert [bus_factor(n) for n in (2, 4, 8, 16)] == [1.0, 1.5, 1.75, 1.875]
    assert all(smoke.bus_factor(n) == bus_factor(n) for n in range(2, 65))  # the workload cannot import core
    line = smoke.bandwidth_line("world", [(MiB, 0.001, 20), (32 * MiB, 0.02, 5)], 4, "gloo", "node02", 0)
    d = parse_bandwidth_line(line)
    assert d["size"] == 32 * MiB and d["ranks"] == 4 and d["iters"] == 5 and d["sizes"] == [MiB, 32 * MiB]
    assert d["algbw_gbps"] == pytest.approx(32 * MiB / 0.02 / 1e9, rel=1e-3)
    assert d["busbw_gbps"] == pytest.approx(d["algbw_gbps"] * 1.5, rel=1e-3)


def test_the_sweep_stays_within_its_budget_whatever_the_link() -> None:
    for rate in (50e9, 2e9, 2.5e6, 2.5e5):  # bytes/s: NVLink-ish, a veth, 20 Mbit/s, 2 Mbit/s
        calls: list[tuple[int, int]] = []

        def timed(nbytes: int, iters: int, calls: list = calls, rate: float = rate) -> float:
            calls.append((nbytes, iters))
            return nbytes / rate

        out = smoke.sweep(timed, smoke.BW_SIZES, 1.5)
        spent = sum(n / rate * i for n, i in calls)
        assert out and calls[0] == (smoke.BW_WARMUP, 1)  # a small warm-up first
        assert spent <= 1.5 + 2 * smoke.BW_WARMUP / rate, (rate, calls)
        assert all(1 <= i <= smoke.BW_MAX_ITERS for _, i in calls)
    assert [s for s, _, _ in smoke.sweep(lambda n, i: n / 2e9, smoke.BW_SIZES, 1.5)] == [MiB, 8 * MiB, 32 * MiB]
    assert [s for s, _, _ in smoke.sweep(lambda n, i: n / 2.5e6, smoke.BW_SIZES, 1.5)] == [MiB]  # 20 Mbit/s
    assert [s for s, _, _ in smoke.sweep(lambda n, i: n / 2.5e5, smoke.BW_SIZES, 1.5)] == [256 << 10]  # 2 Mbit/s


# ---- the summary and the watch step's words ---------------------------------------------------------
def test_the_summary_takes_each_scope_once_and_names_its_nodes() -> None:
    bw = Bandwidth(min_busbw_gbps=0.05)
    assert bw.summary() is None and bw.words("; ") == ""
    world = INTER.replace("scope=inter-node", "scope=world").replace("ranks=2", "ranks=4")
    for node, line in (("node02", world), ("node03", world), ("node03", INTER), ("node02", INTER), ("node03", "x")):
        bw.feed(node, line)
    s = bw.summary()
    assert s["backend"] == "gloo" and s["min_busbw_gbps"] == 0.05 and s["single_node"] is False
    assert s["inter_node"]["busbw_gbps"] == 0.8123 and s["inter_node"]["nodes"] == ["node02", "node03"]
    assert s["world"]["ranks"] == 4 and s["world"]["sizes"] == [MiB, 8 * MiB, 32 * MiB]
    assert bw.words("; ") == "; inter-node busbw 0.812 GB/s (32 MiB, gloo)"
    json.dumps(s)


def test_one_node_says_so() -> None:
    bw = Bandwidth()
    bw.feed("localhost", INTER.replace("scope=inter-node", "scope=world"))
    bw.feed("localhost", "ddptui-smoke bandwidth scope=inter-node skipped=single-node backend=gloo ranks=1")
    assert bw.summary()["single_node"] is True and bw.summary()["inter_node"] is None
    assert bw.words() == "busbw 0.812 GB/s over 2 ranks (32 MiB, gloo; one node, no inter-node figure)"
    assert size_words(256 << 10) == "256 KiB" and size_words(1 << 30) == "1 GiB"


# ---- the reference table -------------------------------------------------------------------------------
def test_the_reference_table_gives_a_floor_per_transport() -> None:
    hdr = [f for f in link_figures("IB") if "HDR" in f.link]
    ndr = [f for f in link_figures("IB") if "NDR" in f.link]
    assert hdr[0].busbw_gbps == (24, 24) and ndr[0].busbw_gbps == (46, 49)
    assert healthy_floor("IB") == 6.0  # half of a 100 Gb/s NIC's ~12 GB/s
    assert healthy_floor("Socket") == 0.5  # half of 10 GbE's ~1 GB/s
    assert healthy_floor(None) is None and healthy_floor("gloo") is None
    assert {f.transport for f in BUSBW_REFERENCE} == {"NVLink", "IB", "Socket"}
    assert all(f.source for f in BUSBW_REFERENCE)


# ---- the finding ----------------------------------------------------------------------------------------
def _engine(lines: dict[str, list[str]], **kw) -> list:
    e = Engine(expected_nnodes=2, **kw)
    for node, ls in lines.items():
        e.feed(node, ls)
    return [f for f in e.finish() if f.id == "slow-interconnect"]


def test_below_the_playbook_threshold_raises_slow_interconnect() -> None:
    (f,) = _engine({"node02": ["hello", inter(0.0021)], "node03": [inter(0.0021, host="node03", rank=2)]},
                   min_busbw_gbps=0.05)
    assert f.severity == "warning" and f.nodes == ["node02", "node03"] and f.active
    assert "0.0021 GB/s (32 MiB, gloo, 2 nodes)" in f.summary and "min_busbw_gbps (0.05 GB/s)" in f.summary
    assert [(e.node, e.line) for e in f.evidence] == [("node02", 2), ("node03", 1)]
    assert "only the playbook's threshold applies" in f.explanation and "sizes 1 MiB, 8 MiB, 32 MiB" in f.explanation


def test_without_a_threshold_or_a_known_transport_nothing_is_raised() -> None:
    assert _engine({"node02": [inter(0.0021)]}) == []
    assert _engine({"node02": [inter(0.9)]}, min_busbw_gbps=0.05) == []  # above it
    skipped = "ddptui-smoke bandwidth scope=inter-node skipped=single-node backend=gloo ranks=1 host=vm rank=0"
    assert _engine({"localhost": [skipped]}, min_busbw_gbps=100) == []  # one node: no inter-node figure


def test_nccl_over_sockets_far_below_the_table_names_the_fallback() -> None:
    nccl = ["node02:100:200 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
            "node02:100:200 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>",
            "node02:100:200 [0] NCCL INFO Using network Socket", inter(0.1, "nccl")]
    (f,) = _engine({"node02": nccl})
    assert "nccl over NET/Socket, NCCL_ALGO=Ring" in f.summary and "(0.5 GB/s)" in f.summary
    assert "NCCL_IB_DISABLE=1 is set on node02" in f.explanation and "(eth0)" in f.explanation
    assert "with NCCL_ALGO=Ring" in f.explanation
    assert any("Using network Socket" in e.text and e.line == 3 for e in f.evidence)
    assert _engine({"node02": nccl[:3] + [inter(1.2, "nccl")]}) == []  # a healthy 10 GbE figure


def test_ib_far_below_one_nic_points_at_the_fabric() -> None:
    ib = ["node02:100:200 [0] NCCL INFO Using network IB", inter(2.0, "nccl")]
    (f,) = _engine({"node02": ib})
    assert "NET/IB" in f.summary and "ibstat" in f.explanation and "200 Gb/s NIC (HDR): ~24 GB/s" in f.explanation
    assert _engine({"node02": ib[:1] + [inter(20.0, "nccl")]}) == []


def test_diagnose_reads_the_threshold_from_the_run_directory(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir()
    (d / "playbook.yaml").write_text("name: x\nnodes: [node02, node03]\njob: {script: builtin:smoke}\n"
                                     "bandwidth:\n  min_busbw_gbps: 0.05\n")
    (d / "node02.log").write_text(inter(0.002) + "\n")
    (d / "node03.log").write_text(inter(0.002, host="node03", rank=2) + "\n")
    assert [f.id for f in diagnose_paths([d])] == ["slow-interconnect"]
    (d / "playbook.yaml").write_text("name: x\nnodes: [node02, node03]\njob: {script: builtin:smoke}\n")
    assert diagnose_paths([d]) == []


# ---- the playbook ----------------------------------------------------------------------------------------
def test_the_bandwidth_block_loads_and_its_mistakes_have_positions() -> None:
    base = "name: x\nnodes: localhost\ntransport: local\njob: {script: builtin:smoke}\n"
    assert parse_playbook(base).bandwidth.min_busbw_gbps is None
    assert parse_playbook(base + "bandwidth:\n  min_busbw_gbps: 20\n").bandwidth.min_busbw_gbps == 20.0
    with pytest.raises(PlaybookError) as e:
        parse_playbook(base + "bandwidth:\n  min_busbw_gbps: fast\n  min_busbw: 3\n", "pb.yaml")
    got = [(p.line, p.col, p.message) for p in e.value.problems]
    assert got == [(6, 19, "bandwidth.min_busbw_gbps must be a number, not a string ('fast')"),
                   (7, 3, "unknown key 'min_busbw' in bandwidth (did you mean 'min_busbw_gbps'?)")]
    with pytest.raises(PlaybookError) as e:
        parse_playbook(base + "bandwidth:\n  min_busbw_gbps: -1\n", "pb.yaml")
    assert e.value.problems[0].message == "bandwidth.min_busbw_gbps must be greater than 0"
