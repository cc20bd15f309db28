"""Parsers: what a node's commands printed -> typed facts. Pure functions, tested on real output."""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import asdict, dataclass, field, replace

from ..diagnosis.classify import address_kind
from .gpu_memory import GpuMemory, q_blocks

@dataclass(frozen=True)
class Interface:
    name: str
    addresses: tuple[str, ...]  # "10.0.0.2/24"
    up: bool
    kind: str = "ethernet"  # ethernet, loopback, docker, virtual, infiniband

    def ipv4(self) -> list[str]:
        return [a.split("/")[0] for a in self.addresses if ":" not in a]

    def ipv6(self) -> list[str]:
        """Its IPv6 addresses but the loopback, which NCCL alone skips (a veth's or an IPoIB port's fe80::)."""
        return [a.split("/")[0] for a in self.addresses if ":" in a and a.split("/")[0] != "::1"]

    @property
    def link_local(self) -> bool:
        """Every IPv4 address it has is 169.254.x.x, which only its own link reaches (a BMC's usb0): what
        the diagnosis calls such an address (classify.address_kind), said of an interface."""
        v4 = self.ipv4()
        return bool(v4) and all(address_kind(a) == "link-local" for a in v4)

    def to_json(self) -> dict:
        return {"name": self.name, "addresses": list(self.addresses), "up": self.up, "kind": self.kind}


_VIRTUAL = ("veth", "virbr", "br-", "cni", "flannel", "cali", "tun", "tap", "vxlan", "weave", "kube", "lxc", "tailscale", "wg")


def interface_kind(name: str, link_type: str = "") -> str:
    if name == "lo" or link_type == "loopback":
        return "loopback"
    if name.startswith("docker"):
        return "docker"
    if name.startswith("ib") or link_type == "infiniband":
        return "infiniband"
    if name.startswith(_VIRTUAL):
        return "virtual"
    return "ethernet"


def parse_ip_addr(text: str) -> list[Interface]:
    """`ip -j addr`, or `ip addr` where an old iproute2 knows no -j (CentOS 7's 3.10) ->
    interfaces in the kernel's order (the order NCCL walks them in)."""
    links = json.loads(text or "[]") if _is_json(text) else _ip_addr_text(text)
    out = []
    for link in links:
        addrs = tuple(f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", []) if "local" in a)
        flags = link.get("flags", [])
        up = "UP" in flags and link.get("operstate", "UP") in ("UP", "UNKNOWN")
        out.append(Interface(link["ifname"], addrs, up, interface_kind(link["ifname"], link.get("link_type", ""))))
    return out


def _is_json(text: str) -> bool:
    """`ip -j`'s output (or none at all), not an old iproute2's text."""
    return text.lstrip()[:1] in ("[", "")


_LINK = re.compile(r"^\d+: ([^:@\s]+)(?:@\S+)?: <([^>]*)>")  # "793: ddpt-node02@if2: <BROADCAST,...,UP> mtu ..."


def _ip_addr_text(text: str) -> list[dict]:
    """`ip addr`'s text, read into what `ip -j addr` gives for the same links (the fields read above)."""
    links: list[dict] = []
    for line in text.splitlines():
        if m := _LINK.match(line):
            state = re.search(r" state (\S+)", line)
            links.append({"ifname": m[1], "flags": m[2].split(","), "operstate": state[1] if state else "UNKNOWN",
                          "link_type": "", "addr_info": []})
            continue
        words = line.split()
        if not links or len(words) < 2:
            continue
        if words[0].startswith("link/"):
            links[-1]["link_type"] = words[0][5:]
        elif words[0] in ("inet", "inet6"):  # "inet 10.0.0.2/24 brd ...", "inet 10.0.0.1 peer 10.0.0.2/32"
            local, _, prefix = words[1].partition("/")
            links[-1]["addr_info"].append({"local": local, "prefixlen": int(prefix or (32 if words[0] == "inet" else 128))})
    return links


_ROUTE_TYPES = ("local", "broadcast", "unreachable", "prohibit", "blackhole", "multicast", "anycast", "throw", "nat")


def parse_route(text: str) -> dict:
    """`ip -j route get X` (or `ip route get X`'s text, an old iproute2's) -> {"interface", "source",
    "type", "gateway"}; a local route goes through lo."""
    if not _is_json(text):  # "8.8.8.8 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0"
        words = text.split()
        after = dict(zip(words, words[1:]))  # each keyword's value is the word after it
        return {"interface": after.get("dev"), "source": after.get("src"),
                "type": words[0] if words[0] in _ROUTE_TYPES else "unicast", "gateway": after.get("via")}
    routes = json.loads(text or "[]")
    if not routes:
        return {}
    r = routes[0]
    return {"interface": r.get("dev"), "source": r.get("prefsrc"), "type": r.get("type", "unicast"),
            "gateway": r.get("gateway")}


def parse_getent(text: str) -> list[str]:
    """`getent ahostsv4 NAME` -> the addresses, in order, without repeats."""
    seen: list[str] = []
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] not in seen and _is_ip(parts[0]):
            seen.append(parts[0])
    return seen


