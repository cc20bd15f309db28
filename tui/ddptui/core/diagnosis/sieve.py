"""The diagnosis of many nodes on many cores: a sieve per group of nodes drops the lines that can
change nothing, and the one engine (child.py) judges the rest.

One engine reads ~0.4 M lines of NCCL init chatter a second on one core. Four nodes flooding at
once left it seconds behind, however many cores the login node has: its work is per line, and the
lines are many. Nearly all of that work only finds that a line is spent (spent.py: a `Channel`
line's transport its host already said, a repeat of evidence already held); the lines that say
something new are a few dozen a node. A sieve is an Engine of its own over its nodes' logs, in its
own process, that judges nothing: it forwards each line that its nodes' state says may still
change something, with its number, and the engine reads only those, as if it had read every line.

Why the engine, fed only what a sieve forwards, finds exactly what it would find reading every
line (tests/core/test_sieve.py checks it on every job of the corpus, repeated): a node's state
(its facts, the patterns seen, the evidence pending) depends only on that node's lines that change
it, which are all forwarded, so the sieve's state of a node is the engine's. Whether a line is
spent is decided from that state and from the findings (a rule whose finding already holds its
evidence from the node): the sieve's findings are its nodes' own and never a cross rule's (a sieve
raises none), so where its finding is active and full the engine's is too; the ids a cross rule
can raise are never taken as spent by the sieve (a cross finding replaces a rule's of the same id,
with other evidence). What the sieve does not know, it forwards.

`ddptui diagnose` uses them too (`Sieves`): each reads whole log files as diagnose reads one, and
diagnose gives the engine what they forwarded, log after log, block by block.

Protocol, one JSON object per line. In (from the engine's process): `reset` {"gen": G}, `node`
{"node", "path", "offset", "line"}, `grew` {"ends": {node: B}}; from diagnose, `file` {"node",
"path"}. Out: {"op": "lines", "gen": G, "node": n, "lines": [[number, text], ...], "end": B} once
its lines up to byte B are sieved (in order, one per node a `grew` names; for a file, one per block
read, then {"op": "done", "node": n, "error": text or null}), and {"op": "error", "gen": G, "text": ...}.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import IO, Any

from .engine import Engine
from .facts import NodeState
from .process import end_input
from .cross_rules import CROSS_RULES

# every id a cross rule (or the engine's own cross judgements) raises
CROSS_IDS = frozenset({cr.id for cr in CROSS_RULES} | {"ranks-not-joined", "slow-interconnect", "unrecognized-failure"})


class Sieve(Engine):
    """An Engine that raises no cross finding and keeps, in `kept`, each line [number, text] that
    changed or may have changed anything (the lines `_line` reads whole, and the lines whose live
    patterns matched), once, in order. Its reader takes them after each node's batch (`take`), so
    they are that node's."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.kept: list[list] = []

    def _keep(self, n: int, line: str) -> None:
        if not self.kept or self.kept[-1][0] != n:  # a line `_line` read is matched too: once
            self.kept.append([n, line])

    def _after_batch(self) -> None:
        pass  # no cross rule, no bandwidth verdict: the engine's, over every node

    def _raise_cross(self, fid, nodes, summary, evidence, explanation=None) -> None:
        pass

    def _hit_spent(self, st: NodeState, ri: int) -> bool:
        if self.rules[ri].id in CROSS_IDS:  # the engine's finding of this id may be a cross rule's
            return False
        return super()._hit_spent(st, ri)

    def _line(self, st: NodeState, n: int, line: str, candidates: list) -> None:
        self._keep(n, line)  # a line read whole: its facts may be new
        super()._line(st, n, line, candidates)

    def _match(self, st: NodeState, n: int, line: str, candidates: list) -> bool:
        if super()._match(st, n, line, candidates):
            self._keep(n, line)
            return True
        return False

    def take(self) -> list[list]:
        """[[number, text], ...] kept since the last take."""
        kept, self.kept = self.kept, []
        return kept


