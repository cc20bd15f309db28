"""The launch orchestrator: start torchrun in order, wait for the master, watch every node's exit,
fail fast, notice lost nodes, stop and detach, and say who failed first.

It owns the job's processes; the runbook's launch steps call it. Everything it learns goes out as
events through `emit`; each node's output goes to disk, the diagnosis and the sink, batch by batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..diagnosis.live import DiagnosisFailed, LiveDiagnosis
from ..errors import StepFailed
from ..events import CommandPlanned, Event, Notice
from ..logs.bandwidth import Bandwidth
from ..logs.lines import Chunk
from ..logs.results import parse_result_line
from ..logs.rundir import RunDir
from ..paths import safe_name
from ..logs.torchrun import first_failure
from ..playbook.loader import resolve_builtin
from ..playbook.model import Playbook
from ..states import NodeStatus
from ..transport.base import LaunchSpec, RemoteProcess, silence_limit
from .keepalive import Keepalive
from .reach import ReachWatch
from .watchers import Watchers
from .nodes import NodeRun
from .plan import LaunchInputs, NodePlan, plan_launch, workdir_for

WATCH_SLICE = 0.25  # s: how often the watch step looks up from a node's wait (left running? past its timeout?)
PORT_PROBE = ("import socket,sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()\n"
              "except OSError as e:\n print(e); sys.exit(1)")


class Orchestrator(Watchers):
    def __init__(self, pb: Playbook, nodes: dict[str, NodeRun], emit: Callable[[Event], None],
                 sink: Callable[[Event], None], run_dir: Callable[[], RunDir],
                 set_state: Callable[..., None], diagnosis: LiveDiagnosis) -> None:
        self.pb = pb
        self.nodes = nodes
        self._emit = emit
        self._sink = sink  # node output: to the consumers, not to events.jsonl (the logs hold it)
        self._run_dir = run_dir
        self._set_state = set_state
        self.diagnosis = diagnosis
        self.results: list[dict] = []
        self.bandwidth = Bandwidth(pb.bandwidth.min_busbw_gbps)  # the smoke test's measured figures
        self.detached: dict[str, dict] = {}  # node -> {pid, pgid, log} when the user left the job running
        self.stopped_by_user = False
        self._stopping: set[str] = set()  # nodes ddptui itself asked to stop in this launch
        self._keepalive = Keepalive(pb.ssh.keepalive, self._watched, self._lost)
        self._last_out: dict[str, float] = {}  # node -> monotonic time of its last line (or launch)
        self._reach = ReachWatch(pb.master, self.master_addr, pb.job.master_port, self._watched,
                                 lambda n: self._last_out.get(n, 0.0), self._blocked)
        self.closed = False

    # ---- queries ------------------------------------------------------------------------------
    @property
    def master(self) -> NodeRun:
        return self.nodes[self.pb.master]

    @property
    def workers(self) -> list[NodeRun]:
        return [self.nodes[n.name] for n in self.pb.workers]

    @property
    def job_running(self) -> bool:
        return any(nr.running for nr in self.nodes.values())

    def master_addr(self) -> str:
        m = self.master
        if m.transport is None or m.transport.kind == "local":
            return "127.0.0.1"
        return m.transport.address or self.pb.master

    def first_failure(self) -> dict | None:
        return first_failure_of(self.nodes)

    # ---- plan and launch ------------------------------------------------------------------------
    def fresh_launch(self) -> None:
        """A new launch of the job: what the last one said no longer stands."""
        if self.job_running:
            return
        self.stopped_by_user = False
        self._stopping.clear()
        self.results.clear()
        self.bandwidth.clear()
        self._reach.blocked.clear()
        self.diagnosis.reset()

    def plan(self) -> list[NodePlan]:
        builtin = resolve_builtin(self.pb.job.script)
        scripts, cwds = {}, {}
        for name, nr in self.nodes.items():
            assert nr.transport is not None
            cwds[name] = workdir_for(self.pb, nr.spec, nr.transport.kind)
            scripts[name] = nr.transport.put_file(builtin, builtin.name) if builtin else self.pb.job.script
        plans = plan_launch(self.pb, LaunchInputs(
            master_addr=self.master_addr(), scripts=scripts, cwds=cwds,
            pythons={n: nr.python for n, nr in self.nodes.items()}))
        for p in plans:
            self.nodes[p.node].plan = p
            self._emit(CommandPlanned(p.node, p.role, p.node_rank, p.shell_line(), p.first_rank, p.nproc))
        return plans

    def launch(self, nr: NodeRun) -> None:
        if nr.running:
            raise StepFailed(f"{nr.name} is already running (pid {nr.process.pid}); stop it first")
        assert nr.transport is not None and nr.plan is not None
        run_dir = self._run_dir()
        plan = nr.plan
        self._set_state(nr, NodeStatus.LAUNCHING, f"{plan.role}, node_rank {plan.node_rank}")
        spec = LaunchSpec(plan.argv, plan.env, plan.cwd, grace=self.pb.job.stop_grace,
                          detach_log=f"~/.cache/ddptui/runs/{run_dir.run_id}/{safe_name(nr.name)}.log",
                          silence=silence_limit(self.pb.ssh.keepalive),  # the guard's own stop on a cut link
                          mask=tuple(sorted(set(run_dir.redactor.values.values()))))  # names, never values
        try:
            proc = nr.transport.start(spec, self._output_handler(nr, run_dir), nr.python)
        except OSError as e:  # this machine's python (a local node's) is gone or not a program
            self._set_state(nr, NodeStatus.FAILED, f"cannot start {nr.python}: {e.strerror or e}")
            raise StepFailed(f"{nr.name}: cannot start {nr.python!r}: {e.strerror or e}") from None
        nr.process = proc
        nr.started_at = time.time()
        self._last_out[nr.name] = time.monotonic()
        if not proc.started.wait(30) or proc.pid is None:
            rc = proc.wait(1)
            raise StepFailed(f"{nr.name}: the job did not start (rc={rc}): {' '.join(proc.diagnostics[-3:])}")
        self._set_state(nr, NodeStatus.RUNNING, f"pid {proc.pid}", pid=proc.pid, pgid=proc.pgid)
        nr.watcher = threading.Thread(target=self._await_exit, args=(nr, proc), daemon=True)
        nr.watcher.start()
        self._keepalive.ensure_running()
        self._reach.ensure_running()

    def _output_handler(self, nr: NodeRun, run_dir: RunDir) -> Callable[[Chunk], None]:
        """The hot path, once per batch of a node's lines: disk, the screen and the diagnosis
        (LiveDiagnosis.deliver), then torchrun's own reports and the smoke test's results."""
        name = nr.name
        expected_world = sum(self.pb.nproc_of(n) for n in self.pb.nodes)

        def on_lines(chunk: Chunk) -> None:
            self._last_out[name] = time.monotonic()
            # disk, screen, then the diagnosis; the batch stays bytes: a search in C says whether
            # any line is for the loops below, and only the tail is made into strings
            shown = self.diagnosis.deliver(run_dir, self._sink, name, chunk)
            nr.tail.extend(shown.tail(nr.tail.maxlen or shown.count))
            had_world = nr.agent.world_size
            nr.agent.feed_chunk(shown)
            if b"ddptui-smoke " in shown.data:
                for line in shown:  # the smoke test's results
                    if "ddptui-smoke result" in line and (r := parse_result_line(line)):
                        self.results.append({**r, "node": name})
                    elif "ddptui-smoke bandwidth" in line:
                        self.bandwidth.feed(name, line)
            if had_world is None and nr.agent.world_size not in (None, expected_world):
                # torchrun does not fail when nproc_per_node differs by node: compare what it assembled
                self._emit(Notice("warning", f"{name}: torchrun assembled a world of {nr.agent.world_size} "
                                             f"processes, the playbook plans {expected_world}", name))

        return on_lines

    def wait_master(self, timeout: float) -> str:
        """Until the master's rendezvous port accepts a connection from the first worker."""
        if self.master.process is None:
            raise StepFailed("the master was not launched: run launch-master first")
        return wait_for_port(self.master, (self.workers or [self.master])[0], self.master_addr(),
                             self.pb.job.master_port, timeout, alone=not self.workers)

    def launch_workers(self) -> str:
        workers = self.workers
        if not workers:
            return "no workers: a single-node job"
        if any(w.plan is None for w in workers):
            self.plan()
        for w in workers:
            self.launch(w)
        return f"torchrun started on {len(workers)} worker{'s' if len(workers) != 1 else ''}"

    # ---- watch, exits, fail fast, lost nodes ----------------------------------------------------
    def watch(self, timeout: float | None) -> str:
        procs = [nr for nr in self.nodes.values() if nr.process is not None]
        if not procs:
            raise StepFailed("nothing is running: launch the job first")
        deadline = time.monotonic() + timeout if timeout else None
        for nr in procs:  # in slices: a job the user leaves running ends the watch, not the process' exit
            while nr.process.wait(WATCH_SLICE) is None and nr.process.running:
                if self.detached:
                    raise StepFailed(f"left running on {', '.join(self.detached)} by the user: ddptui no "
                                     "longer watches it")
                if deadline is not None and time.monotonic() >= deadline:
                    self.stop_job()
                    raise StepFailed(f"the job ran past the step's timeout of {timeout:g} s and was stopped")
        for nr in procs:  # their node states are posted before the step's verdict
            if nr.watcher is not None:
                nr.watcher.join(10)
        try:
            self.diagnosis.finish()  # waits for every line written: all findings are raised before the verdict
        except DiagnosisFailed as e:  # the job's verdict stands on its exit codes; the logs are whole
            self._emit(Notice("error", f"the live diagnosis failed ({str(e).strip().splitlines()[-1]}); the logs are "
                                       f"complete: `ddptui diagnose {self._run_dir().path}` reads them"))
        if self.stopped_by_user:
            raise StepFailed("stopped by the user")
        bad = [nr for nr in procs if nr.process.returncode != 0 or nr.process.lost]
        if bad:
            parts = [f"{nr.name} {'lost' if nr.process.lost else f'exited {nr.process.returncode}'}" for nr in bad]
            if ff := self.first_failure():
                parts.append("first failure: " + describe_failure(ff))
            raise StepFailed("; ".join(parts))
        n_ok = sum(1 for r in self.results if r.get("all_reduce") == "ok")
        return "every node exited 0" + (f", {n_ok} rank results ok" if self.results else "") + self.bandwidth.words("; ")

    def _await_exit(self, nr: NodeRun, proc: RemoteProcess) -> None:
        proc.wait()
        nr.ended_at = time.time()
        rc = proc.returncode
        if nr.name in self.detached:
            self._set_state(nr, NodeStatus.DETACHED, f"left running, pgid {proc.pgid}", rc=rc)
        elif proc.lost:
            self._set_state(nr, NodeStatus.LOST, nr.error or "the connection to the node was lost", rc=rc)
            self._closed(nr)  # lost by a keepalive: the others are already stopping
        elif nr.name in self._stopping:
            self._set_state(nr, NodeStatus.STOPPED, f"stopped (rc={rc})", rc=rc)
        elif rc == 0:
            self._set_state(nr, NodeStatus.EXITED, "exited 0", rc=rc)
        else:
            self._set_state(nr, NodeStatus.FAILED, f"exited {rc}", rc=rc)
            if rc is not None:
                self.diagnosis.node_exited(nr.name, rc)
            threading.Thread(target=self._fail_fast, args=(nr,), daemon=True).start()

    def stop_job(self, wait: bool = True) -> None:
        """Stop the job on every node: TERM to each process group, KILL after the grace period."""
        running = [nr for nr in self.nodes.values() if nr.running and nr.name not in self.detached]
        if not running:
            return
        self.stopped_by_user = True
        self._emit(Notice("info", f"stopping the job on {', '.join(nr.name for nr in running)}"))
        self._stop_nodes(running)
        if wait:  # until each node's exit is known and its state posted
            for nr in running:
                nr.process.wait(self.pb.job.stop_grace + 10)
                if nr.watcher is not None and nr.watcher is not threading.current_thread():
                    nr.watcher.join(5)

    def _stop_nodes(self, nodes: list[NodeRun]) -> None:
        for nr in nodes:
            if nr.running:
                self._stopping.add(nr.name)
                nr.process.stop()

    def detach(self) -> dict[str, dict]:
        """Leave the job running on every node: each guard keeps the output in a file on its node and
        no longer stops the job when ddptui goes away."""
        for nr in self.nodes.values():
            if not nr.running:
                continue
            p = nr.process
            if p.detach():
                self.detached[nr.name] = {"pid": p.pid, "pgid": p.pgid, "log": p.detach_log}
            else:
                self._emit(Notice("error", f"{nr.name}: the job could not be left running; it will be stopped",
                                  nr.name))
        for node, d in self.detached.items():
            self._emit(Notice("info", f"{node}: left running (pgid {d['pgid']}); output in {d['log']} there; "
                                      f"stop it with: kill -TERM -- -{d['pgid']}", node))
        return self.detached

    def close(self) -> None:
        self.stop_job()
        self.closed = True
        self._keepalive.closed = True
        self._reach.closed = True


