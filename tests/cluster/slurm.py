"""A real Slurm cluster on the namespace cluster: a private munged, slurmctld on the login side
(the root namespace, on the bridge address) and one slurmd per node inside the node's network
namespace, with the node's hostname and /etc/hosts.

slurmd runs under `nsenter --net=/run/netns/NODE unshare --uts --mount`, not `ip netns exec`
(which remounts /sys; slurmd then dies on the cgroup mount), with proctrack/linuxproc and
task/none: no cgroups needed. Everything lives in one folder; SLURM_CONF points at its slurm.conf
(without it the client commands look for /etc/slurm/slurm.conf and stall on DNS).

    python -m tests.cluster.slurm up      # the namespace cluster (3 nodes) and Slurm on it
    python -m tests.cluster.slurm down

Needs root and the Debian packages slurm-wlm and munge.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.netns import SUBNET, Cluster, _kill

STATE = Path("/run/ddptui-testslurm.json")
CTLD_PORT, SLURMD_PORT = 16817, 16818
PARTITION = "debug"

SLURM_CONF = """\
ClusterName=ddpt
SlurmctldHost={login}({ctld_ip})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.sock
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/ctld
SlurmdSpoolDir={root}/%n/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/%n/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/%n/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
KillWait=5
InactiveLimit=0
MinJobAge=600
MessageTimeout=10
{nodes}
PartitionName={partition} Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""


