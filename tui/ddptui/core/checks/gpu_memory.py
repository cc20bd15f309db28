"""`nvidia-smi -q`'s blocks (`q_blocks`: facts.parse_fabric reads the Fabric one), a GPU's memory
health as they say it, and nvidia-smi's word for a GPU it lost.

NVIDIA's GPU Memory Error Management guide: an A100 or later GPU that met an uncorrectable error
marks the row for remapping, and `Remapped Rows` says `Pending: Yes` until the GPU is reset (the
row stays in use until then); `Remapping Failure Occurred: Yes` means it had no spare row left:
the GPU is to be replaced. Older GPUs (V100) retire pages instead: `Retired Pages`' `Pending Page
Blacklist: Yes` (older drivers: `Pending: Yes`) waits for a reset the same way. And where nvidia-smi
cannot reach a GPU at all it says `Unable to determine the device handle for GPU<bus id>: Unknown
Error` (the GPU fell off the bus: Xid 79). Recorded: tests/data/corpus/nvidia-smi/11, 12 and
corpus 332."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from ..diagnosis.catalog import finding
from ..diagnosis.classify import GPU_LOST
from ..diagnosis.model import Evidence, Finding

BLOCKS = ("Remapped Rows", "Retired Pages")
_FLAGS = {("Remapped Rows", "Pending"): "remap_pending", ("Remapped Rows", "Remapping Failure Occurred"): "remap_failed",
          ("Retired Pages", "Pending Page Blacklist"): "retire_pending", ("Retired Pages", "Pending"): "retire_pending"}


@dataclass(frozen=True)
class GpuMemory:
    gpu: str  # the bus id of `nvidia-smi -q`'s `GPU 00000000:07:00.0` line ("?" where the block came alone)
    remap_pending: bool = False
    remap_failed: bool = False
    retire_pending: bool = False
    line: str = ""  # the line that says what `fault` says (its block, key and value)

    @property
    def fault(self) -> str:
        """What is wrong with it, in words ("" where nothing is)."""
        if self.remap_failed:
            return "a row remapping failed (no spare row left)"
        if self.remap_pending:
            return "rows wait for a GPU reset to be remapped"
        if self.retire_pending:
            return "pages wait for a GPU reset to be retired"
        return ""

    def to_json(self) -> dict:
        return {"gpu": self.gpu, "remap_pending": self.remap_pending, "remap_failed": self.remap_failed,
                "retire_pending": self.retire_pending}


def q_blocks(text: str, names: tuple[str, ...]) -> Iterator[tuple[str, str, str, str]]:
    """`nvidia-smi -q` (or what the probe's awk keeps of it) read for its blocks named `names`:
    (GPU bus id, block, key, value) for each such block's header (key "") and each `key : value`
    line in it, up to the next line as little indented as the header or a `GPU <bus id>` line. The
    bus id is "?" before any `GPU` line; any other line (an error, a shell's `not found`) is ignored."""
    gpu, block, depth = "?", "", 0
    for line in text.splitlines():
        if line.startswith("GPU ") and line[4:].strip():
            gpu, block = line[4:].strip(), ""
            continue
        indent = len(line) - len(line.lstrip())
        key, sep, value = (x.strip() for x in line.partition(":"))
        if block and indent <= depth:
            block = ""
        if not block and not sep and key in names:
            block, depth = key, indent
            yield gpu, block, "", ""
        elif block and sep:
            yield gpu, block, key, value


def parse_gpu_memory(text: str) -> list[GpuMemory]:
    """Each GPU's `Remapped Rows` and `Retired Pages` blocks of `nvidia-smi -q` (or what the probe's
    awk keeps of it), one entry a GPU that has either."""
    out: dict[str, GpuMemory] = {}
    for gpu, block, key, value in q_blocks(text, BLOCKS):
        m = out.setdefault(gpu, GpuMemory(gpu))
        if (flag := _FLAGS.get((block, key))) is not None and value.split()[:1] == ["Yes"]:
            said = f"{block}: {key}: Yes"
            out[gpu] = replace(m, **{flag: True}, line=said if flag == "remap_failed" or not m.line else m.line)
    return list(out.values())


def judge(node: str, memory: list[GpuMemory], smi_output: str, q_command: str, smi_command: str) -> tuple[str, list[Finding]]:
    """("", []) where the node's GPUs are sound; else the words for its gpus check and the finding:
    an error for a GPU nvidia-smi lost or one whose remapping failed, a warning for one that waits
    for a reset (the job may run, and may meet the bad rows again). `memory` comes from the output
    of `q_command` (the probe's nvidia-smi -q), `smi_output` from `smi_command` (its GPU list)."""
    lost = next((x for x in smi_output.splitlines() if GPU_LOST in x), None)
    if lost is not None:
        words = f"nvidia-smi cannot reach a GPU ({lost.strip()})"
        return words, [finding("gpu-hardware-fault", [node], f"{node}: {words}", [Evidence(node, 0, lost.strip(), smi_command)])]
    bad = [m for m in memory if m.fault]
    if not bad:
        return "", []
    words = "; ".join(("" if m.gpu == "?" else f"GPU {m.gpu}: ") + m.fault for m in bad)
    failed = any(m.remap_failed for m in bad)
    return words, [finding("gpu-hardware-fault", [node], f"{node}: {words}",
                           [Evidence(node, 0, ("" if m.gpu == "?" else f"GPU {m.gpu}: ") + m.line, q_command) for m in bad],
                           severity=None if failed else "warning")]
