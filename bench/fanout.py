"""Fan-out cost: connect + a command on 8 nodes at once against 1 node, and against 8 in a row."""

from __future__ import annotations

import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from ddptui.core.playbook.model import NodeSpec, SSHOptions
from ddptui.core.transport.factory import SSHSettings
from ddptui.core.transport.ssh import SSHTransport
from bench.common import NAMES, namespace_cluster

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


def main() -> int:
    names = NAMES
    with namespace_cluster(names) as cl:
        if cl is None:
            return 0
        cfg = cl.ssh_config
        one(cfg, names[0])  # warm up imports and caches
        reps = 5
        single, fan, serial, ossh1, ossh8 = [], [], [], [], []
        for _ in range(reps):
            single.append(one(cfg, names[0]))
            t0 = time.perf_counter()
            with ThreadPoolExecutor(len(names)) as pool:
                list(pool.map(lambda n: one(cfg, n), names))
            fan.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for n in names:
                one(cfg, n)
            serial.append(time.perf_counter() - t0)
            ossh1.append(openssh(cfg, names[:1]))
            ossh8.append(openssh(cfg, names))
        m1, m8, ms = (statistics.median(x) for x in (single, fan, serial))
        print(f"connect + `{' '.join(CMD)}`, median of {reps}, {os.cpu_count()} CPUs")
        print(f"  1 node                 {m1 * 1000:8.1f} ms")
        print(f"  8 nodes at once        {m8 * 1000:8.1f} ms   {m8 / m1:5.2f}x one node  (8x would be no fan-out)")
        print(f"  8 nodes one at a time  {ms * 1000:8.1f} ms   {ms / m1:5.2f}x one node")
        o1, o8 = statistics.median(ossh1), statistics.median(ossh8)
        print(f"  OpenSSH ssh, 1 node    {o1 * 1000:8.1f} ms")
        print(f"  OpenSSH ssh, 8 at once {o8 * 1000:8.1f} ms   {o8 / o1:5.2f}x one node")
        print(f"  fan-out speed-up over serial: {ms / m8:.2f}x; ddptui 8 nodes / OpenSSH 8 nodes: {m8 / o8:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
