"""The engine's literal anchors, and the prefilter that finds in bulk the lines of a batch that hold one.

Every pattern the engine runs has a literal one of which every match must contain (`literals_of`);
a line that holds none of them cannot match anything, so it is never looked at in Python. The
prefilter scans a whole batch (its lines joined by "\n") in one pass outside Python: an
Aho-Corasick automaton (ahocorasick_rs, a DFA; on bytes when the text is ASCII) that gives every
literal occurrence at once and so also says which literals each candidate line holds, so that only
the rules anchored on those run. Without the library: one search of a trie regex of the literals
per candidate line (in C over the text between candidates), and the engine then asks which
literals the line holds itself. Both paths give the same candidate lines.

Measured (8 MB of the bench's logs, this 2-core machine under load): pyahocorasick's iter() 27
MB/s, the trie regex 11 MB/s, ahocorasick_rs on bytes 90-200 MB/s; hence ahocorasick_rs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Container, Iterable, Iterator, Mapping

try:
    import ahocorasick_rs  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - the library is optional
    ahocorasick_rs = None

try:  # the regex parser moved in 3.11; the old name warns
    import re._parser as sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse  # type: ignore[no-redef]

HAVE_AUTOMATON = ahocorasick_rs is not None  # a dependency (pyproject); the other path where a platform has no wheel
Candidate = tuple[int, int, int, "set[int] | None"]  # line index, start, end, literal indexes held (None: not known)


def trie_regex(words: Iterable[str]) -> str:
    """One regex for a set of literals, factored by common prefixes: Python's re tries the
    alternatives of a flat `a|b|c...` one by one at every position; a trie tries one branch."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        ends = "" in node
        alts = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items()) if ch != ""]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if ends else body

    return build(trie)


def literals_of(pattern: str) -> list[str] | None:
    """Literals one of which every match must contain: the longest run, or one per branch of an
    alternation when none of those is shorter (the longer the literals, the fewer the lines that
    hold one); None when there is no such set (then the pattern sees every line)."""
    lits = _literals_of(pattern)
    return None if lits is None else list(lits)


@functools.lru_cache(maxsize=4096)
def _literals_of(pattern: str) -> tuple[str, ...] | None:
    # parsed once a process: every Engine (a run's, a relaunch's, a sieve's) reads the same few hundred patterns
    lit = _literal(pattern)
    branch = _branch_literals(pattern)
    if branch and (not lit or min(map(len, branch)) >= len(lit)):
        return tuple(branch)
    return (lit,) if lit else None


def _branch_literals(pattern: str) -> list[str] | None:
    """One literal per branch of the pattern's first top-level alternation that has one in every
    branch; a branch that is all literal takes the literal text around the group with it
    (`(?:Bootstrap|NET/Socket) : Using ` gives "Bootstrap : Using " and "NET/Socket : Using ")."""
    try:
        parsed = list(sre_parse.parse(pattern))
    except re.error:
        return None
    for k, (op, av) in enumerate(parsed):
        branch = None
        if op is sre_parse.BRANCH:  # a non-capturing (?:a|b) is inlined by the parser
            branch = av
        elif op is sre_parse.SUBPATTERN and len(av[-1]) == 1 and av[-1][0][0] is sre_parse.BRANCH:
            branch = av[-1][0][1]
        if branch is None:
            continue
        before, after = _run(reversed(parsed[:k]))[::-1], _run(parsed[k + 1:])
        lits = []
        for b in branch[1]:
            whole = _run(b)
            lits.append(before + whole + after if len(whole) == len(b) else _literal_items(b))
        if all(lits):
            return lits  # type: ignore[return-value]
    return None


def _run(items) -> str:
    """The literal characters at the start of `items`, up to the first item that is not one."""
    out = []
    for op, av in items:
        if op is not sre_parse.LITERAL:
            break
        out.append(chr(av))
    return "".join(out)


def _literal(pattern: str) -> str | None:
    """The longest literal run that every match of `pattern` must contain (None if there is none)."""
    try:
        return _literal_items(sre_parse.parse(pattern))
    except re.error:
        return None


def _literal_items(parsed) -> str | None:
    best, cur = "", []
    for op, av in parsed:
        if op is sre_parse.LITERAL:
            cur.append(chr(av))
            continue
        run = "".join(cur)
        if len(run) > len(best):
            best = run
        cur = []
    run = "".join(cur)
    if len(run) > len(best):
        best = run
    return best if len(best) >= 4 else None


