"""The runbook's step handlers: what each kind of step does (connect, allocate, check, launch, shell).

Kept apart from the step machine (runbook.py), which decides which step runs and records its
state; a handler returns the step's message or raises StepFailed.
"""

from __future__ import annotations

from .checks.stage import run_checks, verdict
from .errors import StepFailed
from .events import Allocated, Notice
from .launch.nodes import connect, fan_out, run_shell
from .playbook.model import Step
from .states import StepState


class StepHandlers:
    """Mixed into Runbook: the handlers use its nodes, playbook, launcher and events."""
    def _connect(self, step: Step) -> str:
        errors = fan_out(list(self._nodes.values()),
                         lambda nr: connect(nr, self._factory, self.pb, self._set_node, self._note))
        if errors:
            why = "; ".join(f"{n}: {getattr(e, 'reason', e)}" for n, e in errors.items())
            raise StepFailed(f"{len(errors)} of {len(self._nodes)} nodes unreachable: {why}")
        return f"{len(self._nodes)} node{'s' if len(self._nodes) != 1 else ''} connected"

    def _allocate(self, step: Step) -> str:
        """Slurm: get (or join) the allocation, take its nodes as the run's, reach each by a job step."""
        from .slurm.alloc import allocate, status_line

        if self.allocation is None:
            last = [""]

            def heard(st, waited: float) -> None:
                words = status_line(st, waited)
                if words.split(",")[0] != last[0] or int(waited) % 10 == 0:  # a change, or every 10 s
                    last[0] = words.split(",")[0]
                    self._set(step, StepState.RUNNING, words)

            self.allocation = allocate(self.pb, heard, lambda: self.closed)
            a = self.allocation
            self._bind(self.pb.with_allocation(a.job_id, a.nodes))
            self.emit(Allocated(a.job_id, tuple(self._nodes), a.partition, a.owned))
        self._connect(step)
        return self.allocation.describe()

    def _note(self, level: str, text: str, node: str) -> None:
        """What the transports noted while connecting, as notices: once each (nodes share known_hosts)."""
        with self._lock:
            if text in self._noted:
                return
            self._noted.add(text)
        self.emit(Notice(level, text, node))

    def _ensure_connected(self) -> None:
        if self.pb.on_slurm and self.allocation is None:
            self._allocate(Step("allocate", "allocate", "allocate"))
        elif any(nr.transport is None for nr in self._nodes.values()):
            self._connect(Step("connect", "connect", "connect"))

    def _check(self, step: Step) -> str:
        self._ensure_connected()
        self.preflight = run_checks(self.pb, self._nodes, self.launch.master_addr(), self.emit)
        return verdict(self.pb, self._nodes, self.preflight, self.emit)

    def _launch_master(self, step: Step) -> str:
        self._ensure_connected()
        if not self.job_running and any(nr.process is not None for nr in self._nodes.values()):
            self.new_run()  # the job ran in this run directory already: the relaunch gets its own
        self.launch.fresh_launch()
        self.launch.plan()
        m = self.launch.master
        self.launch.launch(m)
        return f"torchrun started on {m.name} (pid {m.process.pid})"

    def _wait_master(self, step: Step) -> str:
        return self.launch.wait_master(step.timeout or self.pb.job.master_wait_timeout)

    def _shell(self, step: Step) -> str:
        self._ensure_connected()
        return run_shell(self.pb, step, [self._nodes[n] for n in (step.nodes or self._nodes)],
                         self._ensure_run_dir, self._sink)
