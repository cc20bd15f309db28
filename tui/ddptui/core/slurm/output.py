"""A Slurm batch job's one output file, split back into one line stream per node.

`srun --label` prefixes each line of task i with `i: ` (padded to the width of the largest id:
` 0: ` once there are 10 tasks or more); with one task per node, task i is the i-th node. Names for
the tasks come, in this order, from the `ddptui: slurm job ID nodes A,B,C master A` header that
`ddptui sbatch` scripts print first, from the node list the caller gives (`scontrol show job`'s
NodeList expanded in order), else they are `task0`, `task1`, ...

Lines with no label:
  - srun's and slurmstepd's own (`srun: error: node03: task 1: Exited with exit code 1`,
    `slurmstepd: error: *** STEP 12.0 ON node02 CANCELLED AT ... ***`) go to the node they name
    (a task id or a known host name), else to the `slurm` stream;
  - everything else is the batch script's own shell (before, between and after its sruns). Slurm
    runs the batch script on the first node of the allocation, so these lines go to the first
    node's stream (`task0` when no names are known): no phantom node appears in a diagnosis or a
    run directory, and that node's log shows what its shell said, as a per-node log would.
  - the header itself is kept (`header`) and routed nowhere.

Fed in chunks of bytes (a growing file) or read from a path; whole lines come back in batches,
grouped per node in arrival order; a partial line waits for the rest (at most MAX_LINE bytes are
held). Nothing else is kept: memory stays bounded whatever the file's size.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..hostlist import HostlistError, expand_hostlist

HEADER = re.compile(r"^ddptui: slurm job (\d+) nodes (\S+) master (\S+)$")
LABEL = re.compile(r" *(\d{1,6}):(?: |$)")  # `0: text`, ` 0: text`, `3:` (an empty line); not `12:34:56`
SLURM_LINE = re.compile(r"(?:srun|slurmstepd|salloc|sbatch)(?:-[\w.-]+)?: ")
_TASK = re.compile(r"\btasks? (\d+)")
_NAMED = (re.compile(r"^slurmstepd-([\w.-]+): "), re.compile(r"^srun: error: ([\w.-]+): tasks? "),
          re.compile(r"\bON ([\w.-]+) CANCELLED"))
SLURM_STREAM = "slurm"
MAX_LINE = 1 << 20  # bytes: a longer "line" is cut there, never held whole
SNIFF_BYTES = 256 << 10
CHUNK = 4 << 20


@dataclass(frozen=True)
class Header:
    job_id: str
    nodes: tuple[str, ...]
    master: str

    @classmethod
    def parse(cls, line: str) -> Header | None:
        m = HEADER.match(line)
        if m is None:
            return None
        expr = m.group(2)
        try:
            nodes = expand_hostlist(expr) if "[" in expr else [n for n in expr.split(",") if n]
        except HostlistError:
            nodes = [n for n in expr.split(",") if n]
        return cls(m.group(1), tuple(nodes), m.group(3)) if nodes else None


class OutputSplitter:
    """Bytes (or lines) of one labeled output in, `{node: [lines]}` batches out (arrival order kept
    within each node). `nodes`: the names of tasks 0, 1, ... when the output has no header."""

    def __init__(self, nodes: Sequence[str] | None = None) -> None:
        self.header: Header | None = None
        self._given = tuple(nodes or ())
        self._names = self._given
        self._tail = b""
        self.tasks_seen: set[int] = set()
        self.labeled = 0  # lines that had a label, and lines that had none (header included)
        self.unlabeled = 0

    # ---- names ------------------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[str, ...]:
        """The node names known: the header's, else the caller's, else `task<i>` for each task seen."""
        if self._names:
            return self._names
        return tuple(f"task{i}" for i in sorted(self.tasks_seen or {0}))

    def use_names(self, nodes: Sequence[str]) -> None:
        """Name the tasks from now on (another file's header: a job's stderr has none of its own)."""
        self._names = tuple(nodes)

    def name(self, task: int) -> str:
        names = self._names
        return names[task] if task < len(names) else f"task{task}"

    @property
    def first_node(self) -> str:
        return self._names[0] if self._names else "task0"

    # ---- feeding ----------------------------------------------------------------------------------
    def feed(self, data: bytes) -> dict[str, list[str]]:
        data = self._tail + data
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) <= MAX_LINE:
                self._tail = data
                return {}
            cut = len(data)  # no newline in sight: cut it rather than hold it all
        self._tail = data[cut + 1:]
        lines = data[:cut].decode("utf-8", "replace").split("\n")  # one decode: no character spans a newline
        if b"\r" in data:
            lines = [ln.rstrip("\r") for ln in lines]
        return self.feed_lines(lines)

    def flush(self) -> dict[str, list[str]]:
        tail, self._tail = self._tail, b""
        return self.feed_lines([tail.decode("utf-8", "replace").rstrip("\r")]) if tail else {}

    def feed_lines(self, lines: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        label = LABEL.match
        names = self._names
        seen = self.tasks_seen
        labeled = 0
        for line in lines:
            m = label(line)
            if m is not None:
                task = int(m.group(1))
                if task not in seen:
                    seen.add(task)
                node = names[task] if task < len(names) else f"task{task}"
                text = line[m.end():]
                labeled += 1
            else:
                self.unlabeled += 1
                node = self._route_unlabeled(line)
                if node is None:  # the header: names from now on
                    names = self._names
                    continue
                text = line
            buf = out.get(node)
            if buf is None:
                buf = out[node] = []
            buf.append(text)
        self.labeled += labeled
        return out

    def _route_unlabeled(self, line: str) -> str | None:
        if line.startswith("ddptui: slurm job ") and self.header is None:
            h = Header.parse(line)
            if h is not None:
                self.header = h
                self._names = h.nodes
                return None
        if SLURM_LINE.match(line):
            return self._slurm_node(line)
        return self.first_node

    def _slurm_node(self, line: str) -> str:
        known = self._names
        for pat in _NAMED:
            m = pat.search(line)
            if m is not None and m.group(1) in known:
                return m.group(1)
        m = _TASK.search(line)
        if m is not None:
            task = int(m.group(1))
            if task < len(known) or task in self.tasks_seen:
                return self.name(task)
        for name in known:  # any known host named as a word
            if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", line):
                return name
        return SLURM_STREAM


def looks_labeled(path: Path) -> bool:
    """Does this file look like a `srun --label` output: the ddptui header, or most lines labeled?"""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return False
    lines = [ln for ln in head.decode("utf-8", "replace").splitlines() if ln.strip()]
    if len(head) == SNIFF_BYTES and lines:
        lines.pop()  # maybe cut in the middle
    if not lines:
        return False
    if any(HEADER.match(ln) for ln in lines[:20]):
        return True
    labeled = sum(1 for ln in lines if LABEL.match(ln))
    return labeled >= 2 and labeled * 2 > len(lines)


def split_file(path: Path, nodes: Sequence[str] | None = None,
               splitter: OutputSplitter | None = None) -> Iterator[dict[str, list[str]]]:
    """Read a labeled output in large chunks; yield its per-node batches (raises OSError)."""
    sp = splitter or OutputSplitter(nodes)
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            if batch := sp.feed(chunk):
                yield batch
    if batch := sp.flush():
        yield batch
