"""Preflight's findings from the facts: what each node's addresses and interfaces predict, and
what differs between the nodes. Pure functions of the facts, so they are tested without nodes.

Each per-node finding names its node first in its summary ("node02: ..."); Preflight merges the
findings of one id into one that covers all its nodes (diagnosis/merge.py).
"""

from __future__ import annotations

from dataclasses import replace

from ..diagnosis.catalog import CATALOG, SHM_LEFTOVERS, SHM_MORE, finding
from ..diagnosis.model import Evidence, Finding, Fix
from . import facts as F, nccl_conf
from .predict import ipv6_words, nccl_uses_ipv6


def loopback(node: str, nf: F.NodeFacts, backend: str, multi_node: bool) -> list[Finding]:
    """The hostname resolves to a loopback address: Gloo would advertise it to the other nodes."""
    loop = [a for a in nf.hostname_resolves_to if F.is_loopback(a)]
    if not multi_node or not loop:
        return []
    route_if = nf.route_to_master.get("interface")
    gloo_named = "GLOO_SOCKET_IFNAME" in nf.env
    sev = "error" if backend == "gloo" and not gloo_named else "warning"
    c, o = nf.evidence.get("resolve", ("", ""))
    env = {"GLOO_SOCKET_IFNAME": route_if} if route_if else {}
    if backend == "nccl" and route_if:
        env["NCCL_SOCKET_IFNAME"] = route_if
    fix = Fix(env=env, scope="nodes", per_node={node: env},
              explain=f"name the interface that routes to the master ({route_if}); better still, make the "
                      "hostname resolve to the node's real address in /etc/hosts") if route_if else \
        Fix(scope="manual", explain=f"make {nf.hostname} resolve to its real address in /etc/hosts")
    return [finding("loopback-hostname", [node], f"{node}: {nf.hostname} resolves to {loop[0]}",
                    [Evidence(node, 0, o.splitlines()[0] if o else loop[0], c)], severity=sev, fix=fix)]


def interfaces(node: str, nf: F.NodeFacts, backend: str, multi_node: bool) -> list[Finding]:
    """The backend's socket interface: named but absent (bad-socket-ifname: on one node too, where
    the job fails just the same), or, between nodes, not the one that routes to the master
    (wrong-interface). Where no interface was read (no `ip` on the node), nothing is said of them."""
    if not nf.interfaces:
        return []
    route_if = nf.route_to_master.get("interface")
    out = []
    for var, chosen, why_key in (("NCCL_SOCKET_IFNAME", nf.nccl_interface, "nccl-interface"),
                                 ("GLOO_SOCKET_IFNAME", nf.gloo_interface, "gloo-interface")):
        if (var.startswith("NCCL") and backend != "nccl") or (var.startswith("GLOO") and backend != "gloo"):
            continue
        why = nf.evidence.get(why_key, ("", ""))[1]
        if var in nf.env and chosen is None:
            c, o = nf.evidence.get("addr", ("", ""))
            out.append(finding("bad-socket-ifname", [node], f"{node}: {var}={nf.env[var]} names no usable interface",
                               [Evidence(node, 0, why, c)], fix=_ifname_fix(node, var, route_if, multi_node)))
            continue
        if not route_if or not multi_node:
            continue
        if var.startswith("GLOO") and var not in nf.env and any(F.is_loopback(a) for a in nf.hostname_resolves_to):
            continue  # loopback-hostname says it
        if chosen and chosen != route_if:
            c, o = nf.evidence.get("route", ("", ""))
            # link-local (169.254.x.x): no other host reaches it, as none reaches lo (uccl-project/uccl#1034)
            lost = chosen == "lo" or any(i.name == chosen and i.link_local for i in nf.interfaces)
            v6 = var.startswith("NCCL") and nccl_uses_ipv6(nf.interfaces, chosen, nf.env)
            out.append(finding(
                "wrong-interface", [node],
                f"{node}: {'NCCL' if var.startswith('NCCL') else 'Gloo'} would use {chosen}"
                f"{' (link-local 169.254.x.x: no other host reaches it)' if lost and chosen != 'lo' else ''}"
                f"{f' ({ipv6_words(v6)})' if v6 else ''}, but the master is reached through {route_if}",
                [Evidence(node, 0, f"{why} → {chosen}", ""), Evidence(node, 0, o.strip(), c)],
                severity="error" if lost else "warning", fix=_ifname_fix(node, var, route_if, multi_node)))
    return out


