"""A real multi-host test cluster on this machine: network namespaces on a Linux bridge.

Each node gets its own network namespace, UTS namespace (hostname), /etc/hosts, address, host key
and a real sshd bound to its address. The root namespace plays the login node. Options cover
what the tests need: a node that is down, a jump host with nodes behind it on a second bridge,
per-node PATH for named test doubles (through sshd's SetEnv), a hostname that maps to 127.0.1.1,
and a firewall rule inside a node.

    python -m tests.cluster.netns up [N]      # bring up N nodes (default 3), print the ssh_config
    python -m tests.cluster.netns down        # tear down everything this module made

Needs root, iproute2, openssh-server (and iptables for firewall rules).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "ddpt-"  # every namespace, link and folder this module makes starts with it
BRIDGE, BRIDGE2 = "ddptbr0", "ddptbr1"
SUBNET, SUBNET2 = "10.213.0", "10.214.0"
STATE = Path("/run/ddptui-testcluster.json")


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def missing_requirements() -> str | None:
    """Why the cluster cannot run here, or None."""
    if os.geteuid() != 0:
        return "the namespace cluster needs root (CI runs as root)"
    for tool in ("ip", "ssh-keygen", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path("/usr/sbin/sshd").exists():
        return "sshd is not installed (apt-get install openssh-server)"
    return None


@dataclass
class NodeOpts:
    name: str
    sshd: bool = True  # False: a node whose sshd never starts (down)
    behind_jump: bool = False  # on the second bridge, reachable only through the jump host
    extra_path: str | None = None  # prepended to PATH of ssh sessions (test doubles)
    loopback_hostname: bool = False  # its /etc/hosts maps its own name to 127.0.1.1
    unresolvable_hostname: bool = False  # its /etc/hosts does not know its own name
    setenv: dict = field(default_factory=dict)  # variables every ssh session on the node has (its "shell env")
    dummy_ifaces: tuple = ()  # (name, cidr or None) extra interfaces that lead nowhere, e.g. ("ib0", "192.168.77.2/24")
    shm_size: str | None = None  # a /dev/shm of its own, a tmpfs of that size (a container's), e.g. "1100m"
    memlock_kib: int | None = None  # the locked-memory limit its sessions get, without CAP_IPC_LOCK (Docker's: 64)
    # the GPU driver's banner its /proc/driver/nvidia/version shows (a file of doubles/nvidia-version), and
    # whether its /sys/module has nvidia_peermem: GPUDirect RDMA's kernel side, in a mount namespace of its own
    nvidia_version: Path | None = None
    peermem: bool = False


@dataclass
class Node:
    name: str
    ns: str
    ip: str
    veth: str
    opts: NodeOpts
    host_key_pub: str = ""
    sshd_pid: int | None = None


@dataclass
class Cluster:
    root: Path
    nodes: dict[str, Node] = field(default_factory=dict)
    jump: str | None = None

    @property
    def ssh_config(self) -> Path:
        return self.root / "client" / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.root / "client" / "known_hosts"

    @property
    def client_key(self) -> Path:
        return self.root / "client" / "id_ed25519"

    def ns_exec(self, node: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return sh("ip", "netns", "exec", self.nodes[node].ns, *cmd, check=check)

    def pids(self, node: str) -> list[int]:
        r = sh("ip", "netns", "pids", self.nodes[node].ns, check=False)
        return [int(p) for p in r.stdout.split()]

    def cut_link(self, node: str) -> None:
        sh("ip", "link", "set", self.nodes[node].veth, "down")

    def restore_link(self, node: str) -> None:
        sh("ip", "link", "set", self.nodes[node].veth, "up")

    def drop_port(self, node: str, port: int) -> None:
        self.ns_exec(node, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP")

    def undrop_port(self, node: str, port: int) -> None:
        self.ns_exec(node, "iptables", "-D", "INPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP", check=False)

    def shape_link(self, node: str, rate: str = "20mbit") -> None:
        """Slow what the node sends: a token bucket on its eth0 (the veth end inside its namespace)."""
        self.ns_exec(node, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate,
                     "burst", "32kbit", "latency", "400ms")

    def unshape_link(self, node: str) -> None:
        self.ns_exec(node, "tc", "qdisc", "del", "dev", "eth0", "root", check=False)

    def stop_sshd(self, node: str) -> None:
        """TERM the node's listening sshd (a restart's first half): connections already open live on."""
        n = self.nodes[node]
        if n.sshd_pid:
            _kill(n.sshd_pid)
            n.sshd_pid = None

    def kill_sshd(self, node: str) -> list[int]:
        """SIGKILL every sshd of the node, the listener and each connection's own (the OOM killer, a
        `pkill -9 sshd`): the sessions' processes lose their stdin and stdout. The pids killed."""
        killed = []
        for pid in self.pids(node):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                    os.kill(pid, 9)
                    killed.append(pid)
            except OSError:
                pass
        n = self.nodes[node]
        if n.sshd_pid:
            _kill(n.sshd_pid)  # reaps it: it is this process's child
            n.sshd_pid = None
        return killed

    def start_sshd(self, node: str) -> None:
        """Start the node's sshd again (after stop_sshd or kill_sshd) and wait until it listens."""
        if not self.nodes[node].sshd_pid:
            _start_sshd(self, self.nodes[node])
            _wait_listening(self)


