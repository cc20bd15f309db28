"""Get the nodes from Slurm: ask for an allocation (`salloc --no-shell`) or join one the user holds.

While the request pends, the caller hears the job's state, Slurm's reason and the time waited;
past `slurm.pending_timeout` (or when the caller gives up: Ctrl-C, quit) the request is cancelled,
so nothing is left queued. An allocation ddptui asked for is released when the run ends, unless
the playbook says `keep: true`; one the user brought is never released by ddptui.
"""

from __future__ import annotations

import atexit
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import StepFailed
from ..playbook.model import Playbook, SlurmOptions
from . import commands
from .commands import JobStatus, SlurmError, SlurmInputError

_JOB_ID = re.compile(r"(?:Pending|Granted) job allocation (\d+)|job (\d+) queued")
POLL = 1.0  # seconds between squeue looks while pending
# Pending reasons that waiting does not change (squeue(1) "JOB REASON CODES"): the request itself
# cannot be met as asked, so it is withdrawn at once instead of at pending_timeout.
NEVER = {
    "PartitionConfig": "the partition as configured cannot hold the request: more nodes, CPUs or memory than it has",
    "PartitionNodeLimit": "the partition cannot give that many nodes to one job",
    "PartitionTimeLimit": "the time asked for is over the partition's limit",
    "BadConstraints": "no node has the features asked for (slurm.constraint)",
    "InvalidAccount": "the account is not valid here (slurm.account)",
    "InvalidQOS": "the QOS is not valid here (slurm.qos)",
    "QOSMaxNodePerJobLimit": "the QOS allows fewer nodes per job",
    "AssocMaxNodesPerJobLimit": "your association allows fewer nodes per job",
    "QOSMaxWallDurationPerJobLimit": "the QOS allows less time per job",
    "AssocMaxWallDurationPerJobLimit": "your association allows less time per job",
}


@dataclass
class Allocation:
    job_id: str
    nodes: list[str]
    owned: bool  # ddptui asked for it: released at the end unless kept
    keep: bool = False
    partition: str = ""
    released: bool = False

    def __post_init__(self) -> None:
        if self.owned and not self.keep:  # whatever way ddptui ends (short of SIGKILL), nothing stays queued
            atexit.register(self.release)

    def release(self) -> bool:
        """scancel the allocation when it is ours to release; True when it was released now."""
        if not self.owned or self.keep or self.released:
            return False
        self.released = commands.cancel(self.job_id)
        return self.released

    def describe(self) -> str:
        how = "granted" if self.owned else "joined"
        return f"job {self.job_id} {how}: {len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''} " \
               f"({','.join(self.nodes)})" + (f" in {self.partition}" if self.partition else "")


def requested_nodes(pb: Playbook) -> int:
    s = pb.slurm or SlurmOptions()
    return s.nodes or len(pb.nodes) or 1


def salloc_argv(pb: Playbook) -> list[str]:
    """The salloc request for this playbook: one task per node (torchrun starts the ranks)."""
    s = pb.slurm or SlurmOptions()
    argv = ["salloc", "--no-shell", f"--job-name=ddptui-{pb.name}"[:200], f"--nodes={requested_nodes(pb)}",
            "--ntasks-per-node=1"]
    if pb.nodes:
        argv.append("--nodelist=" + ",".join(n.name for n in pb.nodes))
    for flag, value in (("partition", s.partition), ("time", s.time), ("account", s.account), ("qos", s.qos),
                        ("constraint", s.constraint)):
        if value:
            argv.append(f"--{flag}={value}")
    if s.gpus_per_node:
        argv.append(f"--gpus-per-node={s.gpus_per_node}")
    # A CPU per process at least: a bare request gets one CPU per node, which every rank would share
    # (and a cgroup would hold torchrun to). --exclusive or an explicit CPU count in extra_args wins.
    if not any(a.split("=")[0] in ("--cpus-per-task", "-c", "--exclusive", "--cpus-per-gpu") for a in s.extra_args):
        argv.append(f"--cpus-per-task={max((pb.nproc_of(n) for n in pb.nodes), default=pb.job.nproc_per_node)}")
    return argv + list(s.extra_args)


def describe_request(pb: Playbook) -> str:
    """What a slurm playbook that names no nodes will run on, in words."""
    s = pb.slurm or SlurmOptions()
    if s.job:
        return f"the nodes of Slurm job {s.job}"
    if not s.nodes:
        return "the nodes of this shell's Slurm allocation"
    return f"{s.nodes} node{'s' if s.nodes != 1 else ''} from Slurm" + (f" ({s.partition})" if s.partition else "")


def check_request(pb: Playbook) -> None:
    """Bad input before anything is asked of Slurm: no Slurm here, a job id or a partition Slurm
    does not know. Raises SlurmInputError (exit 2) in one line."""
    s = pb.slurm or SlurmOptions()
    commands.which("srun")
    job = s.job or _env_job()
    if job:
        commands.show_job(job)  # NoSuchJob
        return
    commands.which("salloc")
    if s.partition:
        known = commands.partitions()
        if known and s.partition not in known:
            raise SlurmInputError(f"slurm.partition {s.partition!r} is not a partition of this cluster "
                                  f"(sinfo lists: {', '.join(known)})")