def _ifname_fix(node: str, var: str, route_if: str | None, multi_node: bool) -> Fix:
    """The interface to name: between nodes the one that routes to the master; on one node the
    loopback serves (every rank is on it); between nodes with no route known, the user's to pick."""
    target = route_if if multi_node else "lo"
    if target is None:
        return Fix(scope="manual", explain=f"set {var} to an interface the node has (`ip addr` lists them) "
                                            "on the network the other nodes reach")
    prefix = "" if var.startswith("GLOO") else " (a prefix: it also matches its .N VLANs; write =NAME for that name only)"
    return Fix(env={var: target}, scope="nodes", per_node={node: {var: target}},
               explain=(f"set {var} on each node to the interface that routes to the master" if multi_node else
                        f"one node: set {var} to lo, the loopback interface every rank shares") + prefix)


def fabric(node: str, nf: F.NodeFacts, backend: str | None) -> tuple[str, str, list[Finding]] | None:
    """GPUs behind NVSwitches: CUDA starts only once the Fabric Manager has set the fabric up (State
    Completed, Status Success); before, every CUDA call fails with error 802, 'system not yet
    initialized'. (check status, summary, findings), or None where no GPU has a fabric. A failure for
    an nccl job; for gloo (CPU tensors) a warning: that job fails only if it uses CUDA."""
    fabric = [f for f in nf.fabric if f.applies]
    if not fabric:
        return None
    bad = [f for f in fabric if not f.ready]
    states = ", ".join(sorted({f"State {f.state}, Status {f.status}" for f in bad or fabric}))
    if not bad:
        return "pass", f"NVSwitch fabric ready on {len(fabric)} GPUs ({states})", []
    nccl = backend == "nccl"
    cmd, _ = nf.evidence.get("fabric", ("", ""))
    first = bad[0]
    line = ("" if first.gpu == "?" else f"GPU {first.gpu}: ") + f"State {first.state}, Status {first.status}"
    found = finding("fabric-manager-down", [node], f"{node}: the NVSwitch fabric is not ready on {len(bad)} of "
                    f"{len(fabric)} GPUs ({states})", [Evidence(node, 0, line, cmd)], severity=None if nccl else "warning")
    return ("fail" if nccl else "warn"), (f"NVSwitch fabric not ready on {len(bad)} of {len(fabric)} GPUs ({states}): "
                                         "CUDA fails with error 802 until it is"), [found]


# what /dev/shm must offer a job of several processes on a node: NCCL's shared-memory transport and
# DataLoader workers (Docker's default of 64 MiB is the classic failure); the job gets what is free
SHM_MIN_MIB = 1024


def shm(node: str, nf: F.NodeFacts, nproc: int) -> tuple[str, str, list[Finding]] | None:
    """/dev/shm on a node: (check status, summary, findings), or None where `df` said nothing. Too
    small, or full: a crashed job's segments stay (NCCL's nccl-*, PSM's psm_*), and a job restarted
    on that node fails to create its own (llm-d/llm-d#352: a pod's 3 GB /dev/shm filled by the
    crashes before, every restart `No space left on device`). A prediction: warnings, and no
    NCCL_SHM_DISABLE (slower) before anything failed."""
    size, free = nf.shm_mib, nf.shm_free_mib
    if size is None:
        return None
    said = f"/dev/shm {size} MiB" + (f", {free} MiB free" if free is not None and free < size else "")
    if nproc <= 1:
        return "pass", said, []
    cmd, out = nf.evidence.get("shm", ("", ""))
    ev = [Evidence(node, 0, out.strip().splitlines()[-1] if out.strip() else "", cmd)]
    if size < SHM_MIN_MIB:
        return "warn", said, [finding("shm-too-small", [node], f"{node}: /dev/shm is {size} MiB", ev, severity="warning",
                                      fix=Fix(scope="manual", explain=SHM_MORE))]
    if free is not None and free < SHM_MIN_MIB:
        return "warn", said, [finding(
            "shm-too-small", [node], f"{node}: /dev/shm has {free} MiB free of {size} MiB", ev, severity="warning",
            fix=Fix(scope="manual", explain=SHM_LEFTOVERS))]
    return "pass", said, []