def _kill(pid: int, timeout: float = 3.0) -> None:
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        return
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    return
        except (FileNotFoundError, IndexError):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


SSHD_CONFIG = """\
ListenAddress {ip}:22
HostKey {hostkey}
PidFile {root}/{name}/sshd.pid
AuthorizedKeysFile {root}/client/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel ERROR
Subsystem sftp internal-sftp
{setenv}
"""


def up(specs: list[NodeOpts], root: Path | None = None) -> Cluster:
    """Bring the cluster up; on any failure everything made so far is torn down again."""
    why = missing_requirements()
    if why:
        raise RuntimeError(why)
    down()  # leftovers of an interrupted run
    root = Path(root or tempfile.mkdtemp(prefix="ddptui-cluster-"))
    cl = Cluster(root)
    try:
        _up(cl, specs)
    except BaseException:
        down(cl)
        raise
    return cl


def _up(cl: Cluster, specs: list[NodeOpts]) -> None:
    root = cl.root
    (root / "client").mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(exist_ok=True)
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ddptui-test-client", "-f", str(cl.client_key))
    shutil.copy(f"{cl.client_key}.pub", root / "client" / "authorized_keys")
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    if any(s.behind_jump for s in specs):
        sh("ip", "link", "add", BRIDGE2, "type", "bridge")
        sh("ip", "link", "set", BRIDGE2, "up")  # no address here: the login node cannot reach it
        # ...and packets for the back subnet must never leave this machine by the default route.
        sh("ip", "route", "replace", "unreachable", f"{SUBNET2}.0/24")
    front = [s for s in specs if not s.behind_jump]
    back = [s for s in specs if s.behind_jump]
    if back:
        front.append(NodeOpts("jump"))
        cl.jump = "jump"
    STATE.write_text(json.dumps({"root": str(root), "ns": [PREFIX + s.name for s in front + back]}))
    for i, s in enumerate(front, start=2):
        _add_node(cl, s, f"{SUBNET}.{i}", BRIDGE)
    for i, s in enumerate(back, start=2):
        _add_node(cl, s, f"{SUBNET2}.{i}", BRIDGE2)
    if back:  # the jump host's second leg, on the back bridge
        j = cl.nodes["jump"]
        veth = f"{PREFIX}jb"
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth1", "netns", j.ns)
        sh("ip", "link", "set", veth, "master", BRIDGE2, "up")
        sh("ip", "-n", j.ns, "addr", "add", f"{SUBNET2}.1/24", "dev", "eth1")
        sh("ip", "-n", j.ns, "link", "set", "eth1", "up")
    hosts = "127.0.0.1 localhost\n" + "".join(f"{n.ip} {n.name}\n" for n in cl.nodes.values())
    for n in cl.nodes.values():
        d = Path(f"/etc/netns/{n.ns}")
        d.mkdir(parents=True, exist_ok=True)
        own = hosts
        if n.opts.unresolvable_hostname:
            own = "".join(l + "\n" for l in hosts.splitlines() if not l.endswith(f" {n.name}"))
        elif n.opts.loopback_hostname:  # the Debian installer's habit: the own name on 127.0.1.1
            own = f"127.0.1.1 {n.name}\n" + "".join(l + "\n" for l in hosts.splitlines() if not l.endswith(f" {n.name}"))
        (d / "hosts").write_text(own)
    known = []
    for n in cl.nodes.values():
        hk = root / n.name / "ssh_host_ed25519_key"
        hk.parent.mkdir(exist_ok=True)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", n.name, "-f", str(hk))
        n.host_key_pub = " ".join(Path(f"{hk}.pub").read_text().split()[:2])
        known.append(f"{n.name},{n.ip} {n.host_key_pub}\n")
        setenv = []
        path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        if n.opts.extra_path:
            path = f"{n.opts.extra_path}:{path}"
        envs = [f"PATH={path}"] + [f"{k}={v}" for k, v in n.opts.setenv.items()]
        setenv.append("SetEnv " + " ".join(envs))
        (root / n.name / "sshd_config").write_text(SSHD_CONFIG.format(
            ip=n.ip, hostkey=hk, root=root, name=n.name, setenv="\n".join(setenv)))
        if n.opts.sshd:
            _start_sshd(cl, n)
    cl.known_hosts.write_text("".join(known))
    lines = []
    for n in cl.nodes.values():
        lines += [f"Host {n.name}", f"  HostName {n.ip}", "  User root", f"  IdentityFile {cl.client_key}",
                  "  IdentitiesOnly yes", f"  UserKnownHostsFile {cl.known_hosts}", "  StrictHostKeyChecking yes",
                  "  ConnectTimeout 3", "  BatchMode yes"]
        if n.opts.behind_jump:
            lines.append("  ProxyJump jump")
        lines.append("")
    cl.ssh_config.write_text("\n".join(lines))
    _wait_listening(cl)


