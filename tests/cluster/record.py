"""Record torch.distributed's own failures on the namespace cluster as test data.

    sudo .venv/bin/python -m tests.cluster.record      # rewrites tests/data/recorded/*.log

Each scenario runs real torchrun (gloo, CPU) on two nodes, node02 (the master) and node03, the
way a user would by hand (`ip netns exec` stands in for a shell on the node), with short timeouts.
Each node's output becomes one file; its `# ` header says what was done and what the diagnosis
must be (for the tests; the engine never reads it). C++ stack frames are cut.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cluster.netns import NodeOpts, down, up

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "recorded"
SMOKE = ROOT / "tui" / "ddptui" / "workloads" / "smoke.py"
PORT = 29590


def torchrun(cl, node: str, rank: int, nnodes: int = 2, nproc: int = 1, master: str = "10.213.0.2",
             env: dict | None = None, args: tuple = ("--steps", "2")) -> subprocess.Popen:
    e = {"LOGLEVEL": "INFO", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    cmd = ["ip", "netns", "exec", cl.nodes[node].ns, "unshare", "--uts", "sh", "-c",
           f"hostname {node} && exec env " + " ".join(f"{k}={v}" for k, v in e.items()) + " " +
           " ".join([sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc-per-node={nproc}",
                     f"--node-rank={rank}", f"--master-addr={master}", f"--master-port={PORT}",
                     "--rdzv-conf=timeout=15", str(SMOKE), *args])]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def finish(p: subprocess.Popen, timeout: float = 90) -> str:
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
    return out


def save(name: str, node: str, scenario: str, expected: str, text: str) -> None:
    keep = [l for l in text.splitlines() if not l.startswith("frame #") and "<omitting python frames>" not in l
            and "launcher/api.py:" not in l and l.strip()]
    header = [f"# scenario: {scenario}", f"# expected-diagnosis: {expected}",
              f"# node: {node}; recorded on the ddptui namespace cluster, torch 2.13.0, gloo; C++ frames cut"]
    (OUT / f"{name}-{node}.log").write_text("\n".join(header + keep) + "\n")
    print(f"  {name}-{node}.log: {len(keep)} lines")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    cl = up([NodeOpts("node02"), NodeOpts("node03"), NodeOpts("lost03", unresolvable_hostname=True)])
    try:
        print("workers before the master (8 s): they wait silently and join")
        w = torchrun(cl, "node03", 1)
        time.sleep(8)
        m = torchrun(cl, "node02", 0)
        save("10-workers-first", "node03", "node03 started 8 s before the master; both finish", "none", finish(w))
        save("10-workers-first", "node02", "the master, started 8 s after node03", "none", finish(m))

        print("wrong master_addr (an empty address on the bridge)")
        m = torchrun(cl, "node02", 0, master="10.213.0.99")
        w = torchrun(cl, "node03", 1, master="10.213.0.99")
        save("11-wrong-master-addr", "node02", "--master-addr=10.213.0.99 (nobody has it) on both nodes; the master is a client of its store too", "bad-master-addr", finish(m))
        save("11-wrong-master-addr", "node03", "--master-addr=10.213.0.99 (nobody has it) on both nodes", "bad-master-addr", finish(w))

        print("master_port taken on the master")
        squat = subprocess.Popen(["ip", "netns", "exec", cl.nodes["node02"].ns, sys.executable, "-c",
                                  f"import socket,time; s=socket.socket(); s.bind(('0.0.0.0', {PORT})); s.listen(); time.sleep(40)"])
        time.sleep(0.5)
        m = torchrun(cl, "node02", 0)
        w = torchrun(cl, "node03", 1)
        save("12-port-taken", "node02", f"another process listens on {PORT} on the master", "port-in-use", finish(m, 30))
        save("12-port-taken", "node03", "the worker of the same job (it hangs; stopped after 30 s)", "none", finish(w, 30))
        squat.kill()

        print("a node never launched")
        m = torchrun(cl, "node02", 0)
        save("13-node-never-launched", "node02", "--nnodes=2 but only the master was started", "missing-rank", finish(m))

        print("one worker process killed with SIGKILL")
        m = torchrun(cl, "node02", 0, args=("--steps", "2", "--sleep", "5"))
        w = torchrun(cl, "node03", 1, args=("--steps", "2", "--sleep", "5"))
        deadline = time.time() + 60
        victim = None
        while victim is None and time.time() < deadline:
            for pid in cl.pids("node03"):
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
                except OSError:
                    continue
                if "smoke.py" in cmd and "torch.distributed.run" not in cmd and "-u" in cmd:
                    victim = pid
            time.sleep(0.5)
        time.sleep(6)  # inside its first collective after the sleep... or the sleep itself
        if victim:
            os.kill(victim, signal.SIGKILL)
        save("14-worker-killed", "node03", "node03's worker process got kill -9", "host-oom-exit-9", finish(w))
        save("14-worker-killed", "node02", "the master of the same job", "remote-rank-died", finish(m))

        print("nproc_per_node 2 on the master, 1 on the worker")
        m = torchrun(cl, "node02", 0, nproc=2)
        w = torchrun(cl, "node03", 1, nproc=1)
        save("15-nproc-differs", "node02", "--nproc-per-node=2 here, 1 on node03: torchrun does not fail", "nproc-mismatch", finish(m))
        save("15-nproc-differs", "node03", "--nproc-per-node=1 here, 2 on node02", "nproc-mismatch", finish(w))

        print("the worker's hostname does not resolve")
        m = torchrun(cl, "node02", 0)
        w = torchrun(cl, "lost03", 1)
        save("16-hostname-unresolvable", "lost03", "lost03's /etc/hosts lacks its own name; no GLOO_SOCKET_IFNAME", "hostname-resolution", finish(w))
        save("16-hostname-unresolvable", "node02", "the master of the same job", "none", finish(m))

        print("GLOO_SOCKET_IFNAME=ib0 (absent) on the worker")
        m = torchrun(cl, "node02", 0)
        w = torchrun(cl, "node03", 1, env={"GLOO_SOCKET_IFNAME": "ib0"})
        save("17-bad-gloo-ifname", "node03", "GLOO_SOCKET_IFNAME=ib0, which node03 does not have", "bad-socket-ifname", finish(w))
        save("17-bad-gloo-ifname", "node02", "the master of the same job", "none", finish(m))
    finally:
        down(cl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
