"""Headless output of a run: `node │ line` per line of a node's output, a word per event; or JSON.

What is printed is written by a thread of its own, in order, so that no node's reader waits for
the terminal: a reader that did (the printer's lock, held for the write) stopped reading its node
while another node's batch went out, and a terminal slower than the job (a laptop's ssh to the
login node, `| less`, Ctrl-S) slowed every node's log on disk, the live diagnosis, and through the
full pipes the training job itself. Now a node's lines wait for the output in a backlog of at most
BACKLOG bytes; beyond it a terminal or a pipe is given a word instead of the lines it cannot take
("N lines not printed", `output-skipped` with --json: the run's log of the node has every one), and
a file is waited for (it is never slower than the disk, and is kept whole).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from json.encoder import encode_basestring_ascii as esc  # json.dumps of a str (C)

BACKLOG = 4 << 20  # bytes of output waiting for a slow terminal at most (~50,000 NCCL lines); then lines are skipped


def mark_of(f) -> str:
    """A finding's mark in the text output: ✓ settled, ℹ information (a good run's), ⚠ a problem."""
    return "✓" if not f.active else "ℹ" if f.severity == "info" else "⚠"


def _is_file(out) -> bool:
    """Whether `out` is a regular file, or memory (no descriptor): output that is waited for. Asked
    only of a full backlog (an fstat), so nothing caches it: a test may swap `out`."""
    try:
        return stat.S_ISREG(os.fstat(out.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return True


def _amount(size: int) -> str:
    return f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"


class Printer:
    """Headless output: `node │ line`, flushed batch by batch even into a pipe; or JSON events.
    With a Redactor, nothing secret is printed: node output is searched for the known values (one
    search per batch), every other line and event fully. `close()` writes what waits and ends the
    writer; what comes after is written at once (or never, once a bounded close left the writer
    to a stopped terminal)."""

    def __init__(self, as_json: bool, width: int, redactor=None, backlog: int = BACKLOG) -> None:
        self.as_json = as_json
        self.width = width
        self.redactor = redactor
        self.out = sys.stdout
        self.backlog = backlog
        self.broken = False  # the output's reader went away: nothing more is written
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[tuple[object, int]] = []  # (what `_write` takes, its size), in order
        self._queued = 0  # the bytes in the queue and in the writer's hands
        self._skipped: dict[str, list] = {}  # node -> [stream, first line, lines] not printed
        self._skipping = False  # node lines are being left out (until the backlog is half written)
        self._writing = False  # the writer thread runs: what is put goes to its queue
        self._closed = False
        self._run_dir: str | None = None

    def __call__(self, ev) -> None:
        from .core import events as E

        r = self.redactor
        if isinstance(ev, E.NodeOutput):  # masked at their source (the run's redactor), as the logs are
            if ev.lines and not self._skips(ev):  # made before the lock, by the node's own reader thread
                made = self._json_text(ev) if self.as_json else self._prefixed(f"{ev.node:<{self.width}} │ ", ev.data)
                self._put(made, ev.node)
            return
        if isinstance(ev, E.RunStarted):
            self._run_dir = ev.run_dir
        if self.as_json:
            self._w(json.dumps(r.obj(ev.to_json(), "output") if r else ev.to_json(), default=str), mask=False)
            return
        if isinstance(ev, E.StepChanged):
            mark = {"running": "▶", "passed": "✓", "failed": "✗", "skipped": "·"}.get(ev.state, " ")
            msg = f" — {ev.message}" if ev.message and ev.state != "running" else (
                f" {ev.message}" if ev.message else "")
            self._w(f"{'ddptui':<{self.width}} │ {mark} {ev.step}: {ev.state}{msg}")
        elif isinstance(ev, E.NodeState) and ev.state in ("unreachable", "failed", "lost", "running", "exited", "stopped"):
            msg = ev.message or ""  # "exited 0", not "exited — exited 0"
            said = msg if msg.startswith(str(ev.state)) else f"{ev.state}{' — ' + msg if msg else ''}"
            self._w(f"{'ddptui':<{self.width}} │   {ev.node}: {said}")
        elif isinstance(ev, E.CheckResult) and ev.status != "pass":
            self._w(f"{'ddptui':<{self.width}} │   {ev.node}: {ev.check} {ev.status}: {ev.summary}")
        elif isinstance(ev, E.CommandPlanned):
            self._w(f"{'ddptui':<{self.width}} │   {ev.node} (node_rank {ev.node_rank}): {ev.command}")
        elif isinstance(ev, E.FindingRaised):
            f = ev.finding
            env = " ".join(f"{k}={v}" for k, v in (f.fix.env if f.fix else {}).items())
            self._w(f"{'ddptui':<{self.width}} │ {mark_of(f)} {f.id} ({f.severity}, {f.state}): {f.summary}"
                    + (f" — fix: {env}" if env and f.active else ""))
        elif isinstance(ev, E.PlaybookRevised):
            self._w(f"{'ddptui':<{self.width}} │ fix for {ev.finding_id} written to {ev.path}; running it")
        elif isinstance(ev, E.Notice):
            self._w(f"{'ddptui':<{self.width}} │ {ev.level}: {ev.text}")
        elif isinstance(ev, E.Allocated):
            how = "granted" if ev.owned else "joined"
            self._w(f"{'ddptui':<{self.width}} │   slurm job {ev.job_id} {how}: {', '.join(ev.nodes)}"
                    + (f" ({ev.partition})" if ev.partition else ""))
        elif isinstance(ev, E.RunStarted):
            self._w(f"{'ddptui':<{self.width}} │ run {ev.run_id} → {ev.run_dir}")

    def _prefixed(self, pre: str, data: bytes) -> str | tuple[bytes, memoryview]:
        """`pre` before each line of `data` (a batch's UTF-8 bytes, each line ending "\n", as they
        went to the log): the prefix put in by one replace of the bytes; never a string per line.
        What `_put` writes: the prefix and the batch with a prefix after every newline but the last
        (or, where the output takes text only, the whole text)."""
        if getattr(self.out, "buffer", None) is None:  # a stream of text only
            return pre + data[:-1].decode().replace("\n", "\n" + pre) + "\n"
        enc = (getattr(self.out, "encoding", None) or "utf-8").lower().replace("_", "-")
        p = pre.encode(enc, "replace")
        if enc not in ("utf-8", "utf8") and not data.isascii():  # the terminal's encoding, as the text layer's
            data = data.decode().encode(enc, "replace")
        out = memoryview(data.replace(b"\n", b"\n" + p))
        return p, out[:len(out) - len(p)]

    def _json_text(self, ev) -> str:
        """A batch as `--json` output events, one JSON object per line (what json.dumps makes of
        {"event": "output", "node", "stream", "line", "text"}, byte for byte), as one text: per line
        only the text's escaping (json's own, in C) and one format."""
        head = f'{{"event": "output", "node": {esc(ev.node)}, "stream": {esc(ev.stream)}, "line": '
        first = ev.first_line
        return "".join([f'{head}{first + i}, "text": {esc(t)}}}\n' for i, t in enumerate(ev.lines)])

    def _w(self, s: str, nl: bool = True, mask: bool = True) -> None:
        if mask and self.redactor is not None:
            s = self.redactor.text(s, "output")
        self._put(s + ("\n" if nl else ""))

    # the writer

    def _skips(self, ev) -> bool:
        """Whether a node's batch is left out: the output is a terminal or a pipe, and BACKLOG bytes
        wait for it. Once lines are being left out, every node's are until half of that is written
        (all nodes print again together: none is shut out by the others, and a node does not print
        a batch now and then). Counted, to be said before the node's next printed line."""
        with self._cond:
            if self._queued < (self.backlog // 2 if self._skipping else self.backlog) or self._closed or _is_file(self.out):
                self._skipping = False
                return False
            self._skipping = True
            if (held := self._skipped.get(ev.node)) is None:
                self._skipped[ev.node] = [ev.stream, ev.first_line, len(ev.lines)]
            else:
                held[2] += len(ev.lines)
            return True

    def _put(self, made: str | tuple[bytes, memoryview], node: str | None = None) -> None:
        """Queue what `_prefixed`, `_json_text` or `_w` made for the writer (a node's batch after the
        word for what of that node was left out); once the printer is closed and all that waited
        is written, write it now."""
        size = len(made) if isinstance(made, str) else len(made[0]) + len(made[1])
        with self._cond:
            if self._closed and not self._writing:
                if not self.broken:
                    try:
                        self._write([made])
                    except (OSError, ValueError):  # the output's reader went away: so did ours
                        self.broken = True
                return
            if node is not None and not self._closed:
                while self._queued >= self.backlog and not self.broken and _is_file(self.out):
                    self._cond.wait()  # a file: its reader never stops, so the node waits for it
                if (held := self._skipped.pop(node, None)) is not None:
                    self._queue.append((self._left_out(node, *held), 0))
            elif node is None:  # an event comes after the word for the lines left out before it
                self._say_left_out()
            self._queue.append((made, size))
            self._queued += size
            if not self._writing:
                self._writing = True
                threading.Thread(target=self._write_all, name="ddptui-printer", daemon=True).start()
            self._cond.notify_all()

    def _say_left_out(self) -> None:
        """Queue the word for every node's lines left out so far (under the lock)."""
        for node, held in self._skipped.items():
            self._queue.append((self._left_out(node, *held), 0))
        self._skipped = {}

    def _left_out(self, node: str, stream: str, first: int, count: int) -> str:
        """The word for `count` lines of a node, from line `first`, that were not printed."""
        from .core.logs.rundir import node_log

        log = str(node_log(self._run_dir, node)) if self._run_dir else None
        if self.as_json:
            return json.dumps({"event": "output-skipped", "node": node, "stream": stream, "line": first,
                               "count": count, "log": log}) + "\n"
        where = log or f"the run's log of {node}"
        return (f"{node:<{self.width}} │ [ddptui: {count:,} line{'s' if count != 1 else ''} ({first:,}-{first + count - 1:,}) "
                f"not printed: this output fell {_amount(self.backlog)} behind the nodes; every line is in {where}]\n")

    def _write_all(self) -> None:
        """The writer: all that waits, in order, then a flush; until closed and nothing waits."""
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                items, self._queue = self._queue, []
                if not items:
                    self._writing = False
                    self._cond.notify_all()  # close() waits for it
                    return
            if not self.broken:
                try:
                    self._write([made for made, _ in items])
                except (OSError, ValueError):  # a pipe whose reader ended (`| head`), a closed terminal
                    self._lost_reader()
            with self._cond:
                self._queued -= sum(size for _, size in items)
                self._cond.notify_all()

    def _write(self, items: list) -> None:
        """Write `items` in order: to the output's descriptor where it has one (the writer then holds
        none of Python's locks of stdout while a stopped terminal keeps it waiting, and the process can
        still exit), else through the object (memory, a test's stream)."""
        out = self.out
        try:
            fd = out.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        if fd is None:
            text = False
            for made in items:
                if isinstance(made, str):
                    out.write(made)
                    text = True
                else:
                    if text:  # what went through the text layer goes first
                        out.flush()
                        text = False
                    for part in made:
                        out.buffer.write(part)
            out.flush()  # the text layer's, then its buffer's
            return
        out.flush()  # anything printed before, through the object
        enc = getattr(out, "encoding", None) or "utf-8"
        for made in items:
            for part in ((made.encode(enc, "replace"),) if isinstance(made, str) else made):
                view = memoryview(part)
                while view:  # a signal may cut a write short
                    view = view[os.write(fd, view):]

    def _lost_reader(self) -> None:
        """The output's reader went away: nothing more is written, and the run ends as on Ctrl-C (its
        jobs stopped, its logs kept) unless it is ending already. Python's own flush of stdout at exit
        goes to /dev/null, not into a traceback."""
        import _thread

        with self._cond:
            self.broken, ending = True, self._closed
        if self.out is sys.stdout:
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, sys.stdout.fileno())
                os.close(null)
            except (OSError, ValueError):
                pass
        if not ending:
            _thread.interrupt_main()

    def close(self, wait: float | None = None) -> None:
        """Say what was left out, write everything that waits, and end the writer: for as long as
        that takes, or at most `wait` seconds (a run the user stopped is not held by a terminal
        they stopped too); what is not written by then never is (it is in the run's logs)."""
        with self._cond:
            if self._closed:
                return
            self._say_left_out()
            self._closed = True
            self._cond.notify_all()
            try:
                if not self._cond.wait_for(lambda: not self._writing, wait):
                    self.broken, self._queue = True, []  # a writer still waiting for the terminal is left to it
            except KeyboardInterrupt:  # Ctrl-C while a slow terminal catches up (or the writer found it gone)
                self.broken, self._queue = True, []
