"""The namespace cluster as a pytest fixture: up once per session, down even after a failure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.cluster.netns import Cluster, NodeOpts, down, missing_requirements, up
from tests.conftest import DATA

DOUBLES = DATA / "doubles"
GPU = str(DOUBLES / "gpu-v100x2")
GPU_IB = f"{DOUBLES / 'gpu-v100x2'}:{DOUBLES / 'ib-active'}"
GPU_FABRIC_DOWN = f"{DOUBLES / 'fabric-in-progress'}:{DOUBLES / 'gpu-v100x2'}"
GPU_REMAP_PENDING = f"{DOUBLES / 'remap-pending'}:{DOUBLES / 'gpu-v100x2'}"

NODES = ["node02", "node03", "node04"]


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/cluster/" in str(item.fspath):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def cluster():
    why = missing_requirements()
    if why:
        pytest.skip(why)
    specs = [NodeOpts("node02"), NodeOpts("node03", setenv={"NCCL_DEBUG": "WARN", "NCCL_SOCKET_NTHREADS": "4"}),
             NodeOpts("node04")] + [
        NodeOpts("inner", behind_jump=True),  # reachable only through the jump host
        NodeOpts("dead"),  # its sshd runs, but a firewall drops every packet to port 22
        NodeOpts("nosshd", sshd=False),  # up, no sshd: connection refused
        NodeOpts("loopy", loopback_hostname=True),  # its own name on 127.0.1.1
        NodeOpts("gpua", extra_path=GPU),  # test double: 2 GPUs, no IB
        NodeOpts("gpub", extra_path=GPU),
        # test doubles: 2 GPUs and an ACTIVE IB port; the driver's banner and nvidia_peermem (GPUDirect RDMA)
        NodeOpts("iba", extra_path=GPU_IB, nvidia_version=DOUBLES / "nvidia-version" / "proprietary-470", peermem=True),
        NodeOpts("ibb", extra_path=GPU_IB, setenv={"NCCL_IB_DISABLE": "1"}),  # ...but its shell disables IB
        NodeOpts("dummyib", extra_path=GPU, dummy_ifaces=(("ib0", "192.168.77.2/24"),)),  # NCCL would pick ib0
        NodeOpts("nvsw", extra_path=GPU_FABRIC_DOWN),  # test doubles: 2 GPUs, an NVSwitch fabric not set up
        NodeOpts("remap", extra_path=GPU_REMAP_PENDING),  # test doubles: 2 GPUs, one's rows waiting for a reset
        # an ACTIVE IB port, and NCCL's own config file (not its shell) disables IB
        NodeOpts("ibconf", extra_path=GPU_IB, setenv={"NCCL_CONF_FILE": str(DOUBLES / "nccl-conf" / "ib-disabled.conf")}),
        NodeOpts("shmnode", shm_size="1100m"),  # a /dev/shm of its own, as a container has
        # a BMC's host interface (169.254.3.1 on GH200 boards), listed before eth0: NCCL would take it
        NodeOpts("bmc", extra_path=GPU, dummy_ifaces=(("usb0", "169.254.3.1/16"),)),
        # an ACTIVE IB port (doubles), and Docker's locked-memory limit: 64 KiB, no CAP_IPC_LOCK
        NodeOpts("lowlock", extra_path=GPU_IB, memlock_kib=64),
        # an IPoIB port that nobody gave an address: its fe80:: alone, which NCCL, preferring ib*, takes
        NodeOpts("ibv6", extra_path=GPU, dummy_ifaces=(("ib0", None),)),
        # an ACTIVE IB port (doubles) and no GPUDirect RDMA: the proprietary modules, no nvidia_peermem
        NodeOpts("nogdr", extra_path=GPU_IB, nvidia_version=DOUBLES / "nvidia-version" / "proprietary-470"),
        # ...and the open modules, with which NCCL may use DMA-BUF on this kernel (5.12+)
        NodeOpts("dmabuf", extra_path=GPU_IB, nvidia_version=DOUBLES / "nvidia-version" / "open-565"),
    ]
    cl = up(specs)
    cl.drop_port("dead", 22)
    try:
        yield cl
    finally:
        down(cl)


@pytest.fixture(scope="session")
def slurm_cluster(cluster: Cluster):
    """Real Slurm on node02..node04 (tests/cluster/slurm.py), up once per session."""
    from tests.cluster import slurm as real_slurm

    why = real_slurm.missing_requirements()
    if why:
        pytest.skip(why)
    sc = real_slurm.up(cluster, NODES)
    try:
        yield sc
    finally:
        real_slurm.down(sc)


@pytest.fixture
def slurm(slurm_cluster, monkeypatch: pytest.MonkeyPatch):
    """The Slurm cluster with SLURM_CONF set for ddptui and the client commands, and an empty queue
    before and after the test (a test that leaves a job behind fails its own assertions first)."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    slurm_cluster.cancel_all()
    yield slurm_cluster
    slurm_cluster.cancel_all()


@pytest.fixture
def ssh_env(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME with nothing in ~/.ssh and no agent: only the cluster's ssh_config counts."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home


def cluster_playbook(tmp_path: Path, nodes: list[str] | str = NODES, *, name: str = "cluster-smoke",
                     port: int = 29540, extra_job: str = "", steps: str = "", args: str = '["--steps", "3"]',
                     backend: str = "gloo", env: str = "") -> Path:
    nodes_yaml = nodes if isinstance(nodes, str) else "[" + ", ".join(nodes) + "]"
    text = f"""\
name: {name}
nodes: {nodes_yaml}
job:
  script: builtin:smoke
  args: {args}
  nproc_per_node: 2
  master_port: {port}
  backend: {backend}
  python: {sys.executable}
  rdzv_timeout: 60
  master_wait_timeout: 60
  stop_grace: 5
  env:
    OMP_NUM_THREADS: 1
{env}{extra_job}
ssh:
  connect_timeout: 3
  command_timeout: 60
{steps}
"""
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return p