def _add_node(cl: Cluster, s: NodeOpts, ip: str, bridge: str) -> None:
    ns = PREFIX + s.name
    veth = f"{PREFIX}{s.name}"[:15]
    sh("ip", "netns", "add", ns)
    for dname, cidr in s.dummy_ifaces:
        # A veth pair with both ends inside the node (no dummy module here): it reaches nothing. Made
        # before eth0, it comes first in the kernel's order, as a BMC's usb0 often does (NCCL walks it so);
        # its peer is named so that no prefix NCCL prefers (ib*) takes the peer for it.
        sh("ip", "-n", ns, "link", "add", dname, "type", "veth", "peer", "name", f"peer-{dname}")
        if cidr:  # None: only the fe80:: the kernel gives it, as an IPoIB port nobody gave an address
            sh("ip", "-n", ns, "addr", "add", cidr, "dev", dname)
        sh("ip", "-n", ns, "link", "set", dname, "up")
        sh("ip", "-n", ns, "link", "set", f"peer-{dname}", "up")
    sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
    sh("ip", "link", "set", veth, "master", bridge, "up")
    sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
    sh("ip", "-n", ns, "link", "set", "eth0", "up")
    cl.nodes[s.name] = Node(s.name, ns, ip, veth, s)


def _start_sshd(cl: Cluster, n: Node) -> None:
    cfg = cl.root / n.name / "sshd_config"
    # ip netns exec, unshare (no --fork) and sh's exec all exec in place: the PID is sshd's.
    # A node with its own /dev/shm: sshd, and every session it starts, in a mount namespace of its own
    # (`nsenter -t SSHD_PID -m` reaches it, as a job on the node would)
    o = n.opts
    own = ["--mount", "--propagation", "private"] if o.shm_size or o.nvidia_version or o.peermem else []
    setup = f"mount -t tmpfs -o size={o.shm_size} shm /dev/shm && " if o.shm_size else ""
    # /proc/driver and /sys/module are the kernel's: a tmpfs over each, in this mount namespace only, holds
    # what a GPU node's would (Docker masks /proc paths the same way)
    if o.nvidia_version:
        setup += ("mount -t tmpfs nvidia /proc/driver && mkdir /proc/driver/nvidia && "
                  f"cp {shlex.quote(str(o.nvidia_version))} /proc/driver/nvidia/version && ")
    if o.peermem:
        setup += ("mount -t tmpfs modules /sys/module && mkdir /sys/module/nvidia_peermem && "
                  "echo 470.103.01 > /sys/module/nvidia_peermem/version && ")
    # A node whose sessions get a low locked-memory limit and no CAP_IPC_LOCK, as Docker gives a container
    lock = (f"ulimit -l {int(n.opts.memlock_kib)} && exec setpriv --bounding-set -ipc_lock "
            if n.opts.memlock_kib is not None else "exec ")
    p = subprocess.Popen(["ip", "netns", "exec", n.ns, "unshare", "--uts", *own, "--", "sh", "-c",
                          f"{setup}hostname {n.name} && {lock}/usr/sbin/sshd -D -e -f {cfg}"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=open(cl.root / n.name / "sshd.log", "w"), start_new_session=True)
    n.sshd_pid = p.pid


def _wait_listening(cl: Cluster, timeout: float = 10.0) -> None:
    for n in cl.nodes.values():
        if not n.sshd_pid:
            continue
        deadline = time.time() + timeout
        while True:
            r = cl.ns_exec(n.name, "sh", "-c", f"ss -ltn 'sport = :22' | grep -q {n.ip}", check=False)
            if r.returncode == 0:
                break
            if time.time() > deadline:
                log = (cl.root / n.name / "sshd.log").read_text()
                raise RuntimeError(f"sshd on {n.name} did not listen: {log}")
            time.sleep(0.05)


def down(cl: Cluster | None = None) -> None:
    """Remove the namespaces, links, processes and files; also those of an interrupted run."""
    names: list[str] = []
    root = None
    if cl is not None:
        names = [n.ns for n in cl.nodes.values()]
        root = cl.root
        for n in cl.nodes.values():
            if n.sshd_pid:
                _kill(n.sshd_pid)
    if STATE.exists():
        try:
            st = json.loads(STATE.read_text())
            names += st.get("ns", [])
            root = root or Path(st["root"])
        except (ValueError, KeyError):
            pass
    r = sh("ip", "netns", "list", check=False)
    names += [line.split()[0] for line in r.stdout.splitlines() if line.startswith(PREFIX)]
    for ns in dict.fromkeys(names):
        pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            _kill(int(pid), timeout=2.0)
        sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
    links = sh("ip", "-o", "link", "show", check=False).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(PREFIX) or name in (BRIDGE, BRIDGE2):
            sh("ip", "link", "del", name, check=False)
    sh("ip", "route", "del", "unreachable", f"{SUBNET2}.0/24", check=False)
    if root and root.exists() and root.name.startswith("ddptui-cluster-"):
        shutil.rmtree(root, ignore_errors=True)
    STATE.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("up", "down"):
        print(__doc__)
        return 2
    if argv[0] == "down":
        down()
        return 0
    n = int(argv[1]) if len(argv) > 1 else 3
    t0 = time.time()
    cl = up([NodeOpts(f"node{i:02d}") for i in range(2, 2 + n)])
    print(f"# {n} nodes up in {time.time() - t0:.2f} s; ssh -F {cl.ssh_config} node02")
    print(cl.ssh_config.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
