"""NCCL's own config files, read as NCCL reads them (src/misc/param.cc): the probe's command in a
real shell, its output parsed, and the precedence the checks give them (the environment first)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ddptui.core.checks import facts as F, judge, nccl_conf


def run_probe(cmd: str, env: dict[str, str]) -> str:
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True,
                          env={"PATH": os.environ["PATH"], **env}).stdout


def test_the_probe_reads_the_file_nccl_would_read_and_only_its_nccl_lines(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "mine.conf", tmp_path / "the playbook's.conf"
    mine.write_text("# a comment\nNCCL_SOCKET_IFNAME==eth0\nNCCL_IB_DISABLE=1\nNCCL_IB_DISABLE=0\n"
                    "no equals sign\nSECRET_TOKEN=abc\n#NCCL_DEBUG=INFO\nNCCL_TOPO_FILE=/opt/microsoft/ncv4/topo.xml\n")
    theirs.write_text("NCCL_NET=Socket\n")
    files = nccl_conf.parse(run_probe(nccl_conf.command(), {"NCCL_CONF_FILE": str(mine)}))
    # nothing stripped (`==eth0` is NCCL's exact-name form), the first line of a name kept, no other variable
    assert files[str(mine)] == {"NCCL_SOCKET_IFNAME": "=eth0", "NCCL_IB_DISABLE": "1",
                                "NCCL_TOPO_FILE": "/opt/microsoft/ncv4/topo.xml"}
    assert list(files)[0] == str(mine) and set(files) <= {str(mine), "/etc/nccl.conf"}
    # the playbook's NCCL_CONF_FILE is the job's: the probe reads that one, whatever the shell says
    files = nccl_conf.parse(run_probe(nccl_conf.command(str(theirs)), {"NCCL_CONF_FILE": str(mine)}))
    assert files[str(theirs)] == {"NCCL_NET": "Socket"} and str(mine) not in files
    # no file: nothing, and the probe's section still succeeds
    assert nccl_conf.parse(run_probe(nccl_conf.command(str(tmp_path / "none.conf")), {})).keys() <= {"/etc/nccl.conf"}


def test_the_environment_wins_then_the_first_file() -> None:
    files = {"/home/u/.nccl.conf": {"NCCL_IB_DISABLE": "1"},
             "/etc/nccl.conf": {"NCCL_IB_DISABLE": "0", "NCCL_TOPO_FILE": "/opt/microsoft/ncv4/topo.xml"}}
    assert nccl_conf.effective(files) == {"NCCL_IB_DISABLE": "1", "NCCL_TOPO_FILE": "/opt/microsoft/ncv4/topo.xml"}
    assert nccl_conf.origin("NCCL_IB_DISABLE", files) == "/home/u/.nccl.conf"
    assert nccl_conf.origin("NCCL_DEBUG", files) is None
    nf = F.NodeFacts(shell_env={"NCCL_IB_DISABLE": "0"}, nccl_conf=files)
    nf.env = {**nccl_conf.effective(files), **nf.shell_env}
    assert judge.set_in(nf, "NCCL_IB_DISABLE", {}) == ""  # the shell's value is the one NCCL keeps
    assert judge.set_in(nf, "NCCL_TOPO_FILE", {}) == " (in /etc/nccl.conf)"
    assert judge.set_in(nf, "NCCL_TOPO_FILE", {"NCCL_TOPO_FILE": ""}) == ""  # the playbook's, though empty
    status, summary = judge.env_verdict("n1", nf, {}, [])
    assert status == "pass"
    assert summary == "shell sets NCCL_IB_DISABLE=0; /etc/nccl.conf sets NCCL_TOPO_FILE=/opt/microsoft/ncv4/topo.xml"
    assert nf.to_json()["nccl_conf"] == files and "nccl_conf" not in F.NodeFacts().to_json()


def test_a_graph_file_from_an_image_is_a_warning_that_names_its_file() -> None:
    """NCCL_GRAPH_FILE makes NCCL take its rings from a file: "good for experiments ..., it should not
    be seen as something to use permanently" (NCCL's maintainer, NVIDIA/nccl#1008, where Azure's
    /etc/nccl.conf set it and nccl-tests failed on 2 of the VM's 4 GPUs; #1240 the same on one GPU)."""
    files = {"/etc/nccl.conf": {"NCCL_TOPO_FILE": "/opt/microsoft/ncv4/topo.xml", "NCCL_GRAPH_FILE": "/opt/microsoft/ncv4/graph.xml"}}
    nf = F.NodeFacts(nccl_conf=files)
    nf.env = nccl_conf.effective(files)
    status, summary = judge.env_verdict("n1", nf, {}, [])
    assert status == "warn"
    assert summary.startswith("NCCL_GRAPH_FILE=/opt/microsoft/ncv4/graph.xml (/etc/nccl.conf sets it): NCCL takes its rings")
    assert summary.endswith("; the shell sets no NCCL_/GLOO_/TORCH_/CUDA_ variables; /etc/nccl.conf sets "
                            "NCCL_GRAPH_FILE=/opt/microsoft/ncv4/graph.xml, NCCL_TOPO_FILE=/opt/microsoft/ncv4/topo.xml")
    # an empty value is still set: NCCL tries to load it (search.cc `if (str)`); the file's line is what to remove
    nf.env = {**nf.env, "NCCL_GRAPH_FILE": ""}
    status, summary = judge.env_verdict("n1", nf, {"NCCL_GRAPH_FILE": ""}, [])
    assert status == "warn" and summary.startswith("NCCL_GRAPH_FILE= (the playbook sets it)")
    assert judge.env_verdict("n1", F.NodeFacts(nccl_conf={"/etc/nccl.conf": {"NCCL_TOPO_FILE": "/t.xml"}},
                                               env={"NCCL_TOPO_FILE": "/t.xml"}), {}, [])[0] == "pass"
