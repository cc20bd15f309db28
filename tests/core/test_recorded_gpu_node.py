"""What a real GPU machine printed, read as ddptui reads it: one NVIDIA H200 (driver 580.159.04,
CUDA 13.0, torch 2.11.0+cu130, NCCL 2.28.9), recorded by scripts/device/gpu-check.sh on the
machine the project was lent on 2026-12-04. The probe's output goes through preflight's own code
(tests/core/recorded_nodes.py answers with it); NCCL's own logs through `ddptui diagnose`'s."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddptui.core.checks.preflight import NodeTarget, Preflight
from ddptui.core.diagnosis.offline import diagnose_paths
from ddptui.core.events import CheckResult
from ddptui.core.playbook.loader import parse_playbook
from tests.conftest import DATA
from tests.core.recorded_nodes import RecordedNode
from tests.core.test_diagnosis_corpus import split

GPU_LOGS = sorted((DATA / "recorded" / "gpu").glob("*.log"))
PLAYBOOK = "name: h200\nnodes: gpu-h200\njob:\n  script: train.py\n  backend: nccl\n  nproc_per_node: {n}\n"


def preflight(nproc: int):
    pb = parse_playbook(PLAYBOOK.format(n=nproc))
    rows: list[CheckResult] = []
    node = RecordedNode("gpu-h200", ("listening\ndone accepted=0", 0))  # as the machine's listener answered
    targets = [NodeTarget("gpu-h200", "master", node, "python3", {}, nproc)]
    result = Preflight(pb, targets, "127.0.0.1", on_check=rows.append).run()
    return {r.check: r for r in rows}, result


def test_one_h200_is_read_as_what_it_is() -> None:
    rows, result = preflight(1)
    assert (rows["gpus"].status, rows["gpus"].summary) == ("pass", "1 × NVIDIA H200, 1 needed")
    assert (rows["torch"].status, rows["torch"].summary) == ("pass", "torch 2.11.0, CUDA 13.0")
    assert (rows["backend"].status, rows["backend"].summary) == ("pass", "nccl 2.28.9, 1 GPUs")
    assert rows["ib"].summary == "no IB/RoCE device → NET/Socket (no InfiniBand/RoCE device)"
    assert "fabric" not in rows  # `nvidia-smi -q`'s Fabric block says N/A: no NVSwitch fabric to wait for
    # the image has no iproute2: said, and nothing held for it
    assert (rows["interfaces"].status, rows["route"].status) == ("warn", "warn")
    assert [f.id for f in result.findings if f.severity == "error"] == []
    assert result.facts["gpu-h200"].cuda_driver == "13.0"


def test_two_processes_on_one_h200_are_refused_before_the_launch() -> None:
    rows, result = preflight(2)
    assert (rows["gpus"].status, rows["gpus"].summary) == ("fail", "1 × NVIDIA H200, 2 needed")
    assert [f.id for f in result.findings if f.severity == "error"] == ["gpu-count-short"]


@pytest.mark.parametrize("log", GPU_LOGS, ids=[p.stem for p in GPU_LOGS])
def test_real_nccl_on_an_h200_gives_the_recorded_cause(log: Path) -> None:
    """NCCL 2.28's lines carry a date and the source file (`[2026-12-04 18:34:34] vm:966:966 [0]
    init.cc:904 NCCL WARN ...`): the rules written on older logs still read them."""
    expected = set(split(log)[0]["expected-diagnosis"].split()) - {"none"}
    got = {f.id for f in diagnose_paths([log]) if f.severity in ("error", "warning")}
    assert got == expected


def test_the_recordings_are_the_ones_described() -> None:
    assert [p.name.split("-", 1)[0] for p in GPU_LOGS] == ["40", "41", "42", "43", "44"]
    healthy = GPU_LOGS[0].read_text()
    assert "NCCL version 2.28.9+cuda13.0" in healthy and "Init COMPLETE" in healthy