class SieveServer:
    def __init__(self, out: IO[str]) -> None:
        from .child import Follower  # the child imports this module: its Follower once both are loaded

        self._follower = Follower
        self.out = out
        self.gen = 0
        self.engine = Sieve()
        self.nodes: dict[str, Any] = {}

    def send(self, msg: dict[str, Any]) -> None:
        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()

    def handle(self, msg: dict[str, Any]) -> None:
        op = msg["op"]
        if op == "reset":
            for f in self.nodes.values():
                f.close()
            self.nodes = {}
            self.gen = msg["gen"]
            self.engine = Sieve()
        elif op == "node":
            self.nodes[msg["node"]] = self._follower(msg["path"], msg["offset"], msg["line"])
        elif op == "file":  # `ddptui diagnose`'s: a whole log, read as diagnose reads one
            self.read_file(msg["node"], msg["path"])
        elif op == "grew":
            for node, end in msg["ends"].items():
                try:
                    self.read(node, end)
                except Exception:  # noqa: BLE001 (the engine says it at its next sync; the node is not held up)
                    self.engine.kept = []
                    self.send({"op": "error", "gen": self.gen, "text": traceback.format_exc(limit=8)})
                self.send({"op": "lines", "gen": self.gen, "node": node, "end": end, "lines": self.engine.take()})

    def read_file(self, node: str, path: str) -> None:
        from .offline import DiagnoseInputError, text_blocks

        try:
            for block in text_blocks(Path(path)):
                self.engine.feed_text(node, block)
                self.send({"op": "lines", "gen": self.gen, "node": node, "lines": self.engine.take()})
        except DiagnoseInputError as e:
            self.send({"op": "done", "node": node, "error": str(e)})
            return
        self.send({"op": "done", "node": node, "error": None})

    def read(self, node: str, end: int) -> None:
        f = self.nodes.get(node)
        if f is not None:
            f.feed_to(self.engine, node, end)


def spawn() -> subprocess.Popen:
    """A sieve process (OSError where none can start). It ends at the end of its input."""
    return subprocess.Popen([sys.executable, "-m", "ddptui.core.diagnosis.sieve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1 << 16)


MIN_BYTES = 32 << 20  # logs smaller in all are read by `diagnose` alone: a sieve's start (~0.1 s) would not pay
QUEUED = 8  # a node's blocks forwarded and not read yet (of the worst case, a log whose every line is forwarded: 32 MB)


class Sieves:
    """`ddptui diagnose`'s sieves: the logs `plain` [(node, path)] spread over `processes` (by cores
    where None, if they are big enough), every `processes`-th from the first left to the caller; each
    sieve reads its logs whole, in order, beside the caller. `feed(engine, node)` gives the engine
    what the sieve forwarded of that node's log, block by block as it was read (False: the caller
    reads it). The sieves end with the `with` block."""

    def __init__(self, plain: list[tuple[str, Path]], processes: int | None = None) -> None:
        if processes is None:
            from .child import default_processes

            processes = default_processes() if len(plain) > 1 and _size(plain) >= MIN_BYTES else 1
        k = max(1, min(processes, len(plain)))
        self.procs: list[subprocess.Popen] = []
        self.words: dict[str, queue.Queue] = {}
        for s in range(1, k):
            mine = [(node, path) for j, (node, path) in enumerate(plain) if j % k == s]
            try:
                proc = spawn()
            except OSError:  # no process (a limit): the caller reads these logs itself
                continue
            self.procs.append(proc)
            words = {node: queue.Queue(QUEUED) for node, _ in mine}  # bounded: a sieve waits for the caller
            self.words.update(words)
            threading.Thread(target=_route, args=(proc, words), daemon=True).start()
            assert proc.stdin is not None
            proc.stdin.write("".join(json.dumps({"op": "file", "node": node, "path": str(path)}) + "\n"
                                     for node, path in mine))
            proc.stdin.flush()

    def feed(self, engine: Engine, node: str) -> bool:
        from ..errors import DdptuiError
        from .offline import DiagnoseInputError

        words = self.words.get(node)
        if words is None:
            return False
        while True:
            msg = words.get()
            if msg["op"] == "lines":
                engine.feed_sparse(node, msg["lines"])
            elif msg["op"] == "done":
                if msg["error"]:
                    raise DiagnoseInputError(msg["error"])
                return True
            else:  # its sieve failed (a bug: its traceback) or ended (killed) before it was done
                raise DdptuiError(f"{node}: the diagnosis process reading it failed: {msg.get('text', '')}")

    def __enter__(self) -> Sieves:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            end_input(proc)


def _size(plain: list[tuple[str, Path]]) -> int:
    total = 0
    for _, path in plain:
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total


def _route(proc: subprocess.Popen, words: dict[str, queue.Queue]) -> None:
    """A sieve's words, to the queue of the node each is about; its end (or an error) to all."""
    assert proc.stdout is not None
    for raw in proc.stdout:
        msg = json.loads(raw)
        if msg.get("node") in words:
            words[msg["node"]].put(msg)
        else:
            for q in words.values():
                q.put(msg)
    rc = proc.wait()
    for q in words.values():
        try:
            q.put_nowait({"op": "ended", "text": f"it ended (rc {rc})"})
        except queue.Full:  # nobody reads it any more (the caller stopped at an error)
            pass


def main() -> int:
    from .child import read_words  # ends this process when the engine's process ends

    server = SieveServer(sys.stdout)
    words: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=read_words, args=(words,), daemon=True).start()
    while True:
        raw = words.get()
        try:
            server.handle(json.loads(raw))
        except Exception:  # noqa: BLE001 (the engine says it at its next sync)
            server.send({"op": "error", "gen": server.gen, "text": traceback.format_exc(limit=8)})


if __name__ == "__main__":
    sys.exit(main())
