"""The port check of a preflight: a short-lived listener on the master's port, and a real TCP
connect to it from every worker, all at once."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..diagnosis.catalog import finding
from ..diagnosis.model import Evidence, Finding, Fix
from ..events import CheckResult
from . import facts as F
from .probe import CONNECT, LISTENER

if TYPE_CHECKING:
    from .preflight import NodeTarget


def port_check(master: NodeTarget, workers: list[NodeTarget], master_addr: str, port: int,
               facts: dict[str, F.NodeFacts], check: Callable[[CheckResult], None]) -> list[Finding]:
    """Rows through `check`; the findings (port in use, workers that cannot connect) returned."""
    found: list[Finding] = []
    wait = 8.0
    listen: dict = {}

    def listener() -> None:
        listen["r"] = master.transport.run([master.python, "-c", LISTENER, str(port), str(len(workers)), str(wait)],
                                           timeout=wait + 10)

    th = threading.Thread(target=listener, daemon=True)
    th.start()
    results = {}
    if workers:
        with ThreadPoolExecutor(len(workers)) as pool:
            futs = {w.name: pool.submit(w.transport.run, [w.python, "-c", CONNECT, master_addr, str(port), "4"],
                                        timeout=20) for w in workers}
            results = {n: f.result() for n, f in futs.items()}
    th.join(wait + 12)
    lr = listen.get("r")
    lout = (lr.stdout + lr.stderr).strip() if lr else "(no answer)"
    lcmd = f"{master.python} -c <listener on :{port}>"
    if lr is not None and "bind-failed" in lr.stdout:
        check(CheckResult(master.name, "master-port", "fail", f"port {port} is already in use on the master", lcmd, lout))
        found.append(port_in_use(master.name, port, facts.get(master.name), lout, lcmd))
        for w in workers:  # a worker's connect would reach what holds the port: it says nothing
            check(CheckResult(w.name, "master-reachable", "skip",
                          f"not tried: the master's port check failed (port {port} is in use)"))
        return found
    check(CheckResult(master.name, "master-port", "pass", f"port {port} is free; a test listener opened", lcmd, lout))
    blocked = []
    for w in workers:
        r = results.get(w.name)
        out = (r.stdout + r.stderr).strip() if r else ""
        ok = r is not None and r.rc == 0
        cmd = f"{w.python} -c <connect {master_addr}:{port}>"
        check(CheckResult(w.name, "master-reachable", "pass" if ok else "fail",
                          f"TCP {master_addr}:{port} " + ("connects" if ok else f"fails: {out}"), cmd, out))
        if not ok:
            blocked.append(Evidence(w.name, 0, out or "no answer", cmd))
    if blocked:
        found.append(finding(
            "firewall-or-unreachable", [master.name] + [e.node for e in blocked],
            f"{', '.join(e.node for e in blocked)} cannot open a TCP connection to {master_addr}:{port}",
            blocked + [Evidence(master.name, 0, lout, lcmd)],
            fix=Fix(scope="manual", explain=f"open TCP {port} (and NCCL's/Gloo's ephemeral ports) between the "
                                            "nodes, or pick master_addr on an interface the workers can reach")))
    return found


def port_in_use(master: str, port: int, nf: F.NodeFacts | None, listener_out: str, listener_cmd: str) -> Finding:
    """The master's port is taken: by whom, when `ss -p` could say."""
    holder = port_holder(nf.port_listening if nf else None)
    by = f" by {holder[0]} (pid {holder[1]})" if holder else ""
    stop = f"stop {holder[0]} (kill {holder[1]})" if holder else f"stop what listens on {port}"
    return finding(
        "port-in-use", [master], f"master_port {port} is already taken on {master}{by}",
        [Evidence(master, 0, listener_out, listener_cmd)] + ([Evidence(master, 0, nf.port_listening, "ss -Hltnp")]
                                                             if nf and nf.port_listening else []),
        fix=Fix(scope="manual", explain=f"{stop} on {master}, or set job.master_port to a free port"))


_HOLDER = re.compile(r'users:\(\("([^"]+)",pid=(\d+)')


def port_holder(ss_line: str | None) -> tuple[str, int] | None:
    """(program, pid) from `ss -p` output: users:(("python3",pid=1234,fd=3)); None when ss could
    not say (another user's process, or no -p support)."""
    m = _HOLDER.search(ss_line or "")
    return (m.group(1), int(m.group(2))) if m else None