def describe_failure(ff: dict) -> str:
    """`node04 lost` or `node03 (host node03) rank 2 exitcode 1 (SIGKILL)`: only what is known."""
    if ff.get("lost"):
        return f"{ff['node']} (the node stopped answering)"
    parts = [ff["node"]]
    if ff.get("host"):
        parts.append(f"(host {ff['host']})")
    for key in ("rank", "exitcode"):
        if ff.get(key) is not None:
            parts.append(f"{key} {ff[key]}")
    if ff.get("signal"):
        parts.append(f"({ff['signal']})")
    return " ".join(parts)


def _tail(nr: NodeRun) -> str:
    return "\n".join(list(nr.tail)[-8:])


def wait_for_port(master: NodeRun, probe_from: NodeRun, addr: str, port: int, timeout: float,
                  alone: bool = False) -> str:
    """Probe addr:port from `probe_from` until it accepts; StepFailed with the master's last lines if
    its torchrun exits first or the time runs out. A single-node job (`alone`) may finish first."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if alone and not master.process.running and master.process.returncode == 0:  # nobody had to reach it
            return f"torchrun on {master.name} already finished, exit 0: a single-node job"
        if not master.process.running:
            raise StepFailed(f"torchrun on {master.name} exited ({master.process.returncode}) before its port "
                             f"{port} listened. Its last lines:\n{_tail(master)}")
        r = probe_from.transport.run([probe_from.python, "-c", PORT_PROBE, addr, str(port)], timeout=10)
        if r.rc == 0:
            return f"{addr}:{port} listens (seen from {probe_from.name})"
        last = (r.stdout or r.stderr).strip()
        time.sleep(0.3)
    raise StepFailed(f"{addr}:{port} did not listen within {timeout:g} s (seen from {probe_from.name}: {last}). "
                     f"The master's last lines:\n{_tail(master) or '(none)'}")


def first_failure_of(nodes: dict[str, NodeRun]) -> dict | None:
    """The node whose failure ddptui saw first — its job's exit (failed, not stopped by ddptui) or its
    loss —, with torchrun's Root Cause where that node printed one. The order events reached ddptui
    holds across nodes; torchrun's timestamps are each node's own clock, and a killed torchrun prints
    no Root Cause at all (its workers then fail and print theirs, later). Without such an event:
    torchrun's earliest Root Cause."""
    seen = [nr for nr in nodes.values()
            if nr.state in (NodeStatus.FAILED, NodeStatus.LOST) and nr.ended_at is not None]
    if seen:
        first = min(seen, key=lambda nr: nr.ended_at)
        if first.process is not None and first.process.lost:
            return {"node": first.name, "lost": True}
        if first.agent.root_cause:
            return {"node": first.name, **first.agent.root_cause}
        rc = first.process.returncode if first.process is not None else None
        sig = _signal_of(rc)
        return {"node": first.name, "exitcode": rc, **({"signal": sig} if sig else {})}
    causes = {n: nr.agent.root_cause for n, nr in nodes.items() if nr.agent.root_cause}
    ff = first_failure(causes)
    if ff is not None:
        return {"node": ff[0], **ff[1]}
    lost = [nr.name for nr in nodes.values() if nr.process is not None and nr.process.lost]
    return {"node": lost[0], "lost": True} if lost else None


def _signal_of(rc: int | None) -> str | None:
    """The guard reports a job killed by a signal as 128 + its number, as a shell does."""
    import signal

    if rc is None or not 128 < rc < 128 + 65:
        return None
    try:
        return signal.Signals(rc - 128).name
    except ValueError:
        return None
