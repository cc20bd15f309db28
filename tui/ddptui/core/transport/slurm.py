"""The slurm transport: every command on a node is a job step of the run's allocation.

`srun --jobid=J --overlap --nodelist=NODE -N1 -n1 ...` from the login node: no SSH to compute
nodes (which pam_slurm_adopt refuses outside a job), the node's processes are Slurm's to account
for and to kill, and the allocation's GPUs and limits apply. As over ssh, the env travels on stdin
(never on a command line) and a launch runs under the guard (guard.py), which reports its step id;
stopping asks the guard first and cancels the step (`scancel J.S`) if anything outlives it.

Steps use `--overlap` (since Slurm 20.11 a second step on a node otherwise waits for the first:
"step creation temporarily disabled") and a launch uses `--whole` (every CPU and GPU the job holds
on the node, not the one CPU a bare step gets).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import NodeError
from ..slurm import commands
from .base import ENV_PRELUDE, GUARD_SOURCE, CommandResult, LaunchSpec, OnLines, Transport, env_stdin
from .local import LocalProcess


class SlurmProcess(LocalProcess):
    """The guard running as a job step; srun relays its stdin, stdout and stderr."""

    def __init__(self, node: str, popen: subprocess.Popen, on_lines: OnLines, grace: float) -> None:
        super().__init__(node, popen, on_lines)
        self._grace = grace

    def _exit_status(self) -> tuple[int | None, bool]:
        rc = self._p.wait()
        # srun exits non-zero with no word from the guard when the step could not start or the node
        # went away (NODE_FAIL): the job is lost, not exited
        return (rc if rc >= 0 else 128 - rc), rc != 0

    def cancel_step(self) -> None:
        """What stop could not end: scancel the step, then srun itself."""
        if self.step:
            job, _, step = self.step.partition(".")
            commands.cancel(job, step)
        if self._p.poll() is None:
            self._p.terminate()


class SlurmTransport(Transport):
    kind = "slurm"

    def __init__(self, node: str, job_id: str, command_timeout: float = 60.0, gpus: int | None = None) -> None:
        super().__init__(node)
        self.job_id = str(job_id)
        self._timeout = command_timeout
        self._gpus = gpus
        self._procs: list[SlurmProcess] = []
        self._address: str | None = None
        self.step_env: dict[str, str] = {}

    @property
    def address(self) -> str | None:
        return self._address

    def _srun(self, *, whole: bool = False) -> list[str]:
        argv = ["srun", f"--jobid={self.job_id}", "--overlap", f"--nodelist={self.node}", "--nodes=1",
                "--ntasks=1", "--quiet", "--mpi=none", "--kill-on-bad-exit=1"]
        if whole:
            argv.append("--whole")
        return argv

    def connect(self) -> None:
        """The node is in the allocation and a step runs on it. Its address is the one Slurm reaches it
        at (NodeAddr), as ssh's is the one ssh reached: the master's is the rendezvous address."""
        r = self.run(["sh", "-c", "hostname -I 2>/dev/null || hostname -i; echo; env"], timeout=self._timeout)
        if r.rc is None:
            raise NodeError(self.node, f"a job step on {self.node} did not start within {self._timeout:g} s "
                                       f"(job {self.job_id}: `squeue -j {self.job_id} -s` shows its steps)")
        if not r.ok:
            raise NodeError(self.node, f"cannot run a job step on {self.node} in job {self.job_id}: "
                                       f"{' '.join((r.stderr or r.stdout).split()) or f'srun exit code {r.rc}'}")
        first, _, env = r.stdout.partition("\n\n")
        # what a step sees (SLURM_*, CUDA_VISIBLE_DEVICES): a fact of the allocation, shown by the checks
        self.step_env = dict(sorted((k, v) for k, _, v in (ln.partition("=") for ln in env.splitlines())
                                    if k.startswith(("SLURM_", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"))))
        own = first.split()
        self._address = _node_addr(self.node, own) or (own[0] if own else None)

    def run(self, argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
            stdin: bytes | None = None, shell: str | None = None) -> CommandResult:
        if shell is not None:
            inner, shown = ["sh", "-c", ENV_PRELUDE + shell], ("sh", "-c", shell)
        else:
            inner, shown = ["sh", "-c", ENV_PRELUDE + 'exec "$@"', "sh", *argv], tuple(argv)
        data = env_stdin(env) + (stdin or b"")
        t0 = time.monotonic()
        try:
            p = subprocess.Popen([commands.which("srun"), *self._srun()[1:], *inner], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            return CommandResult(shown, 127, "", str(e), time.monotonic() - t0)
        try:
            out, err = p.communicate(data, timeout=timeout)
            rc: int | None = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()  # srun's death ends the step (slurmstepd kills a step whose srun is gone)
            out, err = p.communicate()
            rc = None
        return CommandResult(shown, rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                             time.monotonic() - t0)

    def start(self, spec: LaunchSpec, on_lines: OnLines, python: str) -> SlurmProcess:
        argv = [commands.which("srun"), *self._srun(whole=True)[1:], python, "-c", GUARD_SOURCE]
        # its own session: Ctrl-C in ddptui's terminal must reach ddptui, which stops the job in order
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        p.stdin.write(spec.to_stdin())
        p.stdin.flush()
        proc = SlurmProcess(self.node, p, on_lines, spec.grace)
        self._procs.append(proc)
        return proc

    def put_file(self, local: Path, remote_name: str) -> str:
        """Into ~/.cache/ddptui on the node (often a shared home: written to a temporary name first)."""
        import hashlib

        data = Path(local).read_bytes()
        stem, dot, ext = remote_name.rpartition(".")
        name = f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}.{ext}" if dot else remote_name
        script = ('d="$HOME/.cache/ddptui" && mkdir -p "$d" && t="$d/.$1.$(hostname).$$" && cat > "$t" '
                  '&& mv -f "$t" "$d/$1" && printf %s "$d/$1"')
        r = self.run(["sh", "-c", script, "sh", name], timeout=self._timeout, stdin=data)
        if not r.ok or not r.stdout:
            raise NodeError(self.node, f"cannot copy {remote_name} to {self.node}: {r.stderr.strip() or r.rc}")
        return r.stdout.strip()

    def close(self) -> None:
        """Stop what still runs (not a job the user left running), then cancel what outlives the stop."""
        live = [p for p in self._procs if p.running and not p.detached.is_set()]
        for p in live:
            p.stop()
        if not live:
            return

        def reap() -> None:
            for p in live:
                if p.wait(p._grace + 5) is None and p.running:
                    p.cancel_step()

        t = threading.Thread(target=reap, daemon=True)
        t.start()
        t.join(max(p._grace for p in live) + 10)



def _node_addr(node: str, own: list[str]) -> str | None:
    """slurm.conf's NodeAddr for the node, as an address the node holds (a name is resolved here)."""
    import ipaddress
    import socket

    try:
        r = commands.run(["scontrol", "show", "node", "-o", node], timeout=15)
    except commands.SlurmError:
        return None
    addr = commands.parse_record(r.stdout.strip()).get("NodeAddr", "") if r.returncode == 0 else ""
    try:
        ipaddress.ip_address(addr)
        return addr
    except ValueError:
        pass
    try:
        ips = {ai[4][0] for ai in socket.getaddrinfo(addr or node, None, socket.AF_INET)}
    except OSError:
        return None
    return next((ip for ip in own if ip in ips), None)

