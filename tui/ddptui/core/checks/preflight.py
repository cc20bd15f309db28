"""Preflight: every node probed at once over its one connection; facts, checks and findings.

Per node, two sessions at once: the probe script (in the node's own shell env, so we see what its
shell sets) and the software probe (with the job's python and env, as the launch will see it). Then
across nodes: a short-lived listener on the master's port, and a real TCP connect to it from
every worker. Findings compare nodes with each other.
"""

from __future__ import annotations

import subprocess
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from collections.abc import Callable
from typing import Any

from ..diagnosis.catalog import finding
from ..diagnosis.merge import merge_by_id
from ..diagnosis.model import Evidence, Finding, Fix
from ..events import CheckResult
from ..playbook.model import Playbook
from ..transport.base import CommandResult, Transport
from . import facts as F
from . import gpu_memory, gpudirect, judge, memlock, nccl_conf
from .predict import decided_by, gloo_interface, interface_of, nccl_interface, predicted_transport
from .portcheck import port_check
from .probe import parse_sections, probe_commands, probe_script
from .software import PROBE, judge_software, parse_probe, probe_view


@dataclass
class NodeTarget:
    name: str
    role: str
    transport: Transport
    python: str
    env: dict[str, str]  # the playbook's env for this node (job + node)
    nproc: int


@dataclass
class PreflightResult:
    facts: dict[str, F.NodeFacts] = field(default_factory=dict)
    checks: dict[str, list[CheckResult]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    backend: str = "gloo"
    master_addr: str | None = None

    def failed(self) -> list[CheckResult]:
        return [c for rows in self.checks.values() for c in rows if c.status == "fail"]

    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error" and f.state == "active"]


def login_ping(host: str, timeout: float = 2.0) -> tuple[bool, str, str]:
    cmd = ["ping", "-c", "1", "-W", str(int(max(1, timeout))), host]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 3)
        return r.returncode == 0, " ".join(cmd), (r.stdout + r.stderr).strip()
    except FileNotFoundError:
        return False, " ".join(cmd), "ping is not installed on the login node"
    except subprocess.TimeoutExpired:
        return False, " ".join(cmd), "timed out"