def _env_job() -> str | None:
    import os

    return os.environ.get("SLURM_JOB_ID") or None


def allocate(pb: Playbook, on_status: Callable[[JobStatus, float], None],
             given_up: Callable[[], bool] = lambda: False) -> Allocation:
    """The allocation to run on: the playbook's `slurm.job`, the one ddptui runs inside, or a new one."""
    s = pb.slurm or SlurmOptions()
    job = s.job or _env_job()
    if job:
        st = _wait_running(job, s.pending_timeout, on_status, given_up, owned=False)
        return Allocation(job, commands.hostnames(st.nodes), owned=False, partition=st.partition)
    return _request(pb, s, on_status, given_up)


def _request(pb: Playbook, s: SlurmOptions, on_status: Callable[[JobStatus, float], None],
             given_up: Callable[[], bool]) -> Allocation:
    argv = salloc_argv(pb)
    p = subprocess.Popen([commands.which("salloc"), *argv[1:]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    said: list[str] = []
    job: dict[str, str] = {}
    known = threading.Event()

    def read() -> None:
        for line in p.stdout:
            said.append(line.strip())
            m = _JOB_ID.search(line)
            if m and "id" not in job:
                job["id"] = m.group(1) or m.group(2)
                known.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    t0 = time.monotonic()
    try:
        while p.poll() is None:
            waited = time.monotonic() - t0
            if given_up():
                raise StepFailed("the run was closed while waiting for the allocation; the request was cancelled")
            if waited > s.pending_timeout:
                st = commands.status(job["id"]) if "id" in job else None
                why = f" ({st.reason})" if st and st.reason else ""
                raise StepFailed(f"job {job.get('id', '?')} still {st.state if st else 'PENDING'}{why} after "
                                 f"{s.pending_timeout:g} s (slurm.pending_timeout); cancelled it: nothing is left queued")
            if "id" in job:
                st = commands.status(job["id"])
                on_status(st, waited)
                if st.reason in NEVER:
                    raise StepFailed(f"Slurm will not grant job {job['id']} as asked: {st.reason} ({NEVER[st.reason]})"
                                     f"{_salloc_said(said)}; cancelled it: nothing is left queued")
            known.wait(POLL) if "id" not in job else time.sleep(POLL)
    except BaseException:
        _withdraw(p, job.get("id"))
        raise
    reader.join(5)
    if p.returncode != 0 or "id" not in job:
        raise _refused(said, p.returncode)
    st = commands.status(job["id"])
    alloc = Allocation(job["id"], commands.hostnames(st.nodes), owned=True, keep=s.keep, partition=st.partition)
    on_status(st, time.monotonic() - t0)
    return alloc


def _salloc_said(said: list[str]) -> str:
    words = [re.sub(r"^salloc: (error: )?", "", s) for s in said if s and not _JOB_ID.search(s)]
    return f" — salloc: {'; '.join(words)}" if words else ""


def _withdraw(p: subprocess.Popen, job_id: str | None) -> None:
    """Nothing left queued: cancel the request (pending or just granted) and end salloc."""
    if job_id:
        commands.cancel(job_id)
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()


def _refused(said: list[str], rc: int | None) -> SlurmError:
    text = " ".join(s for s in said if s)
    words = re.sub(r"salloc: (error: )?", "", text).strip() or f"salloc exit code {rc}"
    if "invalid partition" in text.lower():
        return SlurmInputError(f"Slurm refused the allocation: {words}")
    return StepFailed(f"Slurm refused the allocation: {words}")


def _wait_running(job: str, timeout: float, on_status: Callable[[JobStatus, float], None],
                  given_up: Callable[[], bool], owned: bool) -> JobStatus:
    t0 = time.monotonic()
    while True:
        st = commands.status(job)
        waited = time.monotonic() - t0
        on_status(st, waited)
        state = st.state.split()[0] if st.state else ""
        if state == "RUNNING":
            return st
        if st.terminal or state not in ("PENDING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED"):
            raise StepFailed(f"job {job} is {st.state or 'gone'}: it has no nodes to run on "
                             "(start a new allocation, or drop slurm.job)")
        if waited > timeout:
            raise StepFailed(f"job {job} still {st.state} ({st.reason}) after {timeout:g} s")
        if given_up():
            raise StepFailed(f"the run was closed while waiting for job {job}")
        time.sleep(POLL)


def status_line(st: JobStatus, waited: float) -> str:
    why = f" ({st.reason})" if st.reason and st.state.startswith("PENDING") else ""
    where = f" on {st.nodes}" if st.nodes and not st.state.startswith("PENDING") else ""
    return f"job {st.job_id} {st.state}{why}{where}, {waited:.0f} s"