def missing_requirements() -> str | None:
    for tool in ("slurmctld", "slurmd", "munged", "srun", "salloc", "sbatch", "nsenter"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed (apt-get install slurm-wlm munge)"
    return None


@dataclass
class SlurmCluster:
    root: Path
    nodes: list[str]
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def cmd(self, *argv: str, check: bool = True, timeout: float = 30, **kw) -> subprocess.CompletedProcess:
        r = subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
        return r

    def jobs(self) -> list[str]:
        """Every job in the queue (any state slurmctld still reports as queued or running)."""
        return self.cmd("squeue", "-h", "-o", "%i").stdout.split()

    def steps(self) -> list[str]:
        return self.cmd("squeue", "-h", "-s", "-o", "%i").stdout.split()

    @property
    def workdir(self) -> Path:
        """Where batch jobs run and write their output (the nodes share this machine's disk)."""
        d = self.root / "work"
        d.mkdir(exist_ok=True)
        return d

    def submit(self, script: str, cwd: Path | None = None) -> str:
        """sbatch a script (its text) from cwd (default: workdir); the job id."""
        cwd = cwd or self.workdir
        path = cwd / f"job-{time.monotonic_ns()}.sbatch"
        path.write_text(script)
        return self.cmd("sbatch", "--parsable", str(path), cwd=cwd).stdout.strip().split(";")[0]

    def state(self, job: str) -> str:
        r = self.cmd("scontrol", "show", "job", "-o", job, check=False)
        for word in r.stdout.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        return ""

    def wait_state(self, job: str, states: tuple[str, ...], timeout: float = 120) -> str:
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.state(job)
            if s in states:
                return s
            time.sleep(0.3)
        raise TimeoutError(f"job {job} still {self.state(job)} after {timeout} s (wanted {states})")

    def cancel_all(self) -> None:
        for job in self.jobs():
            self.cmd("scancel", job, check=False)
        deadline = time.time() + 20
        while self.jobs() and time.time() < deadline:
            time.sleep(0.2)


def up(cl: Cluster, nodes: list[str], root: Path | None = None) -> SlurmCluster:
    why = missing_requirements()
    if why:
        raise RuntimeError(why)
    down()
    root = Path(root or tempfile.mkdtemp(prefix="ddptui-slurm-"))
    root.chmod(0o755)  # munged wants every folder above its socket searchable
    sc = SlurmCluster(root, nodes)
    try:
        _up(cl, sc)
    except BaseException:
        down(sc)
        raise
    return sc


def _up(cl: Cluster, sc: SlurmCluster) -> None:
    root = sc.root
    m = root / "munge"
    m.mkdir(mode=0o755)
    key = m / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    subprocess.run(["munged", f"--key-file={key}", f"--socket={m}/munge.sock", f"--pid-file={m}/munged.pid",
                    f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"], check=True, capture_output=True)
    sc.pids["munged"] = int((m / "munged.pid").read_text())
    (root / "ctld").mkdir()
    node_lines = "\n".join(f"NodeName={n} NodeAddr={cl.nodes[n].ip} CPUs=2 RealMemory=1000 State=UNKNOWN"
                           for n in sc.nodes)
    sc.conf.write_text(SLURM_CONF.format(login=socket.gethostname().split(".")[0], ctld_ip=f"{SUBNET}.1",
                                         ctld_port=CTLD_PORT, slurmd_port=SLURMD_PORT, root=root, nodes=node_lines,
                                         partition=PARTITION, names=",".join(sc.nodes)))
    STATE.write_text(json.dumps({"root": str(root), "pids": sc.pids}))
    log = open(root / "daemons.log", "w")
    p = subprocess.Popen(["slurmctld", "-D", "-f", str(sc.conf)], env=sc.env, stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, start_new_session=True)
    sc.pids["slurmctld"] = p.pid
    for n in sc.nodes:
        (root / n / "spool").mkdir(parents=True)
        ns = cl.nodes[n].ns
        # the node's own /etc/hosts (what `ip netns exec` would bind) and hostname, then slurmd
        inner = (f"mount --bind /etc/netns/{ns}/hosts /etc/hosts && hostname {n} && "
                 f"exec slurmd -D -N {n} -f {sc.conf}")
        p = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "unshare", "--uts", "--mount", "sh", "-c", inner],
                             env=sc.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        sc.pids[f"slurmd-{n}"] = p.pid
    STATE.write_text(json.dumps({"root": str(root), "pids": sc.pids}))
    _wait_idle(sc)


def _wait_idle(sc: SlurmCluster, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    last = ""
    while time.time() < deadline:
        r = sc.cmd("sinfo", "-h", "-N", "-o", "%N %t", check=False, timeout=10)
        last = r.stdout.strip() or r.stderr.strip()
        states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
        if r.returncode == 0 and all(states.get(n) == "idle" for n in sc.nodes):
            return
        time.sleep(0.3)
    logs = (sc.root / "daemons.log").read_text()[-2000:] if (sc.root / "daemons.log").exists() else ""
    raise RuntimeError(f"slurm nodes not idle after {timeout} s: {last}\n{logs}")


def down(sc: SlurmCluster | None = None) -> None:
    """Stop the daemons and remove the folder; also those of an interrupted run."""
    pids: dict[str, int] = dict(sc.pids) if sc else {}
    root = sc.root if sc else None
    if STATE.exists():
        try:
            st = json.loads(STATE.read_text())
            pids = {**st.get("pids", {}), **pids}
            root = root or Path(st["root"])
        except (ValueError, KeyError):
            pass
    if root is not None and (root / "slurm.conf").exists():
        env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
        subprocess.run(["scancel", "--user=root"], env=env, capture_output=True, timeout=15, check=False)
    for _name, pid in sorted(pids.items(), key=lambda kv: kv[0] == "munged"):  # munged last
        _kill(pid, timeout=5.0)
    if root and root.exists() and root.name.startswith("ddptui-slurm-"):
        shutil.rmtree(root, ignore_errors=True)
    STATE.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    from tests.cluster import netns

    if not argv or argv[0] not in ("up", "down"):
        print(__doc__)
        return 2
    if argv[0] == "down":
        down()
        netns.down()
        return 0
    names = ["node02", "node03", "node04"]
    cl = netns.up([netns.NodeOpts(n) for n in names])
    t0 = time.time()
    sc = up(cl, names)
    print(f"# slurm up in {time.time() - t0:.1f} s\nexport SLURM_CONF={sc.conf}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
