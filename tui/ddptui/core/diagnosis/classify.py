"""What a piece of evidence means: an errno, an address, a signal, an IB event -> a catalog id.

The rules (rules.py) match the text; the functions here decide what the matched values say about
the cause, so that one rule covers every wording of a failure (NCCL old and new, c10d, Gloo) and
the id follows from the meaning (who connects, to which kind of address, with which errno), not
from one more string. Each `decide_*` takes a rule's match groups and returns (id, summary) or
None (the line says nothing decisive; another rule or `unrecognized-failure` speaks).
"""

from __future__ import annotations

import ipaddress
import re
import signal

from .model import Fix

# nvidia-smi's word for a GPU it cannot reach (fallen off the bus): a rule's evidence in a log, and
# the gpus check's in nvidia-smi's own output (checks/gpu_memory.py); no regex character in it
GPU_LOST = "Unable to determine the device handle for GPU"

# wrong-interface's own fix where NCCL took an interface with a link-local address: excluding docker, veth
# and lo (the catalog's) does not exclude it, and which interface routes between the nodes is the node's
LINK_LOCAL_FIX = Fix(scope="manual", explain=(
    "set NCCL_SOCKET_IFNAME on every node to the interface that routes between the nodes (`ddptui check` names "
    "it); the interface holding 169.254.x.x (`ip -4 addr`; a BMC's usb0 on many GPU servers) must not be it"))

# The errnos a connect or a transfer fails with, by number and by strerror text (Linux).
TIMED_OUT, REFUSED, NO_ROUTE, RESET, BROKEN_PIPE, ABORTED, ADDR_IN_USE = 110, 111, 113, 104, 32, 103, 98
_ERRNO_TEXT = {
    "connection timed out": TIMED_OUT, "connection refused": REFUSED, "no route to host": NO_ROUTE,
    "connection reset by peer": RESET, "broken pipe": BROKEN_PIPE, "software caused connection abort": ABORTED,
    "address already in use": ADDR_IN_USE, "network is unreachable": 101, "host is unreachable": NO_ROUTE,
    "connect timeout": TIMED_OUT,  # Gloo's pair: its own connect deadline passed (no SYN-ACK: dropped)
}


def errno_of(text: str | None) -> int | None:
    """110 from '110', '-110', 'Connection timed out' or 'SO_ERROR: Connection timed out'."""
    if not text:
        return None
    t = text.strip().lower()
    if t.lstrip("-").isdigit():
        return abs(int(t))
    for words, num in _ERRNO_TEXT.items():
        if words in t:
            return num
    return None


# what a host name is made of (RFC 1123 letters, digits, hyphens and dots; underscores, which some
# container and cloud names hold); anything else (a path, a shell word, "host:port") names no host
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def address_kind(addr: str | None) -> str:
    """'loopback', 'not-a-host' (a netmask, broadcast, multicast, 0.x, ::, or text that cannot be a
    host name, such as a path), 'link-local' (an IPv4 169.254.x.x: a host's own link reaches it,
    another host's does not), 'host' (a usable IP address) or 'name' (a host name: nothing to say
    about it here)."""
    if not addr:
        return "name"
    a = addr.strip("[]")
    if a.lower().startswith("::ffff:"):
        a = a[7:]
    a = a.split("%", 1)[0]
    if a.isdigit():  # an all-digit "host name" is read as a 32-bit IPv4 number: '6841231' is 0.104.99.143
        return "not-a-host"
    try:
        ip = ipaddress.ip_address(a)
    except ValueError:
        return "name" if _HOST_NAME.fullmatch(a) else "not-a-host"
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified or ip.is_multicast or ip.is_reserved or (ip.version == 4 and ip.packed[0] == 0):
        return "not-a-host"
    if ip.version == 4 and ip.is_link_local:  # 169.254/16: no router forwards it off its own link (RFC 3927)
        return "link-local"
    return "host"


def connect_failure(via: str, addr: str | None, err: int | None) -> str | None:
    """The cause of a failed connection made by `via` ('store': a torch c10d/TCPStore client to the
    master; 'nccl': NCCL's bootstrap or net socket to a peer; 'gloo': Gloo's pair to a peer), to
    `addr`, with errno `err`."""
    kind = address_kind(addr)
    if kind == "not-a-host":
        return "bad-master-addr"  # whatever the errno: nothing can listen there
    if kind == "loopback" and via != "store":
        # a peer was told to reach us on 127.x: Gloo takes the address the hostname resolves to,
        # NCCL the interface it picked. (A store on 127.0.0.1 is a normal single-node job.)
        return "loopback-hostname" if via == "gloo" else "wrong-interface"
    if kind == "link-local" and via == "nccl":
        # a peer's NCCL advertised an interface whose address is link-local (a BMC's usb0 host interface,
        # 169.254.3.1 on GH200 boards: uccl-project/uccl#1034, refused; verl#726, aborted): whatever the errno
        return "wrong-interface"
    if err in (RESET, BROKEN_PIPE):
        return "remote-rank-died"
    if via == "store":
        # refused: nothing listens yet (the master is late); no route: no host has that address
        return {REFUSED: "master-not-started", NO_ROUTE: "bad-master-addr"}.get(err or 0)
    if err in (NO_ROUTE, TIMED_OUT, ABORTED, 101):
        return "firewall-or-unreachable"
    return None


