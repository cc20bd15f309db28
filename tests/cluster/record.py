"""Record torch.distributed's own failures on the namespace cluster as test data.

    sudo .venv/bin/python -m tests.cluster.record                  # rewrites tests/data/recorded/*.log
    sudo .venv/bin/python -m tests.cluster.record --only link-cut  # one scenario (or several: --only A B)
    sudo .venv/bin/python -m tests.cluster.record --list

Each scenario runs real torchrun (gloo, CPU) on two nodes, node02 (the master) and node03, the
way a user would by hand (`ip netns exec` stands in for a shell on the node), with short timeouts.
Each node's output becomes one file; its `# ` header says what was done and what the diagnosis
must be (for the tests; the engine never reads it). C++ stack frames are cut.

The cluster is shared: `up()` removes every ddpt-* leftover first, so run this under the lock
(`flock /tmp/ddpt-cluster.lock ...`).

`torch-versions-differ` needs a second torch in another venv: `--torch2 PYTHON` (default
/work/venv-torch2141/bin/python, if it exists; otherwise the scenario is skipped).
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.cluster.netns import Cluster, NodeOpts, down, up

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "recorded"
SMOKE = ROOT / "tui" / "ddptui" / "workloads" / "smoke.py"
RAISES = ROOT / "tests" / "data" / "workloads" / "raise_in_rank.py"  # the named test workload: the last rank raises
PORT = 29590
MASTER, WORKER_IP = "10.213.0.2", "10.213.0.3"
TORCH2 = "/work/venv-torch2141/bin/python"


class Run:
    """A torchrun on one node; its output is read as it comes (so a scenario can wait for a line)."""

    def __init__(self, cmd: list[str]) -> None:
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float) -> bool:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(text in line for line in list(self.lines)):
                return True
            if self.p.poll() is not None and not self._reader.is_alive():
                return False
            time.sleep(0.2)
        return False


def torchrun(cl: Cluster, node: str, rank: int, nnodes: int = 2, nproc: int = 1, master: str = MASTER,
             env: dict | None = None, args: tuple = ("--steps", "2"), python: str = sys.executable,
             c10d: bool = False, script: Path = SMOKE) -> Run:
    e = {"LOGLEVEL": "INFO", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    cmd = ["ip", "netns", "exec", cl.nodes[node].ns, "unshare", "--uts", "sh", "-c",
           f"hostname {node} && exec env " + " ".join(f"{k}={v}" for k, v in e.items()) + " " +
           " ".join([python, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc-per-node={nproc}",
                     *(["--rdzv-backend=c10d", f"--rdzv-endpoint={master}:{PORT}", "--rdzv-id=rec"] if c10d else
                       [f"--node-rank={rank}", f"--master-addr={master}", f"--master-port={PORT}"]),
                     "--rdzv-conf=timeout=15", str(script), *args])]
    return Run(cmd)


def finish(r: Run, timeout: float = 90) -> str:
    try:
        r.p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(r.p.pid, signal.SIGTERM)
        try:
            r.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(r.p.pid, signal.SIGKILL)
            r.p.wait()
    r._reader.join(timeout=10)
    return "".join(r.lines)


@functools.lru_cache
def torch_version(python: str = sys.executable) -> str:
    out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def save(name: str, node: str, scenario: str, expected: str, text: str, torch: str | None = None,
         frames: bool = False) -> None:
    """`frames`: keep torch's C++ stack frames (the scenario is about them)."""
    keep = [l for l in text.splitlines() if (frames or not l.startswith("frame #"))
            and "<omitting python frames>" not in l and "launcher/api.py:" not in l and l.strip()]
    header = [f"# scenario: {scenario}", f"# expected-diagnosis: {expected}",
              f"# node: {node}; recorded on the ddptui namespace cluster, torch {torch or torch_version()}, gloo; "
              + ("C++ frames kept" if frames else "C++ frames cut")]
    (OUT / f"{name}-{node}.log").write_text("\n".join(header + keep) + "\n")
    print(f"  {name}-{node}.log: {len(keep)} lines")


# ---- the scenarios -------------------------------------------------------------------------------
def workers_first(cl: Cluster, opts) -> None:
    print("workers before the master (8 s): they wait silently and join")
    w = torchrun(cl, "node03", 1)
    time.sleep(8)
    m = torchrun(cl, "node02", 0)
    save("10-workers-first", "node03", "node03 started 8 s before the master; both finish", "none", finish(w))
    save("10-workers-first", "node02", "the master, started 8 s after node03", "none", finish(m))


