"""The Slurm client commands ddptui runs on the login node (scontrol, squeue, salloc, scancel).

Every call is an argv list (no shell) with a timeout; what goes wrong comes back as a SlurmError
in words, with Slurm's own message. The commands find the cluster the way the user's shell does:
through SLURM_CONF when it is set, else the compiled-in slurm.conf.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import DdptuiError, UsageError

TERMINAL_STATES = ("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
                   "PREEMPTED", "REVOKED", "TIMEOUT")
_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9:/_]*)=")


class SlurmError(DdptuiError):
    """Slurm could not do what was asked; the message says why (Slurm's words included)."""


class SlurmInputError(SlurmError, UsageError):
    """What the user asked of Slurm cannot be used as given (exit 2): no Slurm here, an unknown
    partition, a job id Slurm does not know."""


class NoSlurm(SlurmInputError):
    """The Slurm commands are not installed here."""


class NoSuchJob(SlurmInputError):
    """The job id names no job Slurm knows."""


def which(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise NoSlurm(f"no Slurm here: `{tool}` is not installed or not on PATH "
                      "(run ddptui on the cluster's login node, or use transport: ssh)")
    return path


def run(argv: Sequence[str], timeout: float = 30.0, input: str | None = None) -> subprocess.CompletedProcess:
    """Run a Slurm command; raise SlurmError when it cannot run or times out (not on a non-zero exit)."""
    exe = which(argv[0])
    try:
        return subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{' '.join(argv)}` did not answer within {timeout:g} s: is slurmctld up "
                         "(scontrol ping)?") from None
    except OSError as e:
        raise SlurmError(f"cannot run {argv[0]}: {e.strerror or e}") from None


def said(r: subprocess.CompletedProcess) -> str:
    """What a failed command said, on one line, without the tool's own `tool: error:` prefix."""
    text = " ".join((r.stderr or r.stdout or "").split())
    text = re.sub(r"\b(?:salloc|srun|sbatch|scontrol|squeue|scancel): error: ", "", text)
    return text or f"exit code {r.returncode}"


def parse_record(line: str) -> dict[str, str]:
    """One `scontrol show ... -o` record (`Key=value Key=value ...`) as a dict. A value may hold
    spaces (`Reason=... `, `Command=...`): it runs until the next ` Key=`."""
    out: dict[str, str] = {}
    marks = list(_FIELD.finditer(line))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
        out[m.group(1)] = line[m.end():end].strip()
    return out


# what scontrol says where Slurm's commands are installed but no slurm.conf or controller is reachable
_NO_CLUSTER = ("Could not establish a configuration source", "failed to fetch config",
               "Unable to contact slurm controller", "Could not open configuration file")


def show_job(job_id: str, timeout: float = 15.0) -> dict[str, str]:
    """`scontrol show job -o ID`: JobState, NodeList, StdOut, Reason, Partition, RunTime, ...
    Raises NoSuchJob when Slurm does not know the id."""
    r = run(["scontrol", "show", "job", "-o", str(job_id)], timeout)
    if r.returncode != 0:
        if "Invalid job id" in (r.stderr + r.stdout):
            raise NoSuchJob(f"slurm job {job_id} does not exist (or has left slurmctld's memory): "
                            "`squeue -u $USER` lists your jobs")
        if any(w in r.stderr for w in _NO_CLUSTER):  # the commands are installed, no cluster is configured here
            raise NoSlurm(f"no Slurm cluster answers here (run this on the cluster's login node): scontrol: {said(r)}")
        raise SlurmError(f"scontrol show job {job_id}: {said(r)}")
    line = next((ln for ln in r.stdout.splitlines() if ln.strip()), "")
    return parse_record(line)


def hostnames(expr: str, timeout: float = 15.0) -> list[str]:
    """`scontrol show hostnames EXPR`: a Slurm hostlist expanded by Slurm itself."""
    if not expr or expr == "(null)":
        return []
    r = run(["scontrol", "show", "hostnames", expr], timeout)
    if r.returncode != 0:
        raise SlurmError(f"scontrol show hostnames {expr}: {said(r)}")
    return r.stdout.split()


def cancel(job_id: str, step: str | None = None, timeout: float = 15.0, signal: str | None = None) -> bool:
    """scancel JOB or JOB.STEP; True when scancel accepted it (a job already gone is not an error)."""
    target = f"{job_id}.{step}" if step is not None else str(job_id)
    argv = ["scancel", *(["--signal", signal] if signal else []), target]
    try:
        r = run(argv, timeout)
    except SlurmError:
        return False
    return r.returncode == 0


def partitions(timeout: float = 15.0) -> list[str]:
    r = run(["sinfo", "-h", "-o", "%R"], timeout)
    return sorted(set(r.stdout.split())) if r.returncode == 0 else []


@dataclass(frozen=True)
class JobStatus:
    """What the user watches while waiting: the job's state, why it pends, how long it has run."""

    job_id: str
    state: str  # PENDING, RUNNING, COMPLETED, ...
    reason: str = ""  # Slurm's pending reason (Resources, Priority, PartitionConfig, ...)
    nodes: str = ""  # the allocated hostlist expression (empty while pending)
    partition: str = ""
    run_time: str = ""

    @property
    def terminal(self) -> bool:
        return self.state.split()[0] in TERMINAL_STATES if self.state else False

    @classmethod
    def of(cls, job_id: str, rec: dict[str, str]) -> JobStatus:
        nodes = rec.get("NodeList", "")
        return cls(str(job_id), rec.get("JobState", ""), "" if rec.get("Reason") in (None, "None") else rec["Reason"],
                   "" if nodes in ("(null)", "None") else nodes, rec.get("Partition", ""), rec.get("RunTime", ""))


def status(job_id: str, timeout: float = 15.0) -> JobStatus:
    return JobStatus.of(job_id, show_job(job_id, timeout))
