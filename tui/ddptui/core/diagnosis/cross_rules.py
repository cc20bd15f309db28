"""The cross-node rules, as data: a per-node fact (the NCCL version, the network transport, the net
plugin, the number of local processes) that must agree on every node of a job; engine.py (through
facts.py) extracts the facts and raises the rule's id when they differ."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import claims

Seen = dict  # (node, host) -> (value, line, text): one fact per host that printed it, on each node


def _listing(seen: Seen) -> str:
    return ", ".join(f"{host} {v[0]}" for (_, host), v in sorted(seen.items()))


def plugins_differ(seen: Seen) -> bool:
    """The internal plugin beside an external one, or two external plugins named the same way that
    differ. A host names its external plugin twice, `Loaded net plugin NAME` (the name's first word)
    then `Plugin Path : PATH`; one host's name beside another's path is the same plugin as often as
    not (one node's lines come before the other's path line), so a name is compared with names only."""
    by_kind: dict[str, set] = {}
    for value, *_, text in seen.values():
        kind = "internal" if value == "internal" else "path" if "Plugin Path : " in text else "name"
        by_kind.setdefault(kind, set()).add(value)
    return ("internal" in by_kind and len(by_kind) > 1) or any(len(values) > 1 for values in by_kind.values())


def networks_differ(seen: Seen) -> bool:
    """Two networks where one is a net plugin's (`AWS Libfabric` beside `Socket`: the plugin is missing,
    or failed, on some nodes). IB beside Socket is ib-socket-mismatch's, from the transport fact."""
    names = {value for value, *_ in seen.values()}
    return len(names) > 1 and not names <= {"IB", "Socket"}


def _transports(seen: Seen) -> str:
    ib = sorted({host for (_, host), v in seen.items() if v[0] == "IB"})
    sock = sorted({host for (_, host), v in seen.items() if v[0] == "Socket"})
    return f"{', '.join(ib)} use NET/IB, {', '.join(sock)} NET/Socket"


def _nprocs(seen: Seen) -> str:
    return "torchrun started " + ", ".join(f"{node}: {v[0]}" for (node, _), v in sorted(seen.items())) + " processes"


def _nnodes(seen: Seen) -> str:
    return "torchrun's nnodes differ: " + ", ".join(f"{node}: {v[0]}" for (node, _), v in sorted(seen.items()))


def _separate_comms(seen: Seen) -> str:
    return ("each host formed its own communicator of 1 rank (separate jobs): "
            + ", ".join(host for (_, host), _v in sorted(seen.items())))


@dataclass(frozen=True)
class CrossRule:
    id: str  # a catalog id
    fact: str  # version | transport | plugin | nproc | nnodes | comm: the per-node (per-host) fact
    summary: Callable[[Seen], str]
    hosts_if_one_node: bool = False  # one log that holds several hosts: name the hosts, not the node
    applies: Callable[[Seen], bool] | None = None  # when to raise it; None: the fact differs between them
    cite: Callable[[Seen], Seen] | None = None  # the facts its evidence quotes; None: every one


CROSS_RULES: tuple[CrossRule, ...] = (
    CrossRule("duplicate-rank", "claims", claims.summary, applies=claims.claimed_twice, cite=claims.cited),
    CrossRule("nccl-version-mismatch", "version", lambda seen: "NCCL versions differ: " + _listing(seen),
              hosts_if_one_node=True),
    CrossRule("ib-socket-mismatch", "transport", _transports),
    CrossRule("nproc-mismatch", "nproc", _nprocs),
    # each agent's group_world_size is the --nnodes it was started with: where they differ, the agent
    # that expects more nodes waits for them (at the exit barrier, after the workers finished)
    CrossRule("ranks-not-joined", "nnodes", _nnodes),
    CrossRule("net-plugin-mismatch", "plugin", lambda seen: "net plugins differ: " + _listing(seen),
              applies=plugins_differ),
    # a log cut to the `Using network` lines, or an NCCL that names no plugin (aws-ofi-nccl under 2.9
    # says only `Using network AWS Libfabric`): the networks themselves
    CrossRule("net-plugin-mismatch", "network", lambda seen: "NCCL networks differ: " + _listing(seen),
              applies=networks_differ),
    # comm: the largest communicator each host joined; several hosts that each joined only one of
    # 1 rank ran as separate jobs (e.g. an mpirun that started a 1-rank world in every container)
    CrossRule("ranks-not-joined", "comm", _separate_comms, hosts_if_one_node=True,
              applies=lambda seen: len(seen) >= 2 and all(v[0] == 1 for v in seen.values())),
)