def wrong_master_addr(cl: Cluster, opts) -> None:
    print("wrong master_addr (an empty address on the bridge)")
    m = torchrun(cl, "node02", 0, master="10.213.0.99")
    w = torchrun(cl, "node03", 1, master="10.213.0.99")
    save("11-wrong-master-addr", "node02", "--master-addr=10.213.0.99 (nobody has it) on both nodes; the master is a client of its store too", "bad-master-addr", finish(m))
    save("11-wrong-master-addr", "node03", "--master-addr=10.213.0.99 (nobody has it) on both nodes", "bad-master-addr", finish(w))


def port_taken(cl: Cluster, opts) -> None:
    print("master_port taken on the master")
    squat = subprocess.Popen(["ip", "netns", "exec", cl.nodes["node02"].ns, sys.executable, "-c",
                              f"import socket,time; s=socket.socket(); s.bind(('0.0.0.0', {PORT})); s.listen(); time.sleep(40)"])
    time.sleep(0.5)
    m = torchrun(cl, "node02", 0)
    w = torchrun(cl, "node03", 1)
    save("12-port-taken", "node02", f"another process listens on {PORT} on the master", "port-in-use", finish(m, 30))
    save("12-port-taken", "node03", "the worker of the same job (it hangs; stopped after 30 s)", "none", finish(w, 30))
    squat.kill()


def node_never_launched(cl: Cluster, opts) -> None:
    print("a node never launched")
    m = torchrun(cl, "node02", 0)
    save("13-node-never-launched", "node02", "--nnodes=2 but only the master was started", "missing-rank", finish(m))


