"""A GPU that fails under a job (gpu-hardware-fault): the logs that say so (corpus 326-332: CUDA's
uncorrectable ECC error, the driver's Xid 119, nvidia-smi's lost GPU) are read by the corpus test;
here, what must not be taken for one, and what the finding tells the user to do."""

from __future__ import annotations

from ddptui.core.diagnosis.offline import diagnose_paths
from tests.conftest import DATA
from tests.core.test_diagnosis_corpus import split

KERNEL = DATA / "corpus" / "kernel"
NCCL = DATA / "corpus" / "nccl"


def test_an_applications_xid_is_not_a_failing_gpu(tmp_path) -> None:
    """Xid 13 and 31 (a kernel's exception, an MMU fault) are what a bug in a job's own kernels makes
    the driver say: on a B300 node, eight GPUs at once, and the thread traced it to an out-of-bounds
    write of FlashInfer's all-reduce (flashinfer-ai/flashinfer#3869). Not a GPU to drain."""
    log = tmp_path / "b300.log"
    log.write_text("\n".join(split(KERNEL / "01-xid13-31-software-fault-flashinfer-b300.log")[1]) + "\n")
    assert "Xid (PCI:0000:9a:00): 31," in log.read_text()
    assert [f.id for f in diagnose_paths([log])] == []


def test_an_ecc_error_names_the_node_and_says_to_reset_or_drain_it(tmp_path) -> None:
    """Rank 12's watchdog on a multi-node job (pytorch/pytorch#113128, the `[default0]:` prefix of
    torchrun's --tee): the finding is the node's, its evidence CUDA's own line, and its fix the
    commands a user runs on that node, Slurm's drain among them."""
    log = tmp_path / "node12.log"
    log.write_text("\n".join(split(NCCL / "330-gpu-hardware-fault-ecc-multinode-watchdog-default0-prefix.log")[1]) + "\n")
    (f,) = diagnose_paths([log])
    assert (f.id, f.severity, f.nodes) == ("gpu-hardware-fault", "error", ["node12"])
    assert f.summary == "node12: CUDA: uncorrectable ECC error (the GPU's memory failed)"
    assert f.evidence[0].line == 1 and "uncorrectable ECC error encountered" in f.evidence[0].text
    assert f.fix is not None and f.fix.scope == "manual" and not f.fix.env  # nothing to set: the GPU is the cause
    for what in ("nvidia-smi -q -d ECC,ROW_REMAPPER", "nvidia-smi -r", "state=drain", "--exclude"):
        assert what in f.fix.explain, what


def test_the_drivers_xid_lines_in_each_form_the_driver_prints(tmp_path) -> None:
    """The forms of the driver's Xid line that leptonai/gpud's xid package (and another exporter's
    parser) list as seen in dmesg (with and without `PCI:`, with and without pid and name), the newer
    drivers' three-line "fallen off the bus" without an Xid, and an application's Xid 14 beside
    them: only the GPU's are a finding."""
    lines = {
        "NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.": "0000:05:00",
        "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.": "0000:01:00",
        "NVRM: Xid (0000:af:00): 48, pid='<unknown>', name=<unknown>, Ch 00000008": "0000:af:00",
        "[ 1843.308145] NVRM: fallen off the bus and is not responding to commands.": None,
        "NVRM: Xid (0000:03:00): 14, Channel 00000001": "",
    }
    for k, (line, gpu) in enumerate(lines.items()):
        log = tmp_path / f"node{k}.log"
        log.write_text(line + "\n")
        found = [(f.id, f.summary) for f in diagnose_paths([log])]
        if gpu == "":
            assert found == [], line
        elif gpu is None:
            assert found == [("gpu-hardware-fault", f"node{k}: a GPU of this node is failing (memory errors, lost, or "
                                                    "not answering)")], line
        else:
            xid = line.split("): ")[1].split(",")[0]
            assert found == [("gpu-hardware-fault", f"node{k}: the driver reports Xid {xid} on the GPU at {gpu}")], line