class Preflight:
    def __init__(self, pb: Playbook, targets: list[NodeTarget], master_addr: str,
                 on_check: Callable[[CheckResult], None], command_timeout: float = 60.0) -> None:
        self.pb = pb
        self.targets = targets
        self.master_addr = master_addr
        self.on_check = on_check
        self.timeout = command_timeout
        self.result = PreflightResult(master_addr=master_addr)
        self._lock = threading.Lock()

    def _check(self, row: CheckResult) -> None:
        with self._lock:
            self.result.checks.setdefault(row.node, []).append(row)
        self.on_check(row)

    # ---- per node ----------------------------------------------------------------------------
    def _probe(self, t: NodeTarget) -> None:
        is_master = t.role == "master"
        remote_master = None if t.transport.kind == "local" else self.master_addr
        cmds = probe_commands(remote_master, self.pb.job.master_port, is_master, not is_master, t.env.get("NCCL_CONF_FILE"))
        res = t.transport.run([], shell=probe_script(cmds), timeout=self.timeout)
        sec = parse_sections(res.stdout, cmds)
        if "env" in sec:  # only what the env fact is for: never the rest of the environment
            sec["env"] = replace(sec["env"], output=F.env_lines(sec["env"].output))
        nf = F.NodeFacts()
        for s in sec.values():
            nf.evidence[s.name] = (s.command, s.output)
        n = t.name

        def ev(name: str) -> tuple[str, str]:
            s = sec.get(name)
            return (s.command, s.output) if s else ("", "")

        if t.transport.kind != "local":
            ok, cmd, out = login_ping(t.transport.address or n)
            self._check(CheckResult(n, "ping", "pass" if ok else "warn",
                                 "answers ping from the login node" if ok else "no ICMP answer from the login node (SSH works)",
                                 cmd, out))
        hs = sec.get("hostname")
        nf.hostname = hs.output.strip() if hs and hs.ok else None
        nf.hostname_resolves_to = F.parse_getent(sec["resolve"].output) if "resolve" in sec else []
        loop = [a for a in nf.hostname_resolves_to if F.is_loopback(a)]
        if not nf.hostname_resolves_to:
            self._check(CheckResult(n, "hostname", "warn", f"{nf.hostname!r} does not resolve on the node", *ev("resolve")))
        elif loop and t.transport.kind != "local":
            self._check(CheckResult(n, "hostname", "warn", f"{nf.hostname} resolves to {loop[0]} (loopback)", *ev("resolve")))
        else:
            self._check(CheckResult(n, "hostname", "pass", f"{nf.hostname} → {', '.join(nf.hostname_resolves_to)}", *ev("resolve")))
        try:
            nf.interfaces = F.parse_ip_addr(sec["addr"].output) if "addr" in sec and sec["addr"].ok else []
        except ValueError:
            nf.interfaces = []
        odd = [i.name for i in nf.interfaces if i.kind in ("docker", "virtual") and i.ipv4()]
        if "addr" in sec and sec["addr"].missing:  # a container image without iproute2: no reason to hold the job
            self._check(CheckResult(n, "interfaces", "warn", f"`ip` is not installed on {n} (iproute2): its interfaces, "
                                    "and the ones NCCL and Gloo would take, are not checked", *ev("addr")))
        elif not nf.interfaces:
            self._check(CheckResult(n, "interfaces", "fail", "no interface read from `ip addr` (its output is below)",
                                    *ev("addr")))
        else:
            self._check(CheckResult(n, "interfaces", "pass",
                                    ", ".join(f"{i.name} {','.join(i.ipv4()) or '-'}" for i in nf.interfaces if i.up)
                                    + (f"; docker/virtual: {', '.join(odd)}" if odd else ""), *ev("addr")))
        if "route" in sec:
            try:
                nf.route_to_master = F.parse_route(sec["route"].output) if sec["route"].ok else {}
            except ValueError:
                nf.route_to_master = {}
            r = nf.route_to_master
            if r.get("type") == "local":  # the master itself: the interface that holds the address
                r = {**r, "interface": interface_of(nf.interfaces, self.master_addr) or r.get("interface"),
                     "source": self.master_addr}
                nf.route_to_master = r
            if sec["route"].missing:
                self._check(CheckResult(n, "route", "warn", f"`ip` is not installed on {n} (iproute2): its route to "
                                        f"the master {self.master_addr} is not checked", *ev("route")))
            else:
                self._check(CheckResult(n, "route", "pass" if r else "fail",
                                        f"to {self.master_addr} via {r.get('interface')} from {r.get('source')}" if r
                                        else f"no route to the master {self.master_addr}", *ev("route")))
        nf.shell_env = F.parse_env(sec["env"].output) if "env" in sec else {}
        nccl_conf.take(nf, sec.get("nccl-conf"), {k: v for k, v in t.env.items() if k.startswith(F.ENV_PREFIXES)})
        # the env check comes in run(), once the findings say whether a variable set here is a cause
        # GPUs
        smi = sec.get("nvidia-smi")
        nf.nvidia_smi = bool(smi and smi.rc == 0)
        if nf.nvidia_smi:
            nf.gpus = F.parse_nvidia_smi_csv(smi.output)
            table = sec.get("nvidia-smi-table")
            if table and table.ok:
                nf.cuda_driver = F.parse_nvidia_smi_table(table.output).cuda
            apps = sec.get("gpu-apps")
            nf.gpu_processes = [l.strip() for l in apps.output.splitlines() if l.strip()] if apps and apps.ok else []
            nf.fabric = F.parse_fabric(sec["fabric"].output) if "fabric" in sec else []
            nf.gpu_memory = gpu_memory.parse_gpu_memory(sec["fabric"].output) if "fabric" in sec else []
        # InfiniBand / RoCE
        ports = F.parse_ib_sysfs(sec["ib-sysfs"].output) if "ib-sysfs" in sec else []
        ib_ev = ev("ib-sysfs")
        if not ports and "ibv_devinfo" in sec and sec["ibv_devinfo"].ok:
            ports = F.parse_ibv_devinfo(sec["ibv_devinfo"].output)
            ib_ev = ev("ibv_devinfo")
        nf.ib_devices = ports
        nf.predicted_transport, nf.transport_reason = predicted_transport(ports, nf.env)
        if var := decided_by(nf.transport_reason):  # set in one of NCCL's own files: the reason says which
            nf.transport_reason += judge.set_in(nf, var, t.env)
        self._check(CheckResult(n, "ib", "pass",
                             (", ".join(f"{p.name}:{p.port} {p.state} {p.link_layer}" for p in ports) or "no IB/RoCE device")
                             + f" → NET/{nf.predicted_transport} ({nf.transport_reason})", *ib_ev))
        nf.nccl_interface, why_nccl = nccl_interface(nf.interfaces, nf.env)
        nf.gloo_interface, why_gloo = gloo_interface(nf.interfaces, nf.env, nf.hostname_resolves_to)
        if "shm" in sec:
            nf.shm_mib, nf.shm_free_mib = F.parse_shm(sec["shm"].output), F.parse_shm_free(sec["shm"].output)
        nf.memlock = memlock.parse(sec["memlock"].output) if "memlock" in sec else None
        nf.gpudirect = gpudirect.parse(sec["gpudirect"].output) if "gpudirect" in sec else None
        if is_master and "port" in sec:
            nf.port_listening = sec["port"].output.strip() or None
        if "ping-master" in sec:
            s = sec["ping-master"]
            self._check(CheckResult(n, "ping-master", "pass" if s.ok else "warn",
                                 f"{'answers' if s.ok else 'no answer to'} ping to the master {self.master_addr}", s.command, s.output))
        with self._lock:
            self.result.facts[n] = nf
        nf.evidence["nccl-interface"] = ("", why_nccl)
        nf.evidence["gloo-interface"] = ("", why_gloo)

    def _software_probe(self, t: NodeTarget) -> CommandResult:
        return t.transport.run([t.python, "-c", PROBE], env=t.env, timeout=self.timeout)

    def _software(self, t: NodeTarget, nf: F.NodeFacts, r: CommandResult) -> None:
        info = parse_probe(r.stdout)
        nf.software = {k: info.get(k) for k in ("python", "torch", "cuda", "nccl", "gloo", "nccl_available",
                                                 "cuda_available", "gpus", "executable", "torch_error")}
        nf.evidence["software"] = (f"{t.python} -c <software probe>", (r.stdout + r.stderr).strip())

    # ---- across nodes -------------------------------------------------------------------------
    def run(self) -> PreflightResult:
        with ThreadPoolExecutor(max(1, 2 * len(self.targets))) as pool:
            # the software probe (python importing torch: the slowest) beside the probe script, on a
            # second channel of the same connection (a second step with --overlap under Slurm); the
            # port check as soon as every probe script has answered, beside the software probes
            sw = {t.name: pool.submit(self._software_probe, t) for t in self.targets}
            for n, f in [(t.name, pool.submit(self._probe, t)) for t in self.targets]:
                self._settle(n, f)
            port = pool.submit(self._port_stage)
            for t in self.targets:
                if t.name not in self.result.facts:
                    continue
                ok, r = self._settle(t.name, sw[t.name])
                if ok:
                    self._software(t, self.result.facts[t.name], r)
                else:  # half a node's facts are none, as when its probe script fails
                    with self._lock:
                        del self.result.facts[t.name]
            port_findings = port.result()
        self.result.backend = self._backend()
        self._judge_nodes()
        self.result.findings += port_findings
        self.result.findings += judge.cross_node(
            {t.name: self.result.facts[t.name] for t in self.targets if t.name in self.result.facts},
            {t.name: t.nproc for t in self.targets}, self.result.backend)
        self.result.findings = merge_by_id(self.result.findings)  # one finding per cause, covering its nodes
        for t in self.targets:  # ✓ only when no finding's cause is a variable this node's env sets
            if (nf := self.result.facts.get(t.name)) is not None:
                self._check(CheckResult(t.name, "env", *judge.env_verdict(t.name, nf, t.env, self.result.findings),
                                        *nf.evidence.get("env", ("", ""))))
        return self.result

    def _settle(self, node: str, f: Future) -> tuple[bool, Any]:
        """(True, what a node's probe gave), or (False, None) when it failed and its row says why:
        one node's failure never hides the others'."""
        try:
            return True, f.result()
        except Exception as e:  # noqa: BLE001
            self._check(CheckResult(node, "probe", "fail", f"the probe failed: {getattr(e, 'reason', e)}"))
            return False, None

    def _port_stage(self) -> list[Finding]:
        if self.master_addr and any(t.role == "master" and t.name in self.result.facts for t in self.targets):
            master = next(t for t in self.targets if t.role == "master")
            workers = [t for t in self.targets if t.role != "master" and t.name in self.result.facts]
            return port_check(master, workers, self.master_addr, self.pb.job.master_port, self.result.facts,
                              self._check)
        if self.master_addr:  # no listener without the master's probe: the workers' connects are not tried
            for t in self.targets:
                if t.role != "master" and t.name in self.result.facts:
                    self._check(CheckResult(t.name, "master-reachable", "skip",
                                            "not tried: the master's probe failed, so no port check ran on it"))
        return []

    def _backend(self) -> str:
        b = self.pb.job.backend
        if b != "auto":
            return b
        fs = self.result.facts.values()
        return "nccl" if fs and all(f.gpus for f in fs) else "gloo"

    def _judge_nodes(self) -> None:
        backend = self.result.backend
        for t in self.targets:
            nf = self.result.facts.get(t.name)
            if nf is None:
                continue
            n = t.name
            cmd, out = nf.evidence.get("nvidia-smi", ("", ""))
            faulty, found = gpu_memory.judge(n, nf.gpu_memory, out, nf.evidence.get("fabric", ("", ""))[0], cmd)
            self.result.findings += found
            if not nf.nvidia_smi:
                status, summary = ("fail" if backend == "nccl" or found else "skip",
                                   "no NVIDIA GPU (no nvidia-smi)" + (": nccl needs one per process" if backend == "nccl"
                                                                      else ": fine for a gloo job"))
            else:
                used = [g for g in nf.gpus if (g.memory_used_mib or 0) > 500]
                status = "pass"
                summary = f"{len(nf.gpus)} × {nf.gpus[0].name if nf.gpus else '?'}, {t.nproc} needed"
                if nf.gpus and len(nf.gpus) < t.nproc and backend == "nccl":
                    status = "fail"
                    self.result.findings.append(finding(
                        "gpu-count-short", [n], f"{n}: {len(nf.gpus)} GPUs, nproc_per_node is {t.nproc}",
                        [Evidence(n, 0, out.splitlines()[-1] if out else "", cmd)],
                        fix=Fix(scope="manual", explain=f"set nproc_per_node to {len(nf.gpus)} for {n}")))
                if used or nf.gpu_processes:
                    status = "warn" if status == "pass" else status
                    summary += f"; already in use: {len(nf.gpu_processes) or len(used)} process(es)"
            if faulty:  # a GPU lost, or its memory failing: said first, the cell showing what says so
                summary = faulty if not nf.nvidia_smi else f"{faulty}; {summary}"
                status = "fail" if found[0].severity == "error" or status == "fail" else "warn"
                if found[0].evidence[0].command != cmd:  # `nvidia-smi -q`'s blocks, not the GPU list
                    cmd, out = nf.evidence.get("fabric", (cmd, out))
            self._check(CheckResult(n, "gpus", status, summary, cmd, out))
            if (verdict := judge.fabric(n, nf, backend)) is not None:
                self._check(CheckResult(n, "fabric", *verdict[:2], *nf.evidence.get("fabric", ("", ""))))
                self.result.findings += verdict[2]
            for v in judge_software(probe_view(nf.software), backend, t.nproc):
                if v.check == "backend" and backend == "nccl" and not nf.nvidia_smi:
                    continue  # already said by the gpus check
                c, o = nf.evidence.get("software", ("", ""))
                self._check(CheckResult(n, v.check, v.status, v.summary, c, o))
            # /dev/shm, the locked-memory limit, GPUDirect RDMA: a row and its findings from one verdict each
            for check, verdict in (("shm", judge.shm(n, nf, t.nproc)), ("memlock", memlock.judge(n, nf, backend)),
                                   ("gpudirect", gpudirect.judge(n, nf, backend))):
                if verdict is not None:
                    self._check(CheckResult(n, check, *verdict[:2], *nf.evidence.get(check, ("", ""))))
                    self.result.findings += verdict[2]
            multi = len(self.targets) > 1
            self.result.findings += judge.loopback(t.name, nf, backend, multi and t.transport.kind != "local")
            self.result.findings += judge.interfaces(t.name, nf, backend, multi)