def _worker_pid(cl: Cluster, node: str, timeout: float = 60) -> int | None:
    """The smoke worker process (not torchrun's agent) on `node`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for pid in cl.pids(node):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
            except OSError:
                continue
            if "smoke.py" in cmd and "torch.distributed.run" not in cmd and "-u" in cmd:
                return pid
        time.sleep(0.5)
    return None


def worker_killed(cl: Cluster, opts) -> None:
    print("one worker process killed with SIGKILL")
    m = torchrun(cl, "node02", 0, args=("--steps", "2", "--sleep", "5"))
    w = torchrun(cl, "node03", 1, args=("--steps", "2", "--sleep", "5"))
    victim = _worker_pid(cl, "node03")
    time.sleep(6)  # inside its first collective after the sleep... or the sleep itself
    if victim:
        os.kill(victim, signal.SIGKILL)
    save("14-worker-killed", "node03", "node03's worker process got kill -9", "host-oom-exit-9", finish(w))
    save("14-worker-killed", "node02", "the master of the same job", "remote-rank-died", finish(m))


def nproc_differs(cl: Cluster, opts) -> None:
    print("nproc_per_node 2 on the master, 1 on the worker")
    m = torchrun(cl, "node02", 0, nproc=2)
    w = torchrun(cl, "node03", 1, nproc=1)
    save("15-nproc-differs", "node02", "--nproc-per-node=2 here, 1 on node03: torchrun does not fail", "nproc-mismatch", finish(m))
    save("15-nproc-differs", "node03", "--nproc-per-node=1 here, 2 on node02", "nproc-mismatch", finish(w))


def hostname_unresolvable(cl: Cluster, opts) -> None:
    print("the worker's hostname does not resolve")
    m = torchrun(cl, "node02", 0)
    w = torchrun(cl, "lost03", 1)
    save("16-hostname-unresolvable", "lost03", "lost03's /etc/hosts lacks its own name; no GLOO_SOCKET_IFNAME", "hostname-resolution", finish(w))
    save("16-hostname-unresolvable", "node02", "the master of the same job", "none", finish(m))


def bad_gloo_ifname(cl: Cluster, opts) -> None:
    print("GLOO_SOCKET_IFNAME=ib0 (absent) on the worker")
    m = torchrun(cl, "node02", 0)
    w = torchrun(cl, "node03", 1, env={"GLOO_SOCKET_IFNAME": "ib0"})
    save("17-bad-gloo-ifname", "node03", "GLOO_SOCKET_IFNAME=ib0, which node03 does not have", "bad-socket-ifname", finish(w))
    save("17-bad-gloo-ifname", "node02", "the master of the same job", "none", finish(m))


def firewall_ephemeral(cl: Cluster, opts) -> None:
    print("a firewall on both nodes: the master port passes, every other TCP port between them is dropped")
    for node, peer in (("node02", WORKER_IP), ("node03", MASTER)):
        for rule in (["-p", "tcp", "-s", peer, "--dport", str(PORT), "-j", "ACCEPT"],
                     ["-p", "tcp", "-s", peer, "--sport", str(PORT), "-j", "ACCEPT"],
                     ["-p", "tcp", "-s", peer, "-j", "DROP"]):
            cl.ns_exec(node, "iptables", "-A", "INPUT", *rule)
    try:
        m = torchrun(cl, "node02", 0, args=("--steps", "2", "--timeout", "20"))
        w = torchrun(cl, "node03", 1, args=("--steps", "2", "--timeout", "20"))
        why = f"iptables on both nodes: ACCEPT tcp {PORT} (the master port) from the peer, DROP all other tcp from it"
        save("19-firewall-ephemeral", "node02", why + "; Gloo's own ports are ephemeral", "firewall-or-unreachable",
             finish(m, 120))
        save("19-firewall-ephemeral", "node03", why, "firewall-or-unreachable", finish(w, 120))
    finally:
        for node in ("node02", "node03"):
            cl.ns_exec(node, "iptables", "-F", "INPUT", check=False)


# Recorded: both ranks fail in DDP's backward with Gloo's "Timed out waiting 20000ms for recv operation";
# a link that is down sends no reset, so neither side learns that the peer is gone: a collective timeout.
LINK_CUT_EXPECTED = "watchdog-timeout"


def link_cut(cl: Cluster, opts) -> None:
    print("node03's link cut while the ranks all_reduce in training; restored after both gave up")
    args = ("--steps", "100000000", "--timeout", "20")
    m = torchrun(cl, "node02", 0, args=args)
    w = torchrun(cl, "node03", 1, args=args)
    up_ = m.wait_for("init_process_group done", 60) and w.wait_for("init_process_group done", 10)
    time.sleep(12)  # past DDP's setup (slow on a loaded 2-core machine): inside training's gradient all_reduces
    cl.cut_link("node03")
    try:
        time.sleep(45)  # the 20 s process group timeout fires on both sides
    finally:
        cl.restore_link("node03")
    why = ("training (DDP all_reduce every step), pg timeout 20 s; node03's veth set down on the host, up again "
           "after 45 s; no reset crosses a dead link: both ranks time out in Gloo, a collective timeout")
    if not up_:
        why += " (WARNING: init never completed)"
    out_m, out_w = finish(m, 90), finish(w, 60)
    if "backward" not in out_m + out_w:
        print("  WARNING: the link went down before training's all_reduces (no backward() in the tracebacks)")
    save("20-link-cut", "node02", why + "; the survivor", LINK_CUT_EXPECTED, out_m)
    save("20-link-cut", "node03", why + "; the node whose link went down", LINK_CUT_EXPECTED, out_w)


def torch_versions_differ(cl: Cluster, opts) -> None:
    other = opts.torch2
    if not Path(other).exists():
        print(f"SKIPPED torch-versions-differ: no second torch at {other} (--torch2)")
        return
    v1, v2 = torch_version(), torch_version(other)
    print(f"torch {v1} on the master, {v2} on the worker")
    m = torchrun(cl, "node02", 0)
    w = torchrun(cl, "node03", 1, python=other)
    save("21-torch-versions-differ", "node02", f"torch {v1} here, {v2} on node03 (the same smoke script)",
         "none", finish(m), torch=v1)
    save("21-torch-versions-differ", "node03", f"torch {v2} here ({other}), {v1} on node02",
         "none", finish(w), torch=v2)


def nnodes_more_on_worker(cl: Cluster, opts) -> None:
    print("--nnodes=2 on the master, 3 on the worker")
    m = torchrun(cl, "node02", 0, nnodes=2)
    w = torchrun(cl, "node03", 1, nnodes=3)
    save("22-nnodes-more-on-worker", "node02", "--nnodes=2 here, --nnodes=3 on node03; training passes, then this "
         "agent waits at the exit barrier: stopped after 90 s", "ranks-not-joined", finish(m))
    save("22-nnodes-more-on-worker", "node03", "--nnodes=3 here, --nnodes=2 on node02: a world of 2 trains, then "
         "this agent waits at the exit barrier for a third node until the master goes", "ranks-not-joined",
         finish(w))


def nnodes_more_on_master(cl: Cluster, opts) -> None:
    print("--nnodes=3 on the master, 2 on the worker")
    m = torchrun(cl, "node02", 0, nnodes=3)
    w = torchrun(cl, "node03", 1, nnodes=2)
    save("23-nnodes-more-on-master", "node02", "--nnodes=3 here, --nnodes=2 on node03: the store waits for a "
         "third agent", "missing-rank", finish(m))
    save("23-nnodes-more-on-master", "node03", "--nnodes=2 here, --nnodes=3 on node02: the rendezvous never "
         "assigns ranks", "rendezvous-timeout", finish(w))


def c10d_master_exits_first(cl: Cluster, opts) -> None:
    print("c10d rendezvous, a healthy job whose store host (node02) exits before node03 shuts the rendezvous down")
    for attempt in range(1, 11):  # a race: the agents leave the exit barrier together; retry until it shows
        m = torchrun(cl, "node02", 0, c10d=True)
        w = torchrun(cl, "node03", 1, c10d=True)
        mt, wt = finish(m), finish(w)
        if "failed to shutdown the rendezvous" in wt and m.p.returncode == w.p.returncode == 0:
            break
        print(f"  attempt {attempt}: no shutdown warning on node03; again")
    else:
        raise SystemExit("c10d-master-exits-first: the race never showed in 10 runs")
    save("24-c10d-master-exits-first", "node02", "c10d rendezvous hosted here; the job succeeds and this agent "
         "exits (taking the store with it) while node03 still shuts the rendezvous down", "none", mt, frames=True)
    save("24-c10d-master-exits-first", "node03", "c10d rendezvous on node02; the job succeeds; shutting the "
         "rendezvous down meets the store already gone: a warning with torch's C++ backtrace "
         "(c10::DistError), exit 0", "none", wt, frames=True)


def rank_raises(cl: Cluster, opts) -> None:
    print("2 ranks per node; the training script raises ValueError on the last rank (node03's second)")
    m = torchrun(cl, "node02", 0, nproc=2, script=RAISES, args=())
    w = torchrun(cl, "node03", 1, nproc=2, script=RAISES, args=())
    wt, mt = finish(w), finish(m)
    save("26-rank-raises", "node03", "its rank 3 raised ValueError (the training script's own error); its rank 2 "
         "saw the link to it break", "unrecognized-failure", wt)
    save("26-rank-raises", "node02", "the master of the same job: both its ranks saw their links to rank 3 break "
         "(remote-rank-died, a consequence: node03's own error is the job's finding)", "unrecognized-failure", mt)


SCENARIOS: dict[str, Callable] = {
    "workers-first": workers_first,
    "wrong-master-addr": wrong_master_addr,
    "port-taken": port_taken,
    "node-never-launched": node_never_launched,
    "worker-killed": worker_killed,
    "nproc-differs": nproc_differs,
    "hostname-unresolvable": hostname_unresolvable,
    "bad-gloo-ifname": bad_gloo_ifname,
    "firewall-ephemeral": firewall_ephemeral,
    "link-cut": link_cut,
    "torch-versions-differ": torch_versions_differ,
    "nnodes-more-on-worker": nnodes_more_on_worker,
    "nnodes-more-on-master": nnodes_more_on_master,
    "c10d-master-exits-first": c10d_master_exits_first,
    "rank-raises": rank_raises,
}


def select(only: list[str] | None) -> list[str]:
    """The scenario names --only asks for (a name, or a recorded file's stem like 20-link-cut); all by default."""
    if not only:
        return list(SCENARIOS)
    out = []
    for want in only:
        name = want.split("-", 1)[1] if want.split("-", 1)[0].isdigit() else want
        if name not in SCENARIOS:
            raise SystemExit(f"no scenario {want!r}; there are: {', '.join(SCENARIOS)}")
        out.append(name)
    return list(dict.fromkeys(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="record only these scenarios (default: all)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--torch2", default=TORCH2, help="a python with another torch, for torch-versions-differ")
    opts = ap.parse_args(argv)
    if opts.list:
        print("\n".join(SCENARIOS))
        return 0
    names = select(opts.only)
    OUT.mkdir(parents=True, exist_ok=True)
    cl = up([NodeOpts("node02"), NodeOpts("node03"), NodeOpts("lost03", unresolvable_hostname=True)])
    try:
        for name in names:
            SCENARIOS[name](cl, opts)
    finally:
        down(cl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
