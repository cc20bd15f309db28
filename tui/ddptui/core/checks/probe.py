"""The node probe: one shell script per node, one SSH session, every fact in sections.

Each section is one command; its exact text and output are kept as the evidence for whatever
is concluded from it. The script is POSIX sh and needs only what a Linux node has (ip, getent,
df; nvidia-smi, ibv_devinfo and ss where present).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from . import gpudirect, memlock, nccl_conf

BEGIN, END = "@@ddptui:begin ", "@@ddptui:end "
_END = re.compile(r"^@@ddptui:end (\S+) rc=(\d+)$")


@dataclass(frozen=True)
class Section:
    name: str
    command: str
    output: str
    rc: int | None

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def missing(self) -> bool:
        """The command is not installed on the node (the shell's 127)."""
        return self.rc == 127


def probe_commands(master_ip: str | None, master_port: int, is_master: bool, is_worker: bool,
                   nccl_conf_file: str | None = None) -> list[tuple[str, str]]:
    """(section, shell command) in the order they run on the node. `nccl_conf_file`: the playbook's
    NCCL_CONF_FILE, where it sets one (nccl_conf.command)."""
    cmds = [
        ("hostname", "hostname"),
        ("resolve", 'getent ahostsv4 "$(hostname)"'),
        ("addr", _ip("addr")),
        ("env", "env"),
        ("nccl-conf", nccl_conf.command(nccl_conf_file)),  # what NCCL sets from its own files
        ("nvidia-smi", "nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version "
                       "--format=csv,noheader,nounits"),
        ("nvidia-smi-table", "nvidia-smi"),
        # each GPU's NVSwitch fabric: CUDA fails with error 802 until the Fabric Manager has set it up;
        # and its memory's health (rows or pages waiting for a reset, a failed remapping: gpu_memory.py).
        # `nvidia-smi -q`'s GPU lines, Fabric, Retired Pages and Remapped Rows blocks: the form users and
        # NVIDIA's guides read; an nvidia-smi without them prints none, and nothing is concluded
        ("fabric", "nvidia-smi -q | awk '/^GPU /{print} /^ *Fabric *$/{n=3} "
                   "/^ *(Retired Pages|Remapped Rows) *$/{n=5} n>0{print; n--}'"),
        ("gpu-apps", "nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory "
                     "--format=csv,noheader,nounits"),
        ("ib-sysfs", 'for p in /sys/class/infiniband/*/ports/*; do [ -e "$p/state" ] || continue; '
                     'd=${p%/ports/*}; echo "${d##*/} ${p##*/} $(cat "$p/state") $(cat "$p/link_layer")"; done'),
        ("ibv_devinfo", "ibv_devinfo"),
        ("shm", "df -Pk /dev/shm"),
        ("memlock", memlock.COMMAND),  # what RDMA may pin: the limit, and CAP_IPC_LOCK that lifts it
        ("gpudirect", gpudirect.COMMAND),  # GPUDirect RDMA: the peer-memory module NCCL looks for, the kernel, the driver's flavour
    ]
    if master_ip:
        cmds.append(("route", _ip(f"route get {shlex.quote(master_ip)}")))
    if is_master:
        cmds.append(("port", f"ss -Hltnp 'sport = :{int(master_port)}'"))  # -p: who holds it (ours to see)
    if is_worker and master_ip:
        cmds.append(("ping-master", f"ping -c 1 -W 2 {shlex.quote(master_ip)}"))
    return cmds


def _ip(args: str) -> str:
    """`ip -j ARGS`, or its text where an old iproute2 knows no -j (CentOS 7's 3.10): the parsers
    read both (facts.parse_ip_addr, parse_route)."""
    return f"ip -j {args} 2>/dev/null || ip {args}"


def probe_script(cmds: list[tuple[str, str]]) -> str:
    parts = []
    for name, cmd in cmds:
        # 127: the tool is not installed on this node; that is a fact too
        parts.append(f"echo '{BEGIN}{name}'; ( {cmd} ) 2>&1 </dev/null; echo \"{END}{name} rc=$?\"")
    return "\n".join(parts) + "\n"


def parse_sections(stdout: str, cmds: list[tuple[str, str]]) -> dict[str, Section]:
    commands = dict(cmds)
    out: dict[str, Section] = {}
    current: str | None = None
    buf: list[str] = []
    for line in stdout.splitlines():
        if line.startswith(BEGIN):
            current, buf = line[len(BEGIN):].strip(), []
            continue
        m = _END.match(line)
        if m and current == m.group(1):
            out[current] = Section(current, commands.get(current, current), "\n".join(buf), int(m.group(2)))
            current = None
            continue
        if current is not None:
            buf.append(line)
    if current is not None:  # cut short (timeout)
        out[current] = Section(current, commands.get(current, current), "\n".join(buf), None)
    return out


# A short-lived listener on master_port: proves from each worker that the port is reachable.
LISTENER = r"""
import socket, sys, time
port, want, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("0.0.0.0", port))
except OSError as e:
    print("bind-failed errno=%d %s" % (e.errno, e.strerror)); sys.exit(3)
s.listen(64)
print("listening", flush=True)
s.settimeout(0.2)
seen, deadline = 0, time.time() + timeout
while seen < want and time.time() < deadline:
    try:
        c, addr = s.accept()
    except socket.timeout:
        continue
    print("accepted %s" % addr[0], flush=True); c.close(); seen += 1
print("done accepted=%d" % seen)
"""

CONNECT = r"""
import socket, sys, time
host, port, budget = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline, last = time.time() + budget, ""
while True:
    try:
        socket.create_connection((host, port), timeout=max(0.5, min(3.0, deadline - time.time()))).close()
        print("connected %s:%d" % (host, port)); sys.exit(0)
    except socket.timeout:
        last = "timed out"
    except OSError as e:
        last = e.strerror or str(e)
    if time.time() >= deadline:
        print("failed %s:%d: %s" % (host, port, last)); sys.exit(1)
    time.sleep(0.2)
"""