def _is_ip(s: str) -> bool:
    try:
        ipaddress.ip_address(s)
        return True
    except ValueError:
        return False


def is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "CUDA_")
# What the env section keeps at all (the bundle's report and diff read these too); the rest of a
# node's (or, on the local transport, ddptui's own) environment is dropped where it is parsed.
ENV_KEEP = (*ENV_PREFIXES, "MASTER_", "OMP_", "PYTORCH_", "SLURM_", "WORLD_SIZE")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def env_lines(text: str) -> str:
    """The probe's `env` output with only the variables the checks are for (ENV_KEEP)."""
    return "\n".join(line for line in text.splitlines() if _ENV_NAME.match(line) and line.startswith(ENV_KEEP))


def parse_env(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep and k.startswith(ENV_PREFIXES):
            out[k] = v
    return out


# ---- GPUs ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GPU:
    index: int
    name: str
    memory_total_mib: int | None
    memory_used_mib: int | None
    driver: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def _num(s: str) -> int | None:
    m = re.search(r"-?\d+(?:\.\d+)?", s)
    return int(float(m.group())) if m else None


def parse_nvidia_smi_csv(text: str) -> list[GPU]:
    """`nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version --format=csv[,noheader][,nounits]`.

    Accepts the header row and unit suffixes ("23028 MiB"), which the plain csv format has.
    """
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    if not rows:
        return []
    cols = ["index", "name", "memory.total", "memory.used", "driver_version"]
    if not rows[0][0].isdigit():  # a header: use its column names
        cols = [re.sub(r"\s*\[.*\]$", "", c) for c in rows[0]]
        rows = rows[1:]
    gpus = []
    for i, row in enumerate(rows):
        d = dict(zip(cols, row))
        gpus.append(GPU(
            index=int(d["index"]) if d.get("index", "").isdigit() else i,
            name=d.get("name", "?"),
            memory_total_mib=_num(d.get("memory.total", "")),
            memory_used_mib=_num(d.get("memory.used", "")),
            driver=d.get("driver_version"),
        ))
    return gpus


@dataclass(frozen=True)
class NvidiaSmiTable:
    driver: str | None
    cuda: str | None
    gpus: tuple[GPU, ...]


_TABLE_HEAD = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)\s+CUDA Version:\s+(\S+)")
_TABLE_GPU = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(On|Off)\s+\|")
_TABLE_MEM = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")


def parse_nvidia_smi_table(text: str) -> NvidiaSmiTable:
    """The plain `nvidia-smi` table (old and R550+ layouts): driver, CUDA version, GPUs and memory."""
    driver = cuda = None
    gpus: list[GPU] = []
    pending: tuple[int, str] | None = None
    for line in text.splitlines():
        if m := _TABLE_HEAD.search(line):
            driver, cuda = m.group(2), m.group(3)
            continue
        if m := _TABLE_GPU.match(line):
            pending = (int(m.group(1)), m.group(2).strip())
            continue
        if pending and (m := _TABLE_MEM.search(line)):
            gpus.append(GPU(pending[0], pending[1], int(m.group(2)), int(m.group(1)), driver))
            pending = None
    return NvidiaSmiTable(driver, cuda, tuple(gpus))


# ---- InfiniBand / RoCE -----------------------------------------------------------------------------
@dataclass(frozen=True)
class IBPort:
    name: str  # device, e.g. mlx5_0
    port: int
    state: str  # ACTIVE, DOWN, INIT, ...
    link_layer: str  # InfiniBand | Ethernet (RoCE)

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"

    def to_json(self) -> dict:
        return asdict(self)


