"""The live diagnosis's own process: the engine, reading the nodes' logs as they grow.

`python -m ddptui.core.diagnosis.child` is started by LiveDiagnosis (live.py). It reads the run's
node logs from disk (the masked text every other consumer gets) as the parent says they grew, so
the engine's scan runs on the other core and never competes with the readers, the disk and the
screen for the parent's GIL; the parent sends a few bytes per batch, never the lines. Where the
cores are too few for both, the child is the one that waits (`give_way`).

With several nodes and cores, the child reads some nodes' logs itself and gives the others to
sieves (sieve.py), processes of its own, one group of nodes each (`processes` in all, by default a
core each up to MAX_PROCESSES): they forward the few lines that can change anything, and the one
engine here judges every node. A word that follows lines (text, exited, finish, sync) waits until
the sieves have read them.

Protocol: one JSON object per line. In, on stdin (in order; it ends when stdin closes):

    {"op": "reset", "expected_nnodes": N, "min_busbw_gbps": X, "processes": P}  a fresh engine (a new
                                                    launch); P: this process and its sieves, null: by cores
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
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from typing import IO, Any

from .engine import Engine
from .sieve import spawn

BLOCK = 1 << 20  # bytes of a log read at a time: a block is scanned while the next is written
# How much lower the child's priority is than ddptui's (give_way). 4 nodes x 1M NCCL lines on 2
# cores (bench.stream --ssh, 3 rounds alternating): first line -> last on disk 1.64-1.69 s at
# ddptui's priority, 1.37-1.44 s at this one; the verdict up to 1 s later (10.3-11.3 s after the
# last line on disk, against 10.1-10.3 s), the diagnosis' work moved from the flood to after it.
NICE = 10
MAX_PROCESSES = 4  # the diagnosis's processes at most, this one and its sieves (sieve.py)


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

    def feed_to(self, engine: Engine, node: str, end: int) -> None:
        """Its lines up to byte `end` to `engine`, as `node`'s: in bulk where they follow the lines
        it has (as always), else numbered."""
        def feed(text: str, line: int) -> None:
            st = engine.nodes.get(node)
            if st is not None and st.lines == line - 1:
                engine.feed_text(node, text)
            else:
                engine.feed(node, text.split("\n"), line)
        self.read_to(end, feed)

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f = None


class Server:
    def __init__(self, out: IO[str], inbox: queue.SimpleQueue) -> None:
        self.out = out
        self.inbox = inbox  # where the sieves' words come in, beside the parent's
        self.engine = Engine()
        self.nodes: dict[str, Follower] = {}  # the nodes this process reads itself
        self.wanted: dict[str, int] = {}  # ends said before the node was: read once it is
        self.error: str | None = None
        self.gen = 0  # launches so far: a sieve's word of the launch before is not this one's
        self.processes = 1
        self.shard: dict[str, int] = {}  # node -> the sieve that reads it (0: this process)
        self.done: dict[str, int] = {}  # a sieve's node -> the end of its log it has read
        self.asked: dict[str, int] = {}  # a sieve's node -> the end it was asked to read
        self.waiting: deque[dict] = deque()  # text, exited, finish, sync: each once the lines before it are read
        self.sieves: dict[int, subprocess.Popen] = {}

    def send(self, msg: dict[str, Any]) -> None:
        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()

    def handle(self, msg: dict[str, Any]) -> None:
        op = msg["op"]
        if op == "lines":  # a sieve's
            if msg["gen"] == self.gen:
                self.engine.feed_sparse(msg["node"], msg["lines"])
                self.done[msg["node"]] = max(self.done.get(msg["node"], 0), msg["end"])
        elif op == "error":  # a sieve's
            if msg["gen"] == self.gen:
                self.error = self.error or msg["text"]
        elif op == "sieve-ended":  # its nodes' state is gone with it: the parent starts all again
            sys.stderr.write(f"ddptui diagnosis: sieve {msg['sieve']} ended (rc {msg['rc']})\n")
            sys.stderr.flush()
            os._exit(3)
        elif op == "reset":
            self.settle_waiting()
            for f in self.nodes.values():
                f.close()
            self.nodes = {}  # `wanted` stays: a grew said before the reset it follows (ends never shrink)
            self.gen += 1
            self.processes = max(1, int(msg.get("processes") or default_processes()))
            self.shard, self.done, self.asked = {}, {}, {}
            self.engine = Engine(expected_nnodes=msg.get("expected_nnodes"), min_busbw_gbps=msg.get("min_busbw_gbps"),
                                 on_change=lambda f: self.send({"op": "change", "finding": f.to_json()}))
            for k in self.sieves:
                self.to_sieve(k, {"op": "reset", "gen": self.gen})
        elif op == "node":
            self.open_node(msg)
        elif op == "grew":
            self.read_all(msg["ends"])
        else:  # text, exited, finish, sync
            self.waiting.append(msg)

    def step(self, raw: str) -> None:
        """One word, the parent's or a sieve's; then the words that waited for it. An error is said
        at the next sync, and the next lines are still read."""
        try:
            self.handle(json.loads(raw))
        except Exception:  # noqa: BLE001
            self.error = self.error or traceback.format_exc(limit=8)
        while True:
            try:
                self.run_waiting()
                return
            except Exception:  # noqa: BLE001 (that word is done with: the ones after it go on)
                self.error = self.error or traceback.format_exc(limit=8)

    def open_node(self, msg: dict[str, Any]) -> None:
        node = msg["node"]
        k = self.shard.get(node)
        if k is None:
            k = self.shard[node] = len(self.shard) % self.processes
        if k:
            try:
                self.to_sieve(k, msg)
                self.asked[node] = self.done[node] = msg["offset"]
            except OSError as e:  # no sieve could start (a limit on processes or files): read it here
                sys.stderr.write(f"ddptui diagnosis: no sieve ({e}); one process reads every node\n")
                self.processes = 1
                k = self.shard[node] = 0
        if not k:
            old = self.nodes.pop(node, None)
            if old is not None:
                old.close()
            self.nodes[node] = Follower(msg["path"], msg["offset"], msg["line"])
        self.read_all({node: self.wanted.pop(node, 0)})

    def run_waiting(self) -> None:
        """The words that wait for lines, in order, as far as the lines they follow are read."""
        while self.waiting:
            msg = self.waiting[0]
            op = msg["op"]
            if op == "text":  # after the lines its log holds (a log that stopped being written: a full disk)
                ends = {msg["node"]: self.asked.get(msg["node"], 0)}
            else:
                ends = {msg["node"]: msg["end"]} if op == "exited" else msg["ends"]
            self.read_all(ends)
            if any(self.done.get(n, 0) < e for n, e in ends.items() if self.shard.get(n, 0)):
                return  # a sieve still reads them: its word brings this back
            self.waiting.popleft()  # before it is carried out: one that fails is not tried again
            self.carry_out(msg)

    def carry_out(self, msg: dict[str, Any]) -> None:
        op = msg["op"]
        if op == "text":
            self.engine.feed(msg["node"], msg["text"].split("\n"), msg["line"])
        elif op == "exited":
            self.engine.node_exited(msg["node"], msg["rc"])
        elif op == "finish":
            self.engine.finish()
        else:
            self.send({"op": "synced", "seq": msg["seq"], "findings": [f.to_json() for f in self.engine.findings],
                       "error": self.error})
            self.error = None

    def settle_waiting(self) -> None:
        """A new launch: what waited for the launch before's lines is done with what was read of
        them (its sieves' next words are not this launch's)."""
        while self.waiting:
            self.carry_out(self.waiting.popleft())

    def read_all(self, ends: dict[str, int]) -> None:
        """The sieves are asked first: they read their nodes while this process reads its own."""
        asks: dict[int, dict[str, int]] = {}
        for node, end in ends.items():
            k = self.shard.get(node, 0)
            if k and end > self.asked.get(node, 0):
                self.asked[node] = end
                asks.setdefault(k, {})[node] = end
        for k, grown in asks.items():
            self.to_sieve(k, {"op": "grew", "ends": grown})
        for node, end in ends.items():
            if not self.shard.get(node, 0):
                self.read(node, end)

    def read(self, node: str, end: int) -> None:
        f = self.nodes.get(node)
        if f is None:
            self.wanted[node] = max(self.wanted.get(node, 0), end)
            return
        f.feed_to(self.engine, node, end)

    # ---- the sieves ----------------------------------------------------------------------------
    def to_sieve(self, k: int, msg: dict[str, Any]) -> None:
        proc = self.sieves.get(k)
        if proc is None:
            proc = self.start_sieve(k)  # OSError: no process, no sieve
            self.sieves[k] = proc
            self.to_sieve(k, {"op": "reset", "gen": self.gen})
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(msg) + "\n")  # never waits long: the sieve's reader takes every word
        proc.stdin.flush()

    def start_sieve(self, k: int) -> subprocess.Popen:
        """Sieve `k`: a process of this one's session (its CPU share and nice value), ended by the
        end of its input, which is this process's end."""
        proc = spawn()
        inbox = self.inbox

        def listen() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                inbox.put(raw)
            inbox.put(json.dumps({"op": "sieve-ended", "sieve": k, "rc": proc.wait()}))
        threading.Thread(target=listen, name=f"ddptui-sieve{k}", daemon=True).start()
        return proc


def default_processes() -> int:
    """The diagnosis's processes: a core each, up to MAX_PROCESSES (each is ~25 MB, and a login
    node is shared)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_PROCESSES))


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
    words: queue.SimpleQueue = queue.SimpleQueue()
    server = Server(sys.stdout, words)
    threading.Thread(target=read_words, args=(words,), daemon=True).start()
    while True:
        server.step(words.get())


if __name__ == "__main__":
    sys.exit(main())
