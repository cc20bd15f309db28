"""Steps a playbook: which step runs next, each step's state, start-at, rerun, skip.

One Runbook is one run: it owns the run directory, one transport per node and the job's
processes. Its methods block; the TUI calls them from worker threads, the CLI from its main
thread. Everything it learns goes out through `sink` as events.
"""

from __future__ import annotations

import collections
import shlex
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable

from .checks.preflight import NodeTarget, Preflight, PreflightResult
from .diagnosis.engine import Engine
from .diagnosis.model import Evidence, Finding, Fix
from .errors import NodeError
from .events import (
    CheckResult, CommandPlanned, Event, FindingRaised, Notice, NodeOutput, NodeState, RunFinished,
    RunStarted, Sink, StepChanged,
)
from .launch.plan import LaunchInputs, NodePlan, plan_launch
from .logs.results import parse_result_line
from .logs.torchrun import RootCauseParser, first_failure
from .logs.rundir import RunDir, safe_name
from .playbook.loader import resolve_builtin
from .playbook.model import Playbook, Step
from .transport.base import LaunchSpec, RemoteProcess, Transport

PENDING, RUNNING, PASSED, FAILED, SKIPPED = "pending", "running", "passed", "failed", "skipped"
STATES = (PENDING, RUNNING, PASSED, FAILED, SKIPPED)


class StepFailed(Exception):
    """A step did not pass; the message says why in words."""


@dataclass
class NodeRun:
    """What this run knows of one node."""

    name: str
    transport: Transport | None = None
    state: str = "pending"
    error: str | None = None
    python: str = "python3"
    plan: NodePlan | None = None
    process: RemoteProcess | None = None
    started_at: float | None = None
    ended_at: float | None = None
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=20))
    facts: dict = field(default_factory=dict)
    agent: RootCauseParser = field(default_factory=RootCauseParser)
    watcher: threading.Thread | None = None  # posts the node's state when its job exits


TransportFactory = Callable[["Playbook", str], Transport]


