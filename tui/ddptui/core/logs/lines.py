"""Bytes from a node's stream into whole lines, delivered in batches (never one call per line).

A batch travels as a `Chunk`: the lines' bytes as one UTF-8 buffer. The hot path of a run (the
log on disk, the headless printer, the searches for torchrun's reports) works on those bytes in C;
the lines as Python strings are made only where somebody reads them, and only as many as are read
(`tail`: a pane scrolled to its end shows the newest lines of a flood, not all of them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

_CR_NL = re.compile(rb"\r+\n")  # a CRLF stream's lines end without their "\r", as str.rstrip("\r") gave


_SAMPLE, _SHORT_LINE = 4096, 32  # lines_in: bytes looked at first, the line length below which `count` wins


def lines_in(data: bytes) -> int:
    """The newlines in `data`. `bytes.count` of one byte tests each byte in a loop (1.1 GB/s here);
    deleting them (`replace`) finds them with memchr and copies what is between: 2-3x faster on
    lines of a log's usual length (4 x 81 MB of NCCL lines: 70 vs 23 ms a node; its copy is freed at
    once), 10x slower on lines of a byte or two. The first 4 KiB say which the batch is."""
    n = len(data)
    if n <= _SAMPLE:
        return data.count(b"\n")
    if data.count(b"\n", 0, _SAMPLE) * _SHORT_LINE > _SAMPLE:  # lines shorter than ~32 bytes
        return data.count(b"\n")
    return n - len(data.replace(b"\n", b""))


class Chunk(Sequence[str]):
    """A batch of whole lines: `data` is each line followed by "\\n", valid UTF-8 (what did not
    decode was replaced, as `bytes.decode(errors="replace")` does), `count` the number of lines.
    A sequence of the lines (split on first use, then kept)."""

    __slots__ = ("data", "count", "_lines")

    def __init__(self, data: bytes, count: int | None = None) -> None:
        self.data = data
        self.count = lines_in(data) if count is None else count
        self._lines: list[str] | None = None

    @classmethod
    def of_bytes(cls, data: bytes) -> Chunk:
        """Raw bytes of whole lines (each ending "\\n") as a stream gave them: made valid UTF-8, and
        the "\\r" of CRLF line ends dropped."""
        if not data.isascii():
            try:  # valid UTF-8 (nearly always: a progress bar's blocks, a dash) stays the bytes it is
                data.decode()
            except UnicodeDecodeError:
                data = data.decode("utf-8", "replace").encode()
        if b"\r" in data:
            data = _CR_NL.sub(b"\n", data)
        return cls(data)

    @classmethod
    def of_lines(cls, lines: Iterable[str]) -> Chunk:
        """Lines as strings (a replay, a test, another reader): one line each, whatever they hold."""
        lines = list(lines)
        if not lines:
            return cls(b"", 0)
        text = "\n".join(lines)
        c = cls((text + "\n").encode("utf-8", "replace"))
        if c.count == len(lines):
            c._lines = lines
        return c

    @property
    def text(self) -> str:
        """The lines joined by "\\n" (no newline after the last)."""
        return self.data[:-1].decode()

    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.data[:-1].decode().split("\n") if self.count else []
        return self._lines

    def tail(self, n: int) -> list[str]:
        """The last `n` lines, splitting only them (the rest stays bytes)."""
        if n <= 0:
            return []
        if self._lines is not None or n >= self.count:
            return self.lines()[-n:]
        data, pos = self.data, len(self.data) - 1
        for _ in range(n):
            pos = data.rfind(b"\n", 0, pos)
        return data[pos + 1:-1].decode().split("\n")

    def __len__(self) -> int:
        return self.count

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i):  # noqa: E301
        return self.lines()[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chunk):
            return self.data == other.data
        return isinstance(other, (list, tuple)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Chunk({self.count} lines, {len(self.data)} bytes)"


OnLines = Callable[[Chunk], None]


def last(lines: Sequence[str], n: int) -> Sequence[str]:
    """The last `n` of `lines`, splitting no more of a Chunk than those."""
    return lines.tail(n) if isinstance(lines, Chunk) else lines[-n:] if n > 0 else ()


def newest(batches: Sequence[Sequence[str]], n: int) -> list[str]:
    """The last `n` lines of the batches together."""
    parts: list[Sequence[str]] = []
    for b in reversed(batches):
        if n <= 0:
            break
        parts.append(last(b, n))
        n -= len(parts[-1])
    return [x for part in reversed(parts) for x in part]


class LineSplitter:
    """Bytes in, whole lines out; a partial line waits for the rest."""

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> list[str]:
        data = self._tail + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self._tail = data
            return []
        self._tail = data[cut + 1:]
        # decoded in one piece ("\n" is never inside a UTF-8 sequence, so lines decode as they would apart)
        lines = data[:cut].decode("utf-8", "replace").split("\n")
        return [x.rstrip("\r") for x in lines] if b"\r" in data else lines

    def flush(self) -> list[str]:
        tail, self._tail = self._tail, b""
        return [tail.decode("utf-8", "replace").rstrip("\r")] if tail else []


MAX_LINE = 1 << 20  # bytes of a line not ended yet that a reader holds: beyond it, it goes out as a line


def read_loop(read: Callable[[], bytes], on_lines: OnLines) -> None:
    """Read until EOF; deliver the whole lines of each read as one batch, as bytes (nothing here
    makes a string per line). A read returns all the source holds at that moment (a channel's
    buffer, a pipe's up to 64 KiB), so a flood comes in large batches and a quiet stream line by
    line, at once: a batch never waits for the next read. A line that never ends (a progress bar
    redrawn with "\r" for a whole epoch) is cut every MAX_LINE bytes, so a reader holds a bounded
    amount whatever the job prints."""
    tail: list[bytes] = []  # a line not ended yet, in pieces (a long one is not copied per read)
    held = 0
    while data := read():
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            tail.append(data)
            held += len(data)
            if held >= MAX_LINE:
                on_lines(Chunk.of_bytes(b"".join([*tail, b"\n"])))
                tail, held = [], 0
            continue
        whole = data if cut == len(data) else data[:cut]
        if tail:
            whole = b"".join([*tail, whole])
            tail, held = [], 0
        if cut < len(data):
            tail.append(data[cut:])
            held = len(data) - cut
        on_lines(Chunk.of_bytes(whole))
    if tail:
        on_lines(Chunk.of_bytes(b"".join([*tail, b"\n"])))
