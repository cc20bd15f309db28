"""`ddptui diagnose`: the same engine, on saved logs or a run directory, read once in chunks.

A run directory says more than its logs: summary.json has each node's exit code (fed to the
engine as the live run did) and the findings of what no log shows (the checks, the runner's own
observations such as master-not-started); those are kept unless the logs gave the same id. Its
playbook gives the node count and `bandwidth.min_busbw_gbps` (slow-interconnect). A run made by
`check` has no node logs: its findings are the checks'.

A log file given by itself that is a Slurm batch job's `srun --label` output (the `ddptui: slurm job`
header, or most lines labeled) is the logs of all its nodes: it is split per node (slurm/output.py)
and diagnosed as if each node's log had been given, line numbers counted in each node's own lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ..errors import DdptuiError
from ..logs.rundir import clean_summary
from ..slurm.output import OutputSplitter, looks_labeled, split_file
from .catalog import hidden_ids
from .engine import Engine
from .model import Finding
from .sieve import Sieves

BLOCK = 4 << 20  # characters read and scanned at a time


class DiagnoseInputError(DdptuiError):
    pass


def _summary(run: Path) -> dict:
    try:
        return clean_summary(json.loads((run / "summary.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return {}


def _node_logs(paths: list[Path], summaries: dict[Path, dict]) -> tuple[list[tuple[str, Path]], int | None, float | None]:
    """The node logs, and what a run directory's playbook (or summary) says: the node count,
    bandwidth.min_busbw_gbps."""
    logs: list[tuple[str, Path]] = []
    nnodes = min_busbw = None
    for p in paths:
        if p.is_dir():
            found = sorted(p.glob("*.log"))
            if not found and not (p / "summary.json").is_file():
                raise DiagnoseInputError(f"{p}: a folder without node logs (*.log); give a run directory or log files")
            logs += [(f.stem, f) for f in found]
            pb = p / "playbook.yaml"
            if pb.is_file():
                try:
                    from ..playbook.loader import parse_playbook

                    playbook = parse_playbook(pb.read_text(encoding="utf-8"), str(pb))
                    nnodes, min_busbw = len(playbook.nodes), playbook.bandwidth.min_busbw_gbps
                except (DdptuiError, OSError, ValueError):  # the playbook only says how many nodes
                    pass
            if nnodes is None:
                nnodes = len(summaries[p].get("nodes") or {}) or None
        elif p.is_file():
            logs.append((p.stem, p))
        elif p.exists():  # a pipe would be read to its end, or wait for ever for a writer
            raise DiagnoseInputError(f"{p}: is not a regular file (a pipe, a device or a socket); "
                                     "give log files or a run directory")
        else:
            raise DiagnoseInputError(f"{p}: no such file or directory")
    names = [n for n, _ in logs]
    if len(set(names)) != len(names):  # two files named alike: keep them apart
        logs = [(f"{n}#{i}" if names.count(n) > 1 else n, p) for i, (n, p) in enumerate(logs)]
    return logs, nnodes, min_busbw


def _feed_labeled(engine: Engine, path: Path) -> None:
    """A `srun --label` output split per node (slurm/output.py); each node's lines numbered 1, 2, ...
    in its own split log, as `ddptui attach` records them."""
    sp = OutputSplitter()
    counts: dict[str, int] = {}
    try:
        for batch in split_file(path, splitter=sp):
            if engine.expected_nnodes is None and sp.header is not None:
                engine.expected_nnodes = len(sp.header.nodes)
            for node, lines in batch.items():
                engine.feed(node, lines, counts.get(node, 0) + 1)
                counts[node] = counts.get(node, 0) + len(lines)
    except OSError as e:
        raise DiagnoseInputError(f"{path}: cannot read: {e.strerror}") from None


def text_blocks(path: Path) -> Iterator[str]:
    """A log's whole lines, a block of them at a time, as one text each (no newline after the last)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:  # text mode: \r\n and \r end lines, as before
            tail = ""
            while block := f.read(BLOCK):
                block = tail + block
                cut = block.rfind("\n")
                if cut < 0:
                    tail = block
                    continue
                yield block[:cut]  # whole lines, in bulk: never a list of them
                tail = block[cut + 1:]
            if tail:
                yield tail
    except IsADirectoryError:
        raise DiagnoseInputError(f"{path}: is a directory") from None
    except OSError as e:
        raise DiagnoseInputError(f"{path}: cannot read: {e.strerror}") from None


def diagnose_paths(paths: list[Path], nnodes: int | None = None, processes: int | None = None) -> list[Finding]:
    """The findings of these logs and run directories. `processes`: this one and the sieves that
    read logs beside it (sieve.py); None: by cores, where the logs are big enough to be worth it."""
    summaries = {p: _summary(p) for p in paths if p.is_dir()}  # each read once
    logs, found_nnodes, min_busbw = _node_logs(paths, summaries)
    engine = Engine(expected_nnodes=nnodes or found_nnodes, min_busbw_gbps=min_busbw)
    runs = list(summaries.values())
    for s in runs:
        feed_exits(engine, s)
    labeled = {path for _, path in logs if path in paths and looks_labeled(path)}  # Slurm batch outputs
    with Sieves([(node, path) for node, path in logs if path not in labeled], processes) as sieves:
        for node, path in logs:
            if path in labeled:  # one Slurm batch output: the logs of its nodes
                _feed_labeled(engine, path)
            elif not sieves.feed(engine, node):  # a sieve's: what it forwarded, in the order it was read
                for block in text_blocks(path):
                    engine.feed_text(node, block)
    found = engine.finish()
    for s in runs:
        found = with_stored(found, s.get("findings") or ())
    return found


def feed_exits(engine: Engine, summary: dict) -> None:
    """A run's record (summary.json, cleaned) of each node that failed with an exit code, as the
    live run told the engine."""
    for node, d in (summary.get("nodes") or {}).items():
        if d.get("state") == "failed" and isinstance(d.get("exit_code"), int) and d["exit_code"] != 0:
            engine.node_exited(node, d["exit_code"])


def with_stored(found: list[Finding], stored) -> list[Finding]:
    """The logs' findings, and those the run recorded that no log shows (the checks', the runner's
    own such as master-not-started), unless the logs gave the same id; none that a better
    explanation among them all covers (a run recorded before today's rules knew it)."""
    ids = {f.id for f in found}
    out = list(found)
    for d in stored:
        if isinstance(d, dict) and d.get("id") and d["id"] not in ids:
            out.append(Finding.from_json(d))
            ids.add(d["id"])
    hidden = hidden_ids(out)
    return [f for f in out if f.id not in hidden]
