"""The live diagnosis's own process: the engine, reading the nodes' logs as they grow.

`python -m ddptui.core.diagnosis.child` is started by LiveDiagnosis (live.py). It reads the run's
node logs from disk (the masked text every other consumer gets) as the parent says they grew, so
the engine's scan runs on the other core and never competes with the readers, the disk and the
screen for the parent's GIL; the parent sends a few bytes per batch, never the lines. Where the
cores are too few for both, the child is the one that waits (`give_way`).

Protocol: one JSON object per line. In, on stdin (in order; it ends when stdin closes):

    {"op": "reset", "expected_nnodes": N, "min_busbw_gbps": X}  a fresh engine (a new launch)
    {"op": "node", "node": n, "path": p, "offset": B, "line": L}  n's lines are in p from byte B, line L on
    {"op": "grew", "ends": {n: B}}                  each log holds whole lines up to byte B now
    {"op": "text", "node": n, "line": L, "text": t}  lines that could not be written to n's log
    {"op": "exited", "node": n, "rc": rc, "end": B}  n's command ended, after its lines up to B
    {"op": "finish", "ends": {...}}                 judge what is judged at the end
    {"op": "sync", "seq": k, "ends": {...}}         reply once every line up to `ends` was read

Out, on stdout: {"op": "change", "finding": {...}} for each finding that appears or changes, and
{"op": "synced", "seq": k, "findings": [...], "error": text or null}.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
import traceback
from typing import IO, Any

from .engine import Engine

BLOCK = 1 << 20  # bytes of a log read at a time: a block is scanned while the next is written
# How much lower the child's priority is than ddptui's (give_way). 4 nodes x 1M NCCL lines on 2
# cores (bench.stream --ssh, 3 rounds alternating): first line -> last on disk 1.64-1.69 s at
# ddptui's priority, 1.37-1.44 s at this one; the verdict up to 1 s later (10.3-11.3 s after the
# last line on disk, against 10.1-10.3 s), the diagnosis' work moved from the flood to after it.
NICE = 10


class Follower:
    """One node's log, read from where this launch's lines begin."""

    def __init__(self, path: str, offset: int, line: int) -> None:
        self.path, self.offset, self.line = path, offset, line
        self.f: IO[bytes] | None = None

    def read_to(self, end: int, feed) -> None:
        while self.offset < end:
            if self.f is None:
                self.f = open(self.path, "rb")  # noqa: SIM115 (kept open while the node runs)
            self.f.seek(self.offset)
            data = self.f.read(min(end - self.offset, BLOCK))
            cut = data.rfind(b"\n")
            if cut < 0:  # a line longer than a block: read on until its end
                if len(data) < end - self.offset:
                    data += self.f.read(end - self.offset - len(data))
                    cut = data.rfind(b"\n")
                if cut < 0:
                    return  # the parent said more than the disk holds: wait for the next word
            text = data[:cut].decode("utf-8", "replace")
            self.offset += cut + 1
            feed(text, self.line)
            self.line += text.count("\n") + 1

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f = None


class Server:
    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.engine = Engine()
        self.nodes: dict[str, Follower] = {}
        self.wanted: dict[str, int] = {}  # ends said before the node was: read once it is
        self.error: str | None = None

    def send(self, msg: dict[str, Any]) -> None:
        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()

    def handle(self, msg: dict[str, Any]) -> None:
        op = msg["op"]
        if op == "reset":
            for f in self.nodes.values():
                f.close()
            self.nodes = {}  # `wanted` stays: a grew said before the reset it follows (ends never shrink)
            self.engine = Engine(expected_nnodes=msg.get("expected_nnodes"), min_busbw_gbps=msg.get("min_busbw_gbps"),
                                 on_change=lambda f: self.send({"op": "change", "finding": f.to_json()}))
        elif op == "node":
            node = msg["node"]
            old = self.nodes.pop(node, None)
            if old is not None:
                old.close()
            self.nodes[node] = Follower(msg["path"], msg["offset"], msg["line"])
            self.read(node, self.wanted.pop(node, 0))
        elif op == "grew":
            self.read_all(msg["ends"])
        elif op == "text":
            self.engine.feed(msg["node"], msg["text"].split("\n"), msg["line"])
        elif op == "exited":
            self.read(msg["node"], msg["end"])
            self.engine.node_exited(msg["node"], msg["rc"])
        elif op == "finish":
            self.read_all(msg["ends"])
            self.engine.finish()
        elif op == "sync":
            self.read_all(msg["ends"])
            self.send({"op": "synced", "seq": msg["seq"], "findings": [f.to_json() for f in self.engine.findings],
                       "error": self.error})
            self.error = None

    def read_all(self, ends: dict[str, int]) -> None:
        for node, end in ends.items():
            self.read(node, end)

    def read(self, node: str, end: int) -> None:
        f = self.nodes.get(node)
        if f is None:
            self.wanted[node] = max(self.wanted.get(node, 0), end)
            return
        st = self.engine.nodes.get(node)

        def feed(text: str, line: int) -> None:
            nonlocal st
            if st is not None and st.lines == line - 1:  # in order, as always: the bulk scan
                self.engine.feed_text(node, text)
            else:
                self.engine.feed(node, text.split("\n"), line)
                st = self.engine.nodes.get(node)
        f.read_to(end, feed)


def read_words(words: queue.SimpleQueue) -> None:
    """stdin's words, as they come. Its end is the parent's (closed, or ddptui killed): the child
    ends at once, not after a backlog of a flood's lines that nobody waits for any more."""
    for raw in sys.stdin:
        words.put(raw)
    os._exit(0)


def give_way() -> None:
    """Ask the kernel for less CPU than ddptui's own process: when the login node is short of cores
    (a flood on a busy or small machine) the readers, the disk and the screen go first and the
    diagnosis falls behind, which it may. Called before any thread starts (Linux's nice is a
    thread's, and a new thread takes its creator's). Where the kernel groups processes by session
    (autogroup: Debian's and Ubuntu's kernels), this process, a session of its own, is a group that
    gets a fair share of the CPU whatever its nice value: the group's is set too. Best effort: a
    sandbox that refuses either leaves the diagnosis at ddptui's priority, never without one."""
    try:
        os.nice(NICE)
    except OSError:  # a seccomp policy that forbids setpriority
        pass
    for _ in range(3):
        try:
            with open("/proc/self/autogroup", "w") as f:
                f.write(str(NICE))
            return
        except BlockingIOError:  # EAGAIN: without CAP_SYS_ADMIN, one such write a tenth of a second
            time.sleep(0.11)  # per machine (the kernel's proc_sched_autogroup_set_nice): wait one out
        except OSError:  # no autogroup in this kernel (or not Linux): the nice value alone
            return


def main() -> int:
    give_way()
    server = Server(sys.stdout)
    words: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=read_words, args=(words,), daemon=True).start()
    while True:
        raw = words.get()
        try:
            server.handle(json.loads(raw))
        except Exception:  # noqa: BLE001 (said at the next sync, and the next lines are still read)
            server.error = server.error or traceback.format_exc(limit=8)


if __name__ == "__main__":
    sys.exit(main())