def set_in(nf: F.NodeFacts, name: str, playbook_env: dict[str, str]) -> str:
    """`" (in FILE)"` where the value NCCL sees of `name` comes from one of its files, not the environment."""
    return f" (in {path})" if (path := nccl_conf.from_file(nf, name, playbook_env)) else ""


def env_verdict(node: str, nf: F.NodeFacts, playbook_env: dict[str, str], findings: list[Finding]) -> tuple[str, str]:
    """The env check's (status, summary) on a node: ✗ (or ! for a warning) when a finding on it fixes a
    variable its env sets to another value (GLOO_SOCKET_IFNAME=eth9: bad-socket-ifname), so the env
    cell never shows ✓ beside a failure that the env causes; else which variables the shell sets."""
    blamed: list[tuple[Finding, str]] = []
    for f in findings:
        if node not in f.nodes or f.fix is None or not f.active:
            continue
        wanted = {**f.fix.env, **f.fix.per_node.get(node, {})}
        blamed += [(f, k) for k, v in wanted.items() if k in nf.env and nf.env[k] != v]
    if blamed:
        status = "fail" if any(f.severity == "error" for f, _ in blamed) else "warn"
        return status, "; ".join(f"{k}={nf.env[k]} ({_setter(nf, k, playbook_env)} sets it): {f.id}" for f, k in blamed)
    by_shell = {k: v for k, v in nf.shell_env.items() if k not in playbook_env}
    said = ("shell sets " + ", ".join(f"{k}={v}" for k, v in sorted(by_shell.items())) if by_shell
            else "the shell sets no NCCL_/GLOO_/TORCH_/CUDA_ variables")
    by_file: dict[str, list[str]] = {}
    for k in sorted(nf.env):
        if path := nccl_conf.from_file(nf, k, playbook_env):
            by_file.setdefault(path, []).append(f"{k}={nf.env[k]}")
    said = "; ".join([said] + [f"{path} sets {', '.join(kv)}" for path, kv in by_file.items()])
    # NVIDIA/nccl#1008, #1240: Azure images set it in /etc/nccl.conf. Set at all, even empty, NCCL loads it
    # (search.cc: `if (str)`): an empty value in the environment only hides the file's line
    if "NCCL_GRAPH_FILE" in nf.env:
        return "warn", (f"NCCL_GRAPH_FILE={nf.env['NCCL_GRAPH_FILE']} ({_setter(nf, 'NCCL_GRAPH_FILE', playbook_env)} "
                        f"sets it): NCCL takes its rings from that file instead of searching, and fails where the "
                        f"job's GPUs are not the ones it was written for (remove it there unless you wrote it); {said}")
    return "pass", said


def _setter(nf: F.NodeFacts, name: str, playbook_env: dict[str, str]) -> str:
    return "the playbook" if name in playbook_env else nccl_conf.from_file(nf, name, playbook_env) or "the shell"


