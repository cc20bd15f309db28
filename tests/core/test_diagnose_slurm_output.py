"""`ddptui diagnose FILE` on one Slurm batch output (`srun --label`): the same findings as the nodes'
own logs, evidence numbered in each node's split log. The logs are the recorded real ones, re-labeled
the way srun writes them (lines of the nodes interleaved, each prefixed with its task id)."""

from __future__ import annotations

import json
import subprocess
from itertools import zip_longest
from pathlib import Path

import pytest

from ddptui.core.diagnosis.offline import diagnose_paths
from tests.conftest import ddptui_exe
from tests.core.test_diagnosis_corpus import split
from tests.core.test_diagnosis_recorded import GROUPS

FAILING = [k for k in sorted(GROUPS) if len(GROUPS[k]) > 1
           and any(split(f)[0]["expected-diagnosis"] != "none" for f in GROUPS[k])]


def per_node(tmp_path: Path, key: str) -> tuple[list[str], list[Path], dict[str, list[str]]]:
    nodes, paths, bodies = [], [], {}
    for f in GROUPS[key]:
        node = f.stem.rsplit("-", 1)[1]
        body = split(f)[1]
        p = tmp_path / f"{node}.log"
        p.write_text("".join(x + "\n" for x in body))
        nodes.append(node)
        paths.append(p)
        bodies[node] = body
    return nodes, paths, bodies


def labeled(tmp_path: Path, nodes: list[str], bodies: dict[str, list[str]], header: bool = True,
            stride: int = 3) -> Path:
    """srun's way: chunks of each task's lines as they come, `i: ` before each line."""
    out = [f"ddptui: slurm job 4242 nodes {','.join(nodes)} master {nodes[0]}"] if header else []
    chunks = [[body[i:i + stride] for i in range(0, len(body), stride)] for body in (bodies[n] for n in nodes)]
    for row in zip_longest(*chunks, fillvalue=[]):
        for task, part in enumerate(row):
            out += [f"{task}: {x}" for x in part]
    p = tmp_path / "slurm-4242.out"
    p.write_text("\n".join(out) + "\n")
    return p


def shape(findings) -> list[tuple]:
    return sorted((f.id, f.severity, tuple(sorted(f.nodes)), tuple((e.node, e.line, e.text) for e in f.evidence))
                  for f in findings)


@pytest.mark.parametrize("key", FAILING)
def test_a_labeled_batch_output_gives_what_the_node_logs_give(tmp_path: Path, key: str) -> None:
    nodes, paths, bodies = per_node(tmp_path, key)
    want = diagnose_paths(paths, nnodes=len(nodes))
    assert want  # each of these jobs fails with a cause the rules name (an error or a warning)
    got = diagnose_paths([labeled(tmp_path, nodes, bodies)])
    assert shape(got) == shape(want)


def test_without_a_header_the_tasks_are_named_and_the_ids_are_the_same(tmp_path: Path) -> None:
    key = FAILING[0]
    nodes, paths, bodies = per_node(tmp_path, key)
    want = diagnose_paths(paths, nnodes=len(nodes))
    got = diagnose_paths([labeled(tmp_path, nodes, bodies, header=False)], nnodes=len(nodes))
    rename = {n: f"task{i}" for i, n in enumerate(nodes)}
    assert sorted(f.id for f in got) == sorted(f.id for f in want)
    assert {n for f in got for n in f.nodes} == {rename[n] for f in want for n in f.nodes}


def test_a_healthy_job_says_nothing_loud_through_the_cli(tmp_path: Path) -> None:
    key = next(k for k in sorted(GROUPS) if len(GROUPS[k]) > 1
               and all(split(f)[0]["expected-diagnosis"] == "none" for f in GROUPS[k]))
    nodes, _, bodies = per_node(tmp_path, key)
    out = labeled(tmp_path, nodes, bodies)
    r = subprocess.run([ddptui_exe(), "diagnose", str(out), "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    loud = [f for f in json.loads(r.stdout)["findings"] if f["severity"] in ("error", "warning")]
    assert not loud


def test_a_failing_job_through_the_cli_names_the_nodes_and_their_lines(tmp_path: Path) -> None:
    key = next(k for k in FAILING if "worker-killed" in GROUPS[k][0].name)
    nodes, _, bodies = per_node(tmp_path, key)
    r = subprocess.run([ddptui_exe(), "diagnose", str(labeled(tmp_path, nodes, bodies))],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "host-oom-exit-9" in r.stdout
    ev = next(ln.split()[0] for ln in r.stdout.splitlines() if ln.strip().startswith("node03:"))
    node, line = ev.rsplit(":", 2)[0], int(ev.rsplit(":", 2)[1])
    assert node == "node03" and bodies["node03"][line - 1].strip()[:120] in r.stdout