def parse_ib_sysfs(text: str) -> list[IBPort]:
    """Lines `mlx5_0 1 4: ACTIVE InfiniBand` from /sys/class/infiniband/*/ports/*/{state,link_layer}."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+(\d+)\s+\d+:\s*(\S+)\s+(\S+)", line)
        if m:
            out.append(IBPort(m.group(1), int(m.group(2)), m.group(3), m.group(4)))
    return out


def parse_ibv_devinfo(text: str) -> list[IBPort]:
    out = []
    dev = None
    port = None
    state = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("hca_id:"):
            dev = line.split(":", 1)[1].strip()
        elif line.startswith("port:") and dev:
            port = int(line.split(":", 1)[1])
            state = None
        elif line.startswith("state:") and port is not None:
            s = line.split(":", 1)[1].strip().split()[0]
            state = s.replace("PORT_", "")
        elif line.startswith("link_layer:") and port is not None and dev:
            out.append(IBPort(dev, port, state or "UNKNOWN", line.split(":", 1)[1].strip()))
            port = None
    return out


@dataclass(frozen=True)
class Fabric:
    """One GPU's `Fabric` block of `nvidia-smi -q`: its State (Not Supported, Not Started, In Progress,
    Completed, or N/A) and Status (Success, N/A, or what went wrong, e.g. Insufficient Resources)."""

    gpu: str  # the bus id of `nvidia-smi -q`'s `GPU 00000000:19:00.0` line ("?" where the block came alone)
    state: str
    status: str

    @property
    def applies(self) -> bool:
        """A GPU behind NVSwitches: one without a fabric says N/A (or Not Supported)."""
        return self.state not in ("", "N/A", "Not Supported")

    @property
    def ready(self) -> bool:
        return self.state == "Completed" and self.status in ("Success", "N/A")


def parse_fabric(text: str) -> list[Fabric]:
    """Each GPU's `Fabric` block of `nvidia-smi -q`: its first State and Status."""
    out: list[Fabric] = []
    for gpu, _, key, value in q_blocks(text, ("Fabric",)):
        if not key:
            out.append(Fabric(gpu, "", ""))
        elif key in ("State", "Status") and not getattr(out[-1], key.lower()):
            out[-1] = replace(out[-1], **{key.lower(): value})
    return out


def parse_shm(text: str) -> int | None:
    """`df -Pk /dev/shm` -> size in MiB."""
    return _df_column(text, 1)


def parse_shm_free(text: str) -> int | None:
    """`df -Pk /dev/shm` -> what is free in it, in MiB (POSIX's `Available` column)."""
    return _df_column(text, 3)


def _df_column(text: str, i: int) -> int | None:
    lines = text.strip().splitlines()
    if len(lines) < 2:
        return None
    parts = lines[-1].split()
    try:
        return int(parts[i]) // 1024
    except (IndexError, ValueError):
        return None


@dataclass
class NodeFacts:
    """Everything ddptui learned about one node, each with the command and output it came from."""

    hostname: str | None = None
    hostname_resolves_to: list[str] = field(default_factory=list)
    interfaces: list[Interface] = field(default_factory=list)
    route_to_master: dict = field(default_factory=dict)
    gpus: list[GPU] = field(default_factory=list)
    gpu_processes: list[str] = field(default_factory=list)
    nvidia_smi: bool = False
    cuda_driver: str | None = None
    ib_devices: list[IBPort] = field(default_factory=list)
    shm_mib: int | None = None
    shm_free_mib: int | None = None
    memlock: dict | None = None  # {"limit_kib": KiB or None (unlimited), "ipc_lock": bool or None} (memlock.py)
    gpudirect: dict | None = None  # what GPUDirect RDMA may use: the peer-memory module, the driver's flavour (gpudirect.py)
    fabric: list[Fabric] = field(default_factory=list)  # each GPU's NVSwitch fabric (nvidia-smi -q)
    gpu_memory: list[GpuMemory] = field(default_factory=list)  # each GPU's remapped rows, retired pages (nvidia-smi -q)
    shell_env: dict[str, str] = field(default_factory=dict)
    nccl_conf: dict[str, dict[str, str]] = field(default_factory=dict)  # NCCL's own files: path -> NCCL_ lines (nccl_conf.py)
    env: dict[str, str] = field(default_factory=dict)  # NCCL's files', then the shell's, with the playbook's on top
    software: dict = field(default_factory=dict)
    predicted_transport: str | None = None
    transport_reason: str = ""
    nccl_interface: str | None = None
    gloo_interface: str | None = None
    port_listening: str | None = None
    slurm: dict | None = None  # transport: slurm — the allocation on this node (checks/allocation.py)
    evidence: dict[str, tuple[str, str]] = field(default_factory=dict)  # section -> (command, output)

    def to_json(self) -> dict:
        return {
            "hostname": self.hostname, "hostname_resolves_to": self.hostname_resolves_to,
            "interfaces": [i.to_json() for i in self.interfaces], "route_to_master": self.route_to_master,
            "gpus": [g.to_json() for g in self.gpus], "gpu_processes": self.gpu_processes,
            "ib_devices": [p.to_json() for p in self.ib_devices], "predicted_transport": self.predicted_transport,
            "transport_reason": self.transport_reason, "nccl_interface": self.nccl_interface,
            "gloo_interface": self.gloo_interface, "shm_mib": self.shm_mib,
            "shm_free_mib": self.shm_free_mib, "memlock": self.memlock, "gpudirect": self.gpudirect,
            **({"fabric": [{"gpu": f.gpu, "state": f.state, "status": f.status} for f in self.fabric]}
               if any(f.applies for f in self.fabric) else {}),
            **({"gpu_memory": [m.to_json() for m in self.gpu_memory]} if self.gpu_memory else {}),
            "env": self.env, **({"nccl_conf": self.nccl_conf} if self.nccl_conf else {}),
            "shell_env": self.shell_env, "software": self.software,
            **({"slurm": self.slurm} if self.slurm is not None else {}),
        }
