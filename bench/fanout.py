"""Fan-out cost: connect + a command on 8 nodes at once against 1 node, and against 8 in a row;
OpenSSH's client on the same nodes beside it.

    sudo .venv/bin/python -m bench.fanout [--quick]      # --quick: 3 nodes, one repetition
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from ddptui.core.playbook.model import NodeSpec, SSHOptions
from ddptui.core.transport.factory import SSHSettings
from ddptui.core.transport.ssh import SSHTransport
from bench.common import NAMES, on_cluster
from tests.cluster.netns import Cluster

CMD = ["sh", "-c", "hostname; ip -j addr; ip -j route"]


def one(cfg, name: str) -> float:
    t0 = time.perf_counter()
    t = SSHTransport(NodeSpec(name), SSHOptions(connect_timeout=5), SSHSettings(ssh_config=cfg))
    t.connect()
    r = t.run(CMD, timeout=30)
    assert r.rc == 0 and r.stdout.startswith(name)
    t.close()
    return time.perf_counter() - t0


def openssh(cfg, names: list[str]) -> float:
    """The same with OpenSSH's client, all nodes at once (what pdsh does)."""
    import shlex
    import subprocess

    t0 = time.perf_counter()
    ps = [subprocess.Popen(["ssh", "-F", str(cfg), n, shlex.join(CMD)], stdout=subprocess.DEVNULL) for n in names]
    assert all(p.wait() == 0 for p in ps)
    return time.perf_counter() - t0


def measure(cl: Cluster, names: list[str], reps: int) -> None:
    """Print the figures for `names` of the namespace cluster `cl` (up already)."""
    cfg = cl.ssh_config
    n = len(names)
    one(cfg, names[0])  # warm up imports and caches
    single, fan, serial, ossh1, osshn = [], [], [], [], []
    for _ in range(reps):
        single.append(one(cfg, names[0]))
        t0 = time.perf_counter()
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda x: one(cfg, x), names))
        fan.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for x in names:
            one(cfg, x)
        serial.append(time.perf_counter() - t0)
        ossh1.append(openssh(cfg, names[:1]))
        osshn.append(openssh(cfg, names))
    m1, mn, ms = (statistics.median(x) for x in (single, fan, serial))
    print(f"connect + `{' '.join(CMD)}`, median of {reps}, {os.cpu_count()} CPUs")
    print(f"  1 node                 {m1 * 1000:8.1f} ms")
    print(f"  {n} nodes at once        {mn * 1000:8.1f} ms   {mn / m1:5.2f}x one node  ({n}x would be no fan-out)")
    print(f"  {n} nodes one at a time  {ms * 1000:8.1f} ms   {ms / m1:5.2f}x one node")
    o1, on = statistics.median(ossh1), statistics.median(osshn)
    print(f"  OpenSSH ssh, 1 node    {o1 * 1000:8.1f} ms")
    print(f"  OpenSSH ssh, {n} at once {on * 1000:8.1f} ms   {on / o1:5.2f}x one node")
    print(f"  fan-out speed-up over serial: {ms / mn:.2f}x; ddptui {n} nodes / OpenSSH {n} nodes: {mn / on:.2f}x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.fanout")
    ap.add_argument("--quick", action="store_true", help="3 nodes, one repetition")
    a = ap.parse_args(argv)
    return on_cluster(NAMES[:3] if a.quick else NAMES, measure, 1 if a.quick else 5)


if __name__ == "__main__":
    sys.exit(main())