def _errtext(err: int | None, fallback: str | None) -> str:
    return {TIMED_OUT: "timed out", REFUSED: "refused", NO_ROUTE: "no route to host", RESET: "reset by peer",
            BROKEN_PIPE: "broken pipe", ABORTED: "aborted"}.get(err or 0, (fallback or "failed").strip())


def _connect_verdict(via: str, addr: str | None, port: str | None, err_text: str | None):
    err = errno_of(err_text)
    fid = connect_failure(via, addr, err)
    if fid is None:
        return None
    where = f"{addr}:{port}" if addr and port else (addr or "a peer")
    who = {"store": "the master's store", "nccl": "NCCL", "gloo": "Gloo"}[via]
    said = f"{who}: connect to {where} {_errtext(err, err_text)}"
    if fid == "wrong-interface" and address_kind(addr) == "link-local":
        return fid, f"{said}: a link-local address, which no other host reaches (a peer's NCCL took that interface)", \
            LINK_LOCAL_FIX
    return fid, said


def decide_store_connect(groups: tuple) -> tuple[str, str] | None:
    """(address, port, errno) of a c10d client socket that failed to connect."""
    addr, port, err = groups[:3]
    return _connect_verdict("store", addr, port, err)


def decide_nccl_connect(groups: tuple) -> tuple[str, str] | None:
    """(address, errno text or number) of an NCCL socket connect; address may be None (old NCCL)."""
    addr, err = groups[:2]
    return _connect_verdict("nccl", addr, None, err)


def decide_nccl_retry(groups: tuple) -> tuple[str, str] | None:
    """(errno text, retry, retries) of NCCL's connect retry: the last one is a failed connect."""
    err, retry, retries = groups[:3]
    return _connect_verdict("nccl", None, None, err) if retry == retries else None


def decide_gloo_connect(groups: tuple) -> tuple[str, str] | None:
    """Gloo's pair: (address, errno text) or (errno text, address), whichever the wording gives."""
    a, b = groups[:2]
    addr, err = (a, b) if errno_of(b) is not None else (b, a)
    if addr in ("", "none"):  # Gloo prints [none] when the pair never learned the peer's address
        addr = None
    return _connect_verdict("gloo", addr, None, err)


def decide_gloo_connect_timeout(groups: tuple) -> tuple[str, str] | None:
    """(peer address or 'none',) of Gloo's "Connect timeout [peer]": a connect that timed out."""
    return decide_gloo_connect((groups[0], "Connect timeout"))


def decide_master_name(groups: tuple) -> tuple[str, str] | None:
    """(master address as given, port): an all-digit name or a netmask is no address of the master."""
    addr, port = groups[:2]
    if address_kind(addr) == "not-a-host":
        return "bad-master-addr", f"{addr} is not a usable master address (port {port})"
    return None


# getaddrinfo's errors (glibc netdb.h): EAI_AGAIN, "Temporary failure in name resolution", means no
# resolver answered for the name at all; EAI_NONAME/EAI_NODATA for an IPv6 lookup only say that the
# name has no IPv6 address, which is common and harmless where IPv4 works
EAI_AGAIN = -3


def decide_gai(groups: tuple) -> tuple[str, str] | None:
    """(address family, host name, port, gai error) of c10d's lookup of a host name."""
    family, host, port, err = groups[:4]
    try:
        code = int(err)
    except (TypeError, ValueError):
        return None
    if address_kind(host) == "not-a-host":  # what was given as the master address is no host name
        return "bad-master-addr", f"the master address {host!r} is not a host name or an address (port {port})"
    if code == EAI_AGAIN or family == "IPv4":
        return "hostname-resolution", f"the host name {host} does not resolve (getaddrinfo error {code})"
    return None


def decide_store_barrier(groups: tuple) -> tuple[str, str] | None:
    """(world_size, worker_count) of c10d's store-based barrier (waiting, or timed out). Fewer
    workers than the world: ranks are missing. More: the barrier's key was counted by other
    processes too (a store shared by two launches, or kept from an earlier attempt), not a missing
    rank; the line alone does not say which."""
    world, count = int(groups[0]), int(groups[1])  # the rule's two (\d+)
    if count < world:
        return "missing-rank", f"{count} of {world} ranks reached the barrier"
    return None


# ---- signals and exit codes ------------------------------------------------------------------------
_BY_SIGNAL = {signal.SIGSEGV: "segfault-exit-11", signal.SIGKILL: "host-oom-exit-9"}


def signal_of_exit(rc: int) -> int | None:
    """The signal a process died of: Python reports -N, a shell 128+N."""
    if rc < 0:
        return -rc
    if 128 < rc < 160:
        return rc - 128
    return None


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def decide_signal(groups: tuple) -> tuple[str, str] | None:
    """(signal number,) of a worker that died of a signal."""
    try:
        num = abs(int(groups[0]))
    except (TypeError, ValueError):
        return None
    fid = _BY_SIGNAL.get(num)  # type: ignore[call-overload]
    return (fid, f"a worker died of {signal_name(num)} ({num})") if fid else None


# ---- InfiniBand asynchronous events (ibv_event_type_str) -------------------------------------------
def decide_ib_event(groups: tuple) -> tuple[str, str] | None:
    """(event text,): errors and catastrophic events are fatal; 'port active', 'LID change',
    'client reregistration', 'GID table change'... are news, not failures."""
    event = (groups[0] or "").strip()
    low = event.lower()
    if "error" in low or "catastrophic" in low or "fatal" in low:
        return "ib-async-fatal-event", f"the HCA reported '{event}'"
    return None