def cross_node(fs: dict[str, F.NodeFacts], nprocs: dict[str, int], backend: str) -> list[Finding]:
    """What must agree between the nodes: the predicted NCCL transport, the software, nproc_per_node."""
    if len(fs) < 2:
        return []
    out = []
    if backend == "nccl":
        out += _families(fs)
        kinds = {n: f.predicted_transport for n, f in fs.items()}
        if len(set(kinds.values())) > 1:
            ib = [n for n, k in kinds.items() if k == "IB"]
            sock = [n for n, k in kinds.items() if k == "Socket"]
            ev = [Evidence(n, 0, f"NET/{kinds[n]}: {f.transport_reason}", "ib-sysfs / ibv_devinfo / env")
                  for n, f in fs.items()]
            disabled_somewhere = [n for n in sock if fs[n].env.get("NCCL_IB_DISABLE", "").lower() in ("1", "true")]
            alternatives = ["NCCL_IB_DISABLE=1 on every node: all traffic over TCP sockets — always works, "
                            "but slower than InfiniBand (often several times)"]
            if disabled_somewhere:
                where = ", ".join(f"{n}'s {nccl_conf.from_file(fs[n], 'NCCL_IB_DISABLE', {}) or 'shell init'}"
                                  for n in disabled_somewhere)
                alternatives.insert(0, f"remove NCCL_IB_DISABLE from {where} "
                                       "so every node uses IB: the fast choice, if their ports are ACTIVE")
            default = CATALOG["ib-socket-mismatch"].fix or Fix()
            out.append(finding("ib-socket-mismatch", list(fs),
                               f"{', '.join(ib)} will use NET/IB, {', '.join(sock)} NET/Socket", ev,
                               fix=replace(default, alternatives=tuple(alternatives))))
    vers = {n: (f.software.get("torch"), f.software.get("nccl"), f.software.get("cuda")) for n, f in fs.items()
            if f.software.get("torch")}
    if len(set(vers.values())) > 1:
        out.append(finding(
            "nccl-version-mismatch", list(vers),
            "torch / NCCL / CUDA differ: " + "; ".join(f"{n} torch {v[0]} nccl {v[1]} cuda {v[2]}" for n, v in vers.items()),
            [Evidence(n, 0, f"torch {v[0]} nccl {v[1]} cuda {v[2]}", "software probe") for n, v in vers.items()],
            severity="error" if backend == "nccl" else "warning"))
    if len(set(nprocs.values())) > 1:
        out.append(finding(
            "nproc-mismatch", list(nprocs), "nproc_per_node differs: " + ", ".join(f"{n}={p}" for n, p in nprocs.items()),
            [Evidence(n, 0, f"nproc_per_node={p}", "playbook") for n, p in nprocs.items()]))
    return out


def _families(fs: dict[str, F.NodeFacts]) -> list[Finding]:
    """NCCL's bootstrap on IPv6 on some nodes and IPv4 on others: no rank of one family connects to
    the other (NVIDIA/nccl#1291: ib0's fe80:: on one GH200, bond0's IPv4 on the other; it hung)."""
    v6 = {n: a for n, f in fs.items() if f.nccl_interface and (a := nccl_uses_ipv6(f.interfaces, f.nccl_interface, f.env))}
    v4 = [n for n, f in fs.items() if f.nccl_interface and n not in v6]
    if not v6 or not v4:
        return []
    forced = [n for n, i in v6.items() if i.ipv4()]  # NCCL_SOCKET_FAMILY=AF_INET6 chose IPv6 there
    per_node = {n: {"NCCL_SOCKET_IFNAME": r} for n, i in v6.items() if not i.ipv4()
                and (r := fs[n].route_to_master.get("interface")) and r != i.name}
    explain = ("set NCCL_SOCKET_IFNAME on " + ", ".join(per_node) + " to the interface that routes to the master, "
               "as the others use (or NCCL_SOCKET_FAMILY=AF_INET on every node)") if per_node else \
        "NCCL_SOCKET_FAMILY=AF_INET on every node, or one family everywhere"
    if forced:
        explain += f"; {', '.join(forced)} set NCCL_SOCKET_FAMILY=AF_INET6: remove it there"
    fix = Fix(env={"NCCL_SOCKET_IFNAME": next(iter(per_node.values()))["NCCL_SOCKET_IFNAME"]} if per_node else {},
              scope="nodes" if per_node else "manual", per_node=per_node, explain=explain)
    ev = [Evidence(n, 0, f"{fs[n].evidence.get('nccl-interface', ('', ''))[1]} → {fs[n].nccl_interface}", "")
          for n in [*v6, *v4]]
    return [finding("wrong-interface", [*v6, *v4],
                    f"NCCL would bootstrap over IPv6 on {', '.join(f'{n} ({i.name} {i.ipv6()[0]})' for n, i in v6.items())} "
                    f"and over IPv4 on {', '.join(v4)}: the two families never connect", ev, severity="error", fix=fix)]
