"""Headless output of a run: `node │ line` per line of a node's output, a word per event; or JSON."""

from __future__ import annotations

import json
import sys
import threading
from json.encoder import encode_basestring_ascii as esc  # json.dumps of a str (C)


def mark_of(f) -> str:
    """A finding's mark in the text output: ✓ settled, ℹ information (a good run's), ⚠ a problem."""
    return "✓" if not f.active else "ℹ" if f.severity == "info" else "⚠"


class Printer:
    """Headless output: `node │ line`, flushed line by line even into a pipe; or JSON events.
    With a Redactor, nothing secret is printed: node output is searched for the known values (one
    search per batch), every other line and event fully."""

    def __init__(self, as_json: bool, width: int, redactor=None) -> None:
        self.as_json = as_json
        self.width = width
        self.redactor = redactor
        self._lock = threading.Lock()
        self.out = sys.stdout

    def __call__(self, ev) -> None:
        from .core import events as E

        r = self.redactor
        if isinstance(ev, E.NodeOutput):  # masked at their source (the run's redactor), as the logs are
            if ev.lines:  # made before the lock, which is held only to write: other nodes' batches wait for
                # the write alone, not for this one's prefixing or escaping (a copy of the batch, in C)
                made = self._json_text(ev) if self.as_json else self._prefixed(f"{ev.node:<{self.width}} │ ", ev.data)
                with self._lock:
                    self._put(made)
            return
        with self._lock:
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

    def _put(self, made: str | tuple[bytes, memoryview]) -> None:
        """Write what `_prefixed` or `_json_text` made (under the lock), flushed."""
        if isinstance(made, str):
            self.out.write(made)
            self.out.flush()
            return
        buf = self.out.buffer
        self.out.flush()  # what went through the text layer first
        for part in made:
            buf.write(part)
        buf.flush()

    def _w(self, s: str, nl: bool = True, mask: bool = True) -> None:
        if mask and self.redactor is not None:
            s = self.redactor.text(s, "output")
        self.out.write(s + ("\n" if nl else ""))
        self.out.flush()
