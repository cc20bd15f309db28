"""Preflight of 8 nodes (connect + every check) against pdsh running the same commands.

    sudo .venv/bin/python -m bench.preflight [--quick] [--nodes N] [--reps R]   # needs pdsh (apt-get install pdsh)

Both sides run the same probe script and the same software probe on every node; pdsh also
connects with OpenSSH each time, as ddptui connects with paramiko once. ddptui also runs its port
check (a listener on the master, a connect from each worker), which pdsh does not.

Every "node" here shares this machine's cores: with 8 nodes on 2 cores, 8 torch imports (the
software probe) are most of either figure. With fewer nodes than cores each node has a core, as a
real node has its own, and what ddptui does beside the node's work shows. What each side costs the
login node itself is printed apart: the CPU time of ddptui's process (with the pings it runs),
and of pdsh with its ssh clients; beside it the whole machine's CPU time over the same interval
(the nodes' work included, read from /proc/stat), which says how much of the wall time is the nodes'.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ddptui.core.checks.probe import probe_commands, probe_script
from ddptui.core.checks.software import PROBE
from ddptui.core.events import CheckResult, NodeState
from ddptui.core.playbook.loader import load_playbook
from ddptui.core.runbook import Runbook
from ddptui.core.transport.factory import SSHSettings, make_factory
from bench.common import NAMES, on_cluster
from tests.cluster.netns import Cluster


class Costs:
    """Wall time, the login node's CPU time and the whole machine's CPU time of one side's repetitions."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.machine: list[float] = []

    def measure(self, run: Callable[[], float]) -> None:
        """`run()` returns its wall time (what it times: the preflight, not loading the playbook)."""
        c0, m0 = login_cpu(), machine_cpu()
        self.wall.append(run())
        self.cpu.append(login_cpu() - c0)
        if m0 is not None and (m1 := machine_cpu()) is not None:
            self.machine.append(m1 - m0)


def login_cpu() -> float:
    """Seconds of CPU this process and the children it waited for have used: for ddptui its own
    threads and the pings it runs from the login node, for pdsh pdsh and its ssh clients. The sides
    run one after the other, so each side's difference is its own."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def machine_cpu() -> float | None:
    """Seconds of CPU that every process of the machine has used (/proc/stat: all but idle and
    iowait); None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def ddptui_once(pb_path: Path, cfg: Path, runs: Path) -> float:
    pb = load_playbook(pb_path)
    seen: list = []
    t0 = time.perf_counter()
    rb = Runbook(pb, seen.append, runs, make_factory(SSHSettings(ssh_config=cfg)))
    ok = rb.run_step("connect") and rb.run_step("check")
    dt = time.perf_counter() - t0
    rb.close()
    if not ok:  # a figure of a failed preflight would mean nothing: say which node and check, and stop
        bad = [f"{e.node}: {e.check} {e.status}: {e.summary}" for e in seen
               if isinstance(e, CheckResult) and e.status not in ("pass", "skip")]
        bad += [f"{e.node}: {e.state}: {e.message}" for e in seen if isinstance(e, NodeState) and e.state == "unreachable"]
        raise SystemExit("bench.preflight: ddptui's preflight failed, no figure: " + ("; ".join(bad) or str(rb.states)))
    return dt


def pdsh_once(cfg: Path, names: list[str], master_ip: str) -> float:
    script = probe_script(probe_commands(master_ip, 29570, False, True))
    env = {**os.environ, "PDSH_RCMD_TYPE": "ssh", "PDSH_SSH_ARGS_APPEND": f"-F {cfg}"}
    hosts = ",".join(names)
    t0 = time.perf_counter()
    for cmd in (f"sh -c {shlex.quote(script)}", f"{shlex.quote(sys.executable)} -c {shlex.quote(PROBE)}"):
        r = subprocess.run(["pdsh", "-w", hosts, cmd], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"bench.preflight: pdsh failed (rc {r.returncode}), no figure: {r.stderr[-500:]}")
    return time.perf_counter() - t0


def measure(cl: Cluster, names: list[str], reps: int) -> None:
    """Print the figures for `names` of the namespace cluster `cl` (up already)."""
    tmp = Path(tempfile.mkdtemp())
    pb = tmp / "bench.yaml"
    pb.write_text(f"name: bench\nnodes: [{', '.join(names)}]\njob:\n  script: builtin:smoke\n"
                  f"  master_port: 29570\n  backend: gloo\n  python: {sys.executable}\n")
    master_ip = cl.nodes[names[0]].ip
    ddptui_once(pb, cl.ssh_config, tmp)
    pdsh_once(cl.ssh_config, names, master_ip)
    d, p = Costs(), Costs()
    for _ in range(reps):  # interleaved, so that a busy moment of the machine weighs on both
        d.measure(lambda: ddptui_once(pb, cl.ssh_config, tmp))
        p.measure(lambda: pdsh_once(cl.ssh_config, names, master_ip))
    md, mp = statistics.median(d.wall), statistics.median(p.wall)
    print(f"preflight of {len(names)} nodes, median of {reps}, {os.cpu_count()} CPUs")
    print(f"  ddptui connect + check (all facts, port test, findings) {md * 1000:8.1f} ms")
    print(f"  pdsh, the same probe and software commands              {mp * 1000:8.1f} ms")
    print(f"  ratio ddptui / pdsh: {md / mp:.2f}x")
    cd, cp = statistics.median(d.cpu), statistics.median(p.cpu)
    print(f"  login node's CPU: ddptui's process {cd * 1000:.1f} ms, pdsh and its ssh clients {cp * 1000:.1f} ms"
          + (f": {cd / cp:.2f}x" if cp > 0 else ""))
    if d.machine and p.machine:
        print(f"  the whole machine's CPU (the nodes' work included): ddptui {statistics.median(d.machine):.2f} s, "
              f"pdsh {statistics.median(p.machine):.2f} s, on {os.cpu_count()} CPUs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.preflight")
    ap.add_argument("--quick", action="store_true", help="2 nodes, one repetition")
    ap.add_argument("--nodes", type=int, default=None, choices=range(2, len(NAMES) + 1), metavar="N",
                    help=f"nodes, 2 to {len(NAMES)} (default {len(NAMES)})")
    ap.add_argument("--reps", type=int, default=None)
    a = ap.parse_args(argv)
    return on_cluster(NAMES[:a.nodes or (2 if a.quick else len(NAMES))], measure, a.reps or (1 if a.quick else 5),
                      None if shutil.which("pdsh") else "pdsh is not installed")


if __name__ == "__main__":
    sys.exit(main())
