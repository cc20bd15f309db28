"""What NCCL and Gloo will pick on a node, modelled on their own selection rules.

NCCL (bootstrap and the socket transport, src/misc/socket.cc): with NCCL_SOCKET_IFNAME unset it
takes interfaces whose name starts with `ib` first, then any other interface except `docker*`
and `lo`, then docker, then lo. NCCL_SOCKET_IFNAME is a comma list of prefixes; a leading `^`
excludes them, a leading `=` makes them exact names. NCCL's net transport is IB when an active
IB/RoCE port exists and NCCL_IB_DISABLE is not set (NCCL_IB_HCA filters devices the same way).
Gloo binds to the address the hostname resolves to, unless GLOO_SOCKET_IFNAME names an interface.
"""

from __future__ import annotations

from .facts import IBPort, Interface, is_loopback

TRUE = ("1", "true", "yes", "on")


def _spec(value: str) -> tuple[bool, bool, list[str]]:
    exclude = value.startswith("^")
    if exclude:
        value = value[1:]
    exact = value.startswith("=")
    if exact:
        value = value[1:]
    return exclude, exact, [v.strip() for v in value.split(",") if v.strip()]


def matches(name: str, spec: str) -> bool:
    """Does an interface or HCA name match a NCCL_SOCKET_IFNAME / NCCL_IB_HCA value?"""
    exclude, exact, items = _spec(spec)
    base = name.split(":")[0]
    hit = any((base == i.split(":")[0]) if exact else base.startswith(i.split(":")[0]) for i in items)
    return not hit if exclude else hit


def nccl_interface(interfaces: list[Interface], env: dict[str, str]) -> tuple[str | None, str]:
    """The interface NCCL will use for its bootstrap and sockets, and why.

    NCCL takes an interface at the first address getifaddrs() gives for it, IPv4 or IPv6 (it skips
    only ::1), and getifaddrs lists every interface's IPv4 addresses before any IPv6 one: in each
    group the interfaces with an IPv4 address come first, then those with IPv6 alone. An IPoIB port
    given no address still has its fe80::, and NCCL bootstraps on it (NVIDIA/nccl#1291: `Bootstrap :
    Using ib0:fe80::...%ib0` on one GH200, bond0 on the other, and the test hung).
    NCCL_SOCKET_FAMILY=AF_INET or AF_INET6 keeps one family."""
    up = [i for i in interfaces if i.up]
    usable = [i for i in up if binds_ipv4(i, env)] + [i for i in up if binds_ipv6(i, env)]
    spec = env.get("NCCL_SOCKET_IFNAME")
    if spec:
        for i in usable:
            if matches(i.name, spec):
                return i.name, f"NCCL_SOCKET_IFNAME={spec}" + _v6(i, env)
        return None, f"NCCL_SOCKET_IFNAME={spec} matches no interface that is up with an address"
    for group, why in (
        ([i for i in usable if i.name.startswith("ib")], "NCCL prefers ib* interfaces"),
        ([i for i in usable if i.kind not in ("docker", "loopback")], "the first interface that is not docker or lo"),
        ([i for i in usable if i.kind == "docker"], "only docker interfaces are left"),
        ([i for i in usable if i.kind == "loopback"], "only lo is left"),
    ):
        if group:
            return group[0].name, why + _v6(group[0], env)
    return None, "no interface is up with an address"


def _family(env: dict[str, str]) -> str:
    return env.get("NCCL_SOCKET_FAMILY", "").strip().upper()


def binds_ipv4(i: Interface, env: dict[str, str]) -> bool:
    """NCCL takes `i` at an IPv4 address: it has one, and NCCL_SOCKET_FAMILY does not ask for IPv6."""
    return bool(i.ipv4()) and _family(env) != "AF_INET6"


def binds_ipv6(i: Interface, env: dict[str, str]) -> bool:
    """NCCL takes `i` at an IPv6 address: it has no IPv4 (or NCCL_SOCKET_FAMILY=AF_INET6 asks for one),
    and NCCL_SOCKET_FAMILY does not keep to IPv4. Never both this and binds_ipv4."""
    family = _family(env)
    return bool(i.ipv6()) and family != "AF_INET" and (family == "AF_INET6" or not i.ipv4())


def _v6(i: Interface, env: dict[str, str]) -> str:
    """What the reason adds where NCCL will bind the interface's IPv6 address."""
    return f" ({ipv6_words(i)})" if binds_ipv6(i, env) else ""


def ipv6_words(i: Interface) -> str:
    """The IPv6 address NCCL binds on `i`, and why that family: it has no IPv4, or NCCL_SOCKET_FAMILY said so."""
    return f"IPv6 alone: {i.ipv6()[0]}" if not i.ipv4() else f"IPv6 by NCCL_SOCKET_FAMILY: {i.ipv6()[0]}"


def nccl_uses_ipv6(nf_interfaces: list[Interface], chosen: str | None, env: dict[str, str]) -> Interface | None:
    """`chosen`, where NCCL will bind an IPv6 address on it (it has no IPv4, or NCCL_SOCKET_FAMILY=AF_INET6)."""
    i = next((i for i in nf_interfaces if i.name == chosen), None)
    return i if i is not None and binds_ipv6(i, env) else None


def interface_of(interfaces: list[Interface], address: str) -> str | None:
    for i in interfaces:
        if address in i.ipv4():
            return i.name
    return "lo" if is_loopback(address) else None


def gloo_interface(interfaces: list[Interface], env: dict[str, str], resolves_to: list[str]) -> tuple[str | None, str]:
    spec = env.get("GLOO_SOCKET_IFNAME")
    if spec:
        names = [s.strip() for s in spec.split(",")]
        for n in names:
            if any(i.name == n and i.ipv4() for i in interfaces):
                return n, f"GLOO_SOCKET_IFNAME={spec}"
        return None, f"GLOO_SOCKET_IFNAME={spec}: no such interface with an IPv4 address"
    if not resolves_to:
        return "lo", "the hostname does not resolve: Gloo falls back to the loopback address"
    addr = resolves_to[0]
    return interface_of(interfaces, addr), f"the hostname resolves to {addr}"


def decided_by(reason: str) -> str | None:
    """The variable that made the choice a reason here explains: every such reason starts `NAME=value`
    (`NCCL_IB_DISABLE=1`, `NCCL_IB_HCA=mlx5_1 matches no active port`); None where the machine did."""
    name, sep, _ = reason.partition("=")
    return name if sep and name.isidentifier() and name.isupper() else None


def predicted_transport(ports: list[IBPort], env: dict[str, str]) -> tuple[str, str]:
    if env.get("NCCL_IB_DISABLE", "").lower() in TRUE:
        return "Socket", f"NCCL_IB_DISABLE={env['NCCL_IB_DISABLE']}"
    net = env.get("NCCL_NET", "")
    if net and net.lower() == "socket":
        return "Socket", f"NCCL_NET={net}"
    active = [p for p in ports if p.active]
    hca = env.get("NCCL_IB_HCA")
    if hca:
        active = [p for p in active if matches(f"{p.name}:{p.port}", hca)]
        if not active and any(p.active for p in ports):
            return "Socket", f"NCCL_IB_HCA={hca} matches no active port"
    if active:
        p = active[0]
        kind = "RoCE" if p.link_layer == "Ethernet" else "InfiniBand"
        return "IB", f"{p.name} port {p.port} is ACTIVE ({kind})"
    if ports:
        return "Socket", "no InfiniBand/RoCE port is ACTIVE"
    return "Socket", "no InfiniBand/RoCE device"