@functools.lru_cache(maxsize=8)
def _compiled(literals: tuple[str, ...], automaton: bool) -> tuple[re.Pattern, object, object]:
    """The gate regex and the automata for a set of literals, built once a process (about 20 ms of
    an Engine's 26 before): they are read-only, so every Prefilter of those literals shares them."""
    gate = re.compile(trie_regex(sorted(literals, key=len, reverse=True)))
    ac = ac_bytes = None
    if automaton and literals:
        dfa = ahocorasick_rs.Implementation.DFA
        ac = ahocorasick_rs.AhoCorasick(list(literals), implementation=dfa)
        if all(x.isascii() for x in literals):  # byte offsets are character offsets in ASCII text
            ac_bytes = ahocorasick_rs.BytesAhoCorasick([x.encode() for x in literals], implementation=dfa)
    return gate, ac, ac_bytes


class Prefilter:
    """The lines of a text that hold one of `literals` (none may contain a newline)."""

    def __init__(self, literals: list[str], automaton: bool | None = None) -> None:
        if len(set(literals)) != len(literals) or any("\n" in x for x in literals):
            raise ValueError("the literals must be distinct and hold no newline")
        self.literals = literals
        use = HAVE_AUTOMATON if automaton is None else automaton and HAVE_AUTOMATON
        self.gate, self._ac, self._ac_bytes = _compiled(tuple(literals), bool(use))

    @property
    def automaton(self) -> bool:
        return self._ac is not None

    def candidates(self, text: str, skip: Container[int] = (), by_head: Mapping[str, Container[int]] | None = None,
                   marks: tuple[str, ...] = ()) -> Iterator[Candidate]:
        """(line index, start, end, the indexes of the literals the line holds, or None where the
        pure-Python path does not know them) for each line of `text` that holds a literal, in order.
        The automaton's path may be told literals that do not make a line a candidate: `skip`, on
        any line; `by_head`, per line head (a line up to its first "] ", included), on a line with
        that head that holds one of `marks`. Both are read as each line is reached, after the line
        before it was taken, so the taker may change them."""
        if self._ac is None:
            return self._by_regex(text)
        return self._by_automaton(text, skip, by_head, marks)

    def _by_automaton(self, text: str, skip: Container[int], by_head: Mapping[str, Container[int]] | None,
                      marks: tuple[str, ...]) -> Iterator[Candidate]:
        if self._ac_bytes is not None and text.isascii():
            hits = self._ac_bytes.find_matches_as_indexes(text.encode("ascii"), overlapping=True)
        else:
            hits = self._ac.find_matches_as_indexes(text, overlapping=True)  # type: ignore[union-attr]
        find, rfind, count, startswith = text.find, text.rfind, text.count, text.startswith
        line, counted = 0, 0  # the line index of position `counted`
        start = end = -1
        held: set[int] | None = None
        for i, first, _ in hits:  # every occurrence, overlapping ones too, in order
            if first < end:
                held.add(i)  # type: ignore[union-attr]
                continue
            if held is not None:
                yield line, start, end, held
                held = None
            if i in skip:  # a later literal of its line may still make it one
                continue
            start = rfind("\n", 0, first) + 1
            if by_head and (h := find("] ", start, first)) >= 0 and i in by_head.get(text[start:h + 1], ()):
                if startswith(marks, h + 2):  # NCCL's own `head] NCCL INFO ...`: a mark right after the head
                    continue
                stop = find("\n", first)
                if stop < 0:
                    stop = len(text)
                marked = False
                for mark in marks:
                    if find(mark, start, stop) >= 0:
                        marked = True
                        break
                if marked:
                    continue
            line += count("\n", counted, start)
            counted = start
            end = find("\n", first)
            if end < 0:
                end = len(text)
            held = {i}
        if held is not None:
            yield line, start, end, held

    def _by_regex(self, text: str) -> Iterator[Candidate]:
        search, find, rfind, count = self.gate.search, text.find, text.rfind, text.count
        line, counted, pos = 0, 0, 0
        while (m := search(text, pos)) is not None:
            start = rfind("\n", 0, m.start()) + 1
            line += count("\n", counted, start)
            counted = start
            end = find("\n", m.end())
            if end < 0:
                end = len(text)
            yield line, start, end, None
            pos = end + 1