class Runbook:
    def __init__(self, playbook: Playbook, sink: Sink, runs_dir: Path,
                 transport_factory: TransportFactory) -> None:
        self.pb = playbook
        self._sink = sink
        self._runs_dir = Path(runs_dir)
        self._factory = transport_factory
        self.states: dict[str, str] = {s.id: PENDING for s in playbook.steps}
        self.nodes: dict[str, NodeRun] = {n.name: NodeRun(n.name) for n in playbook.ordered_nodes()}
        self.run_dir: RunDir | None = None
        self.results: list[dict] = []
        self.preflight: PreflightResult | None = None
        self._engine_lock = threading.Lock()
        self.engine = self._new_engine()
        self._own_findings: dict[str, Finding] = {}  # what ddptui itself saw (master-not-started)
        self._lock = threading.RLock()
        self._started = time.time()
        self._stopped_by_user = False
        self._stopping: set[str] = set()  # nodes ddptui itself asked to stop in this launch
        self._joined: set[str] = set()  # workers that joined after waiting for the master
        self.detached: dict[str, dict] = {}  # node -> {pid, pgid, log} when the user left the job running
        self.closed = False

    # ---- live diagnosis ---------------------------------------------------------------------
    def _new_engine(self) -> Engine:
        return Engine(expected_nnodes=len(self.pb.nodes),
                      on_change=lambda f: self.emit(FindingRaised(f.to_json())))

    def _diagnose(self, node: str, lines: list[str], first: int) -> None:
        with self._engine_lock:
            self.engine.feed(node, lines, first)
            if node != self.pb.master:
                self._watch_rendezvous(node, lines, first)

    def _watch_rendezvous(self, node: str, lines: list[str], first: int) -> None:
        """A worker waiting in rendezvous while the master is not running: say so now.

        torch's client waits silently for the whole rendezvous timeout (900 s by default) before it
        prints anything when the master's store is not there (recorded on the test cluster).
        """
        f = self._own_findings.get("master-not-started")
        for i, line in enumerate(lines):
            if "Rendezvous'ing worker group" in line:
                m = self.nodes[self.pb.master]
                if m.process is None or not m.process.running:
                    ev = Evidence(node, first + i, line.strip())
                    if f is None:
                        f = Finding("master-not-started", "warning", [node],
                                    f"{node} waits in rendezvous, but torchrun is not running on the master {m.name}",
                                    [ev], "A worker started before the master: it is waiting for the master's "
                                          "rendezvous store and will time out (rdzv_timeout, 900 s by default) "
                                          "unless the master starts.",
                                    Fix(scope="manual", explain="start the master (run launch-master); the worker "
                                                                "joins as soon as its port listens"))
                        self._own_findings["master-not-started"] = f
                    elif node not in f.nodes:
                        f.nodes.append(node)
                        f.evidence.append(ev)
                        f.state = "active"
                    self.emit(FindingRaised(f.to_json()))
            elif f is not None and node in f.nodes and f.state == "active" and (
                    "Rendezvous complete for workers" in line or "init_process_group done" in line):
                self._joined.add(node)
                if set(f.nodes) <= self._joined:
                    f.state = "resolved"
                    self.emit(FindingRaised(f.to_json()))

    def findings(self) -> list[Finding]:
        out = list(self.preflight.findings) if self.preflight else []
        with self._engine_lock:
            live = self.engine.findings
        ids = {f.id for f in live}
        out += live + [f for f in self._own_findings.values() if f.id not in ids]
        return out

    # ---- events -----------------------------------------------------------------------------
    def emit(self, ev: Event) -> None:
        if self.run_dir is not None and not isinstance(ev, NodeOutput):
            self.run_dir.event(ev.to_json())
        self._sink(ev)

    def _ensure_run_dir(self) -> RunDir:
        if self.run_dir is None:
            self.run_dir = RunDir(self._runs_dir, self.pb.name, self.pb.source)
            self.emit(RunStarted(self.run_dir.run_id, str(self.run_dir.path), self.pb.name,
                                 tuple(self.nodes)))
        return self.run_dir

    def _node_state(self, node: str, state: str, message: str = "", **kw) -> None:
        self.nodes[node].state = state
        self.emit(NodeState(node, state, message, **kw))

    # ---- stepping ---------------------------------------------------------------------------
    @property
    def steps(self) -> tuple[Step, ...]:
        return self.pb.steps

    def step(self, step_id: str) -> Step:
        for s in self.pb.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    def next_step(self) -> Step | None:
        """The first step that is neither passed nor skipped."""
        for s in self.pb.steps:
            if self.states[s.id] in (PENDING, FAILED):
                return s
        return None

    def _set(self, step: Step, state: str, message: str = "") -> None:
        self.states[step.id] = state
        self.emit(StepChanged(step.id, state, message))

    def skip(self, step_id: str) -> None:
        step = self.step(step_id)
        if self.states[step_id] == RUNNING:
            return
        self._ensure_run_dir()
        self._set(step, SKIPPED)

    def run_step(self, step_id: str) -> bool:
        """Run one step (again, if it ran before). True when it passed."""
        step = self.step(step_id)
        self._ensure_run_dir()
        self._set(step, RUNNING, step.title)
        try:
            message = getattr(self, "_step_" + step.kind.replace("-", "_"))(step) or ""
        except StepFailed as e:
            self._set(step, FAILED, str(e))
            self._write_summary()
            return False
        except Exception as e:  # a bug in ddptui must not leave the step "running" forever
            self._set(step, FAILED, f"internal error: {type(e).__name__}: {e}")
            self._write_summary()
            raise
        self._set(step, PASSED, message)
        self._write_summary()
        return True

    def run_all(self, start: str | None = None) -> bool:
        """Run from `start` (default: the next step) to the end, stopping at the first failure."""
        ids = [s.id for s in self.pb.steps]
        first = start or (self.next_step().id if self.next_step() else None)
        if first is None:
            return all(self.states[i] in (PASSED, SKIPPED) for i in ids)
        for sid in ids[ids.index(first):]:
            if self._stopped_by_user:
                return False
            if self.states[sid] == SKIPPED and sid != first:
                continue
            if not self.run_step(sid):
                return False
        return True

    # ---- steps ------------------------------------------------------------------------------
    def _fan_out(self, fn: Callable[[NodeRun], None], names: list[str] | None = None) -> dict[str, Exception]:
        """Run fn on every node at once; each node's error kept on its own."""
        names = names or list(self.nodes)
        errors: dict[str, Exception] = {}
        with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
            futs = {pool.submit(fn, self.nodes[n]): n for n in names}
            for fut, n in futs.items():
                try:
                    fut.result()
                except Exception as e:
                    errors[n] = e
        return errors

    def _connect_one(self, nr: NodeRun) -> None:
        if nr.transport is not None and nr.state not in ("unreachable",):
            return
        self._node_state(nr.name, "connecting")
        t = self._factory(self.pb, nr.name)
        try:
            t.connect()
        except NodeError as e:
            nr.error = e.reason
            self._node_state(nr.name, "unreachable", e.reason)
            raise
        nr.transport = t
        nr.error = None
        spec = next(n for n in self.pb.nodes if n.name == nr.name)
        nr.python = spec.python or self.pb.job.python or ("python3" if t.kind != "local" else sys.executable)
        self._node_state(nr.name, "connected", f"{t.kind} {t.address or ''}".strip())

    def _step_connect(self, step: Step) -> str:
        errors = self._fan_out(self._connect_one)
        if errors:
            why = "; ".join(f"{n}: {getattr(e, 'reason', e)}" for n, e in errors.items())
            raise StepFailed(f"{len(errors)} of {len(self.nodes)} nodes unreachable: {why}")
        return f"{len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''} connected"

    def _ensure_connected(self) -> None:
        if any(nr.transport is None for nr in self.nodes.values()):
            self._step_connect(Step("connect", "connect", "connect"))

    def _check_script(self, nr: NodeRun) -> None:
        script = self.pb.job.script
        spec = self._spec(nr.name)
        cwd = spec.workdir or self.pb.job.workdir
        if nr.transport.kind == "local" and not cwd and self.pb.path is not None:
            cwd = str(self.pb.path.resolve().parent)
        shell = f"cd {shlex.quote(cwd)} && test -f {shlex.quote(script)}" if cwd else f"test -f {shlex.quote(script)}"
        r = nr.transport.run([], shell=shell, timeout=self.pb.ssh.command_timeout)
        ok = r.rc == 0
        self.emit(CheckResult(nr.name, "script", "pass" if ok else "fail",
                              f"{script} {'found' if ok else 'not found'}" + (f" in {cwd}" if cwd else ""), shell))
        if not ok:
            raise StepFailed(f"{script} not found")

    def _step_check(self, step: Step) -> str:
        self._ensure_connected()
        targets = [NodeTarget(nr.name, "master" if nr.name == self.pb.master else "worker", nr.transport,
                              nr.python, self._env_for(nr.name), self.pb.nproc_of(self._spec(nr.name)))
                   for nr in self.nodes.values()]

        pf = Preflight(self.pb, targets, self._master_addr(), self.emit, self.pb.ssh.command_timeout)
        result = pf.run()
        self.preflight = result
        for name, nf in result.facts.items():
            self.nodes[name].facts = nf
        for f in result.findings:
            self.emit(FindingRaised(f.to_json()))
        missing = self._fan_out(self._check_script) if not self.pb.job.script.startswith("builtin:") else {}
        failed = result.failed()
        errors = result.errors()
        if failed or errors or missing:
            parts = ([f"{c.node}: {c.check}: {c.summary}" for c in failed] + [f"{f.id}: {f.summary}" for f in errors]
                     + [f"{n}: {e}" for n, e in missing.items()])
            raise StepFailed(f"{len(failed)} check{'s' if len(failed) != 1 else ''} failed, "
                             f"{len(errors)} error finding{'s' if len(errors) != 1 else ''}: " + "; ".join(parts))
        warns = [f for f in result.findings if f.severity == "warning"]
        n = len(self.nodes)
        return (f"all checks passed on {n} node{'s' if n != 1 else ''}"
                + (f" ({len(warns)} warning{'s' if len(warns) != 1 else ''})" if warns else ""))

    def _spec(self, name: str):
        return next(n for n in self.pb.nodes if n.name == name)

    def _env_for(self, name: str) -> dict[str, str]:
        env = self.pb.job.env_dict()
        env.update(dict(self._spec(name).env))
        return env

    def _master_addr(self) -> str:
        master = self.nodes[self.pb.master]
        if master.transport is None or master.transport.kind == "local":
            return "127.0.0.1"
        return master.transport.address or self.pb.master

    def plan(self) -> list[NodePlan]:
        self._ensure_connected()
        scripts: dict[str, str] = {}
        builtin = resolve_builtin(self.pb.job.script)
        for name, nr in self.nodes.items():
            assert nr.transport is not None
            if builtin:
                scripts[name] = nr.transport.put_file(builtin, builtin.name)
            elif nr.transport.kind == "local" and not (self._spec(name).workdir or self.pb.job.workdir) \
                    and self.pb.path is not None:
                scripts[name] = str(self.pb.path.resolve().parent / self.pb.job.script)
            else:
                scripts[name] = self.pb.job.script
        plans = plan_launch(self.pb, LaunchInputs(
            master_addr=self._master_addr(), scripts=scripts,
            pythons={n: nr.python for n, nr in self.nodes.items()}))
        for p in plans:
            self.nodes[p.node].plan = p
            self.emit(CommandPlanned(p.node, p.role, p.node_rank, p.shell_line()))
        return plans

    def _launch(self, nr: NodeRun) -> None:
        if nr.process is not None and nr.process.running:
            raise StepFailed(f"{nr.name} is already running (pid {nr.process.pid}); stop it first")
        assert nr.transport is not None and nr.plan is not None
        run_dir = self._ensure_run_dir()
        name = nr.name

        def on_lines(lines: list[str]) -> None:
            first = run_dir.append(name, lines)
            nr.tail.extend(lines)
            had_world = nr.agent.world_size
            for line in lines:  # one pass: torchrun's own reports and the smoke test's results
                nr.agent.feed(line)
                if "ddptui-smoke result" in line and (r := parse_result_line(line)):
                    r["node"] = name
                    self.results.append(r)
            if had_world is None and nr.agent.world_size is not None:
                self._check_world_size(nr)
            self._diagnose(name, lines, first)
            self._sink(NodeOutput(name, tuple(lines), first))

        plan = nr.plan
        self._node_state(name, "launching", f"{plan.role}, node_rank {plan.node_rank}")
        spec = LaunchSpec(plan.argv, plan.env, plan.cwd, grace=self.pb.job.stop_grace,
                          detach_log=f"~/.cache/ddptui/runs/{run_dir.run_id}/{safe_name(name)}.log")
        proc = nr.transport.start(spec, on_lines, nr.python)
        nr.process = proc
        nr.started_at = time.time()
        if not proc.started.wait(30) or proc.pid is None:
            rc = proc.wait(1)
            raise StepFailed(f"{name}: the job did not start (rc={rc}): {' '.join(proc.diagnostics[-3:])}")
        self._node_state(name, "running", f"pid {proc.pid}", pid=proc.pid, pgid=proc.pgid)
        nr.watcher = threading.Thread(target=self._await_exit, args=(nr, proc), daemon=True)
        nr.watcher.start()
        self._start_monitor()

    def _check_world_size(self, nr: NodeRun) -> None:
        """torchrun does not fail when nproc_per_node differs by node: compare what it assembled."""
        expected = sum(self.pb.nproc_of(n) for n in self.pb.nodes)
        got = nr.agent.world_size
        if got is not None and got != expected:
            self.emit(Notice("warning", f"{nr.name}: torchrun assembled a world of {got} processes, the playbook "
                                        f"plans {expected}", nr.name))

    def _start_monitor(self) -> None:
        """Like OpenSSH's ServerAliveInterval/CountMax: a node that stops answering is marked lost."""
        with self._lock:
            if getattr(self, "_monitor", None) is not None and self._monitor.is_alive():
                return
            self._monitor = threading.Thread(target=self._monitor_loop, daemon=True)
            self._monitor.start()

    def _monitor_loop(self) -> None:
        interval = max(0.5, float(self.pb.ssh.keepalive))
        misses: dict[str, int] = {}
        while not self.closed:
            running = [nr for nr in self.nodes.values() if nr.process is not None and nr.process.running
                       and nr.transport is not None and hasattr(nr.transport, "alive")
                       and nr.name not in self.detached]
            if not running:
                return
            for nr in running:
                if nr.transport.alive(timeout=interval):
                    misses[nr.name] = 0
                    continue
                misses[nr.name] = misses.get(nr.name, 0) + 1
                if misses[nr.name] >= 3:
                    self._lost(nr)
            time.sleep(interval)

    def _lost(self, nr: NodeRun) -> None:
        if nr.process is None or not nr.process.running:
            return
        nr.process.lost = True
        nr.error = "the node stopped answering (3 keepalives missed)"
        self.emit(Notice("error", f"{nr.name} stopped answering: marking it lost and stopping the job on the others",
                         nr.name))
        nr.transport.close()  # ends its readers: the process is done, lost
        self._stop_nodes([o for o in self.nodes.values() if o is not nr])

    def _await_exit(self, nr: NodeRun, proc: RemoteProcess) -> None:
        proc.wait()
        nr.ended_at = time.time()
        rc = proc.returncode
        if nr.name in self.detached:
            self._node_state(nr.name, "detached", f"left running, pgid {proc.pgid}", rc=rc)
        elif proc.lost:
            self._node_state(nr.name, "lost", nr.error or "the connection to the node was lost", rc=rc)
        elif nr.name in self._stopping:
            self._node_state(nr.name, "stopped", f"stopped (rc={rc})", rc=rc)
        elif rc == 0:
            self._node_state(nr.name, "exited", "exited 0", rc=rc)
        else:
            self._node_state(nr.name, "failed", f"exited {rc}", rc=rc)
            self._fail_fast(nr)
        self._write_summary()

    def _fail_fast(self, failed: NodeRun, grace: float = 5.0) -> None:
        """A node's torchrun failed: the job cannot finish (no elastic restarts), and the other nodes
        would only notice at their next collective (or sit in torchrun's 300 s exit barrier).
        Give them a moment to print their own errors, then stop them."""
        def later() -> None:
            time.sleep(grace)
            others = [o for o in self.nodes.values() if o is not failed and o.process is not None and o.process.running]
            if others and not self._stopped_by_user and not self.closed:
                self.emit(Notice("warning", f"{failed.name} failed: stopping the job on "
                                            f"{', '.join(o.name for o in others)}"))
                self._stop_nodes(others)

        threading.Thread(target=later, daemon=True).start()

    def _step_launch_master(self, step: Step) -> str:
        if not self.job_running:  # a fresh launch: what the last one said no longer stands
            self._stopped_by_user = False
            self._stopping.clear()
            self._joined.clear()
            self.results.clear()
            with self._engine_lock:
                self.engine = self._new_engine()
                self._own_findings.clear()
        self.plan()
        self._launch(self.nodes[self.pb.master])
        m = self.nodes[self.pb.master]
        return f"torchrun started on {m.name} (pid {m.process.pid})"

    def _step_wait_master(self, step: Step) -> str:
        master = self.nodes[self.pb.master]
        if master.process is None:
            raise StepFailed("the master was not launched: run launch-master first")
        addr, port = self._master_addr(), self.pb.job.master_port
        workers = [self.nodes[n.name] for n in self.pb.workers]
        probe_from = workers[0] if workers else master
        timeout = step.timeout or self.pb.job.master_wait_timeout
        deadline = time.monotonic() + timeout
        probe = "import socket,sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()\nexcept OSError as e:\n print(e); sys.exit(1)"
        last = ""
        while time.monotonic() < deadline:
            if not master.process.running:
                tail = "\n".join(list(master.tail)[-8:])
                raise StepFailed(f"torchrun on {master.name} exited ({master.process.returncode}) before "
                                 f"its port {port} listened. Its last lines:\n{tail}")
            r = probe_from.transport.run([probe_from.python, "-c", probe, addr, str(port)], timeout=10)
            if r.rc == 0:
                return f"{addr}:{port} listens (seen from {probe_from.name})"
            last = (r.stdout or r.stderr).strip()
            time.sleep(0.3)
        tail = "\n".join(list(master.tail)[-8:])
        raise StepFailed(f"{addr}:{port} did not listen within {timeout:g} s (seen from {probe_from.name}: "
                         f"{last}). The master's last lines:\n{tail or '(none)'}")

    def _step_launch_workers(self, step: Step) -> str:
        workers = [self.nodes[n.name] for n in self.pb.workers]
        if not workers:
            return "no workers: a single-node job"
        if any(w.plan is None for w in workers):
            self.plan()
        for w in workers:
            self._launch(w)
        return f"torchrun started on {len(workers)} worker{'s' if len(workers) != 1 else ''}"

    def _step_watch(self, step: Step) -> str:
        procs = [nr for nr in self.nodes.values() if nr.process is not None]
        if not procs:
            raise StepFailed("nothing is running: launch the job first")
        deadline = time.monotonic() + step.timeout if step.timeout else None
        for nr in procs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if nr.process.wait(left) is None and nr.process.running:
                self.stop_job()
                raise StepFailed(f"the job ran past the step's timeout of {step.timeout:g} s and was stopped")
        for nr in procs:  # their node states are posted before the step's verdict
            if nr.watcher is not None:
                nr.watcher.join(10)
        with self._engine_lock:
            self.engine.finish()
        bad = [nr for nr in procs if nr.process.returncode != 0 or nr.process.lost]
        if self._stopped_by_user:
            raise StepFailed("stopped by the user")
        if bad:
            parts = [f"{nr.name} {'lost' if nr.process.lost else f'exited {nr.process.returncode}'}" for nr in bad]
            ff = self.first_failure()
            if ff:
                parts.append(f"first failure: {ff['node']} (host {ff.get('host')}) rank {ff.get('rank')} exitcode "
                             f"{ff.get('exitcode')}" + (f" ({ff['signal']})" if ff.get("signal") else ""))
            raise StepFailed("; ".join(parts))
        n_ok = sum(1 for r in self.results if r.get("all_reduce") == "ok")
        extra = f", {n_ok} rank results ok" if self.results else ""
        return f"every node exited 0{extra}"

    def _step_shell(self, step: Step) -> str:
        self._ensure_connected()
        names = list(step.nodes) or list(self.nodes)

        def one(nr: NodeRun) -> None:
            r = nr.transport.run([], shell=step.run, env=self._env_for(nr.name),
                                 timeout=step.timeout or self.pb.ssh.command_timeout)
            lines = (r.stdout + r.stderr).splitlines() or [f"(no output, rc={r.rc})"]
            first = self._ensure_run_dir().append(nr.name, lines)
            self._sink(NodeOutput(nr.name, tuple(lines), first))
            if r.rc != 0:
                raise StepFailed(f"rc={r.rc}" if r.rc is not None else "timed out")

        errors = self._fan_out(one, names)
        if errors:
            raise StepFailed("; ".join(f"{n}: {e}" for n, e in errors.items()))
        return f"ran on {len(names)} node{'s' if len(names) != 1 else ''}"

    # ---- lifecycle --------------------------------------------------------------------------
    @property
    def job_running(self) -> bool:
        return any(nr.process is not None and nr.process.running for nr in self.nodes.values())

    def stop_job(self, wait: bool = True) -> None:
        """Stop the job on every node: TERM to each process group, KILL after the grace period."""
        running = [nr for nr in self.nodes.values() if nr.process is not None and nr.process.running
                   and nr.name not in self.detached]
        if not running:
            return
        self._stopped_by_user = True
        self.emit(Notice("info", f"stopping the job on {', '.join(nr.name for nr in running)}"))
        self._stop_nodes(running)
        if wait:
            for nr in running:
                nr.process.wait(self.pb.job.stop_grace + 10)

    def first_failure(self) -> dict | None:
        causes = {n: nr.agent.root_cause for n, nr in self.nodes.items() if nr.agent.root_cause}
        ff = first_failure(causes)
        if ff is None:
            lost = [nr.name for nr in self.nodes.values() if nr.process is not None and nr.process.lost]
            return {"node": lost[0], "lost": True} if lost else None
        return {"node": ff[0], **ff[1]}

    def detach_job(self) -> dict[str, dict]:
        """Leave the job running on every node (the user's choice when quitting): each guard keeps
        the output in a file on its node and no longer stops the job when ddptui goes away."""
        for nr in self.nodes.values():
            p = nr.process
            if p is None or not p.running:
                continue
            if p.detach():
                self.detached[nr.name] = {"pid": p.pid, "pgid": p.pgid, "log": p.detach_log}
            else:
                self.emit(Notice("error", f"{nr.name}: the job could not be left running; it will be stopped", nr.name))
        for node, d in self.detached.items():
            self.emit(Notice("info", f"{node}: left running (pgid {d['pgid']}); output in {d['log']} there; "
                                     f"stop it with: kill -TERM -- -{d['pgid']}", node))
        return self.detached

    def _stop_nodes(self, nodes: list[NodeRun]) -> None:
        """Ask each running node's guard to stop its job; remember that ddptui did."""
        for nr in nodes:
            if nr.process is not None and nr.process.running:
                self._stopping.add(nr.name)
                nr.process.stop()

    def summary(self) -> dict:
        nodes = {}
        for nr in self.nodes.values():
            p = nr.process
            nodes[nr.name] = {
                "role": nr.plan.role if nr.plan else ("master" if nr.name == self.pb.master else "worker"),
                "node_rank": nr.plan.node_rank if nr.plan else None,
                "ranks": [nr.plan.ranks.start, nr.plan.ranks.stop - 1] if nr.plan else None,
                "state": nr.state, "error": nr.error,
                "exit_code": p.returncode if p else None, "pid": p.pid if p else None,
                "pgid": p.pgid if p else None, "lost": p.lost if p else False,
                "started": nr.started_at, "ended": nr.ended_at,
                "log": str(self.run_dir.log_path(nr.name)) if self.run_dir else None,
                "command": nr.plan.shell_line() if nr.plan else None,
                "root_cause": nr.agent.root_cause, "world_size": nr.agent.world_size,
            }
        ok = all(s in (PASSED, SKIPPED) for s in self.states.values())
        return {"playbook": self.pb.name, "run_id": self.run_dir.run_id if self.run_dir else None,
                "started": self._started, "ended": time.time(), "ok": ok,
                "steps": dict(self.states), "nodes": nodes, "results": list(self.results),
                "first_failure": self.first_failure(), "detached": dict(self.detached),
                "findings": [f.to_json() for f in self.findings()]}

    def _write_summary(self) -> None:
        if self.run_dir is not None:
            with self._lock:
                self.run_dir.write_summary(self.summary())

    def close(self) -> None:
        """Stop what runs, close every connection, write the summary. Safe to call twice."""
        if self.closed:
            return
        self.stop_job()
        for nr in self.nodes.values():
            if nr.transport is not None:
                nr.transport.close()
        if self.run_dir is not None:
            s = self.summary()
            self.run_dir.write_summary(s)
            self.emit(RunFinished(s["ok"], s))
            self.run_dir.close()
        self.closed = True

