"""Lines that can no longer change anything: NCCL's init chatter, skipped in bulk.

With NCCL_DEBUG=INFO every rank prints its `Channel` and `Ring` lines by the hundred, and those
between nodes hold `via NET/IB/` or `via NET/Socket/`, the facts' literals: the prefilter lets
them all through, though only the first one per NCCL host says anything (its transport). Likewise
a rule that already holds its evidence from a node, and a `requires`/`absent` pattern already seen
there, learn nothing from the next copy of their line. `SpentLines._live` tells such a line from the literals the automaton
says it holds, in a few dictionary lookups instead of `_line`'s patterns; the findings are the same
as looking at every line (tests/core/test_prefilter.py).

What `_live` found spent stays spent until something changes (a line read whole, a pattern that
matched, a finding raised or resolved: `_moved`), and nothing changes while a flood of spent chatter
streams: `_live` remembers, per node and key, the literals it found spent, so the next copy costs a
set's lookup; a literal spent whatever the key (a rule's evidence is full, a pattern was seen) is
skipped by the automaton's reader itself (`Prefilter.candidates`' `skip`), its line never cut out,
and so is one spent for an NCCL host on the lines whose head (`host:pid:tid [rank]`, a rank's, on
each of its lines) names that host (`by_head`): a host's `Channel ... via NET/Socket/` copies are
walked past in the reader's loop, their key never worked out; a new host's head is not there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from .bandwidth import ANCHORS as BANDWIDTH_ANCHORS
from .catalog import CATALOG
from .facts import ANSI, COMM_SIZE, NCCL_HEAD, NET_DEFINITE, STATE_LITERALS, NodeState
from .model import graver

if TYPE_CHECKING:
    from .literals import Prefilter
    from .model import Finding
    from .rules import Rule

MAX_EVIDENCE_PER_NODE = 5
Entry = tuple[re.Pattern, int, str]  # pattern, rule (or sign) index, kind: hit | req | res | abs | sign
_UNSEEN = object()
NCCL_MARKS = ("NCCL", " INFO ", " WARN ")  # a line holding one is filed under the NCCL host its head names

# A literal that only the facts read, and when its line can tell them nothing new about its key
# (the node or NCCL host): the fact is taken once (facts.extract_facts) and that key has it, or (the
# communicator's size, the largest a host joined) the line's value is no larger than the one it has.


def _definite(st: NodeState, key: str, line: str) -> bool:
    return (t := st.transport.get(key)) is not None and t[1]


def _network_settled(st: NodeState, key: str, line: str) -> bool:
    """The host's network is known, and the line's IB or Socket (the transport fact) too."""
    return key in st.network and (_definite(st, key, line) or NET_DEFINITE.search(line) is None)


def _comm_settled(st: NodeState, key: str, line: str) -> bool:
    m = COMM_SIZE.search(line)
    return m is None or ((cur := st.comm.get(key)) is not None and int(m.group(1)) <= cur[0])


FACT_SETTLED: dict[str, Callable[[NodeState, str, str], bool]] = {
    "via NET/IB/": _definite, "via NET/Socket/": _definite,
    "Using network ": _network_settled, "Using internal Network ": _network_settled,
    "NET/IB : Using [": lambda st, key, line: key in st.transport,  # tentative: only where there is none
    "NET/Socket : Using [": lambda st, key, line: key in st.transport,
    "NCCL version": lambda st, key, line: key in st.version,
    "No plugin found": lambda st, key, line: key in st.plugin,  # "internal" is kept only where nothing is
    "Could not find: libnccl-net": lambda st, key, line: key in st.plugin,
    "Failed to find ncclNetPlugin symbol": lambda st, key, line: key in st.plugin,
    " nNodes ": lambda st, key, line: key in st.nnodes_seen,
    " nranks ": _comm_settled, " nRanks ": _comm_settled,
}


# the FACT_SETTLED conditions that read the line itself: a line's verdict tells nothing of the next one's
READS_LINE = frozenset({_network_settled, _comm_settled})


def spent_scope(when: tuple | None) -> str | None:
    """How far a literal's verdict of spent reaches while nothing changes: "node" (its conditions are
    rules' and patterns' state on the node), "key" (a fact of the NCCL host, or the node, that printed
    the line), None (a condition reads the line, or it is never spent)."""
    if when is None or any(c in READS_LINE for c in when if callable(c)):
        return None
    return "key" if any(callable(c) for c in when) else "node"


def spent_when(literals: list[str], entries_of: list[list[Entry]]) -> list[tuple | None]:
    """Per literal: what must hold on a node for a line holding it to change nothing there any
    more, or None: never (a sign, a resolution, and the facts FACT_SETTLED does not name, such as
    the external plugin, which keeps its latest path). A function of (node state, key, line): a fact
    the key has (FACT_SETTLED); a pattern source (requires, absent): it has been seen on the node
    (they remember their first match); a rule index (a hit): `_hit_spent`."""
    facts = set(STATE_LITERALS) | set(BANDWIDTH_ANCHORS)
    out: list[tuple | None] = []
    for lit, entries in zip(literals, entries_of):
        if lit in FACT_SETTLED and not entries:
            out.append((FACT_SETTLED[lit],))
        elif entries and lit not in facts and all(kind in ("req", "abs", "hit") for _, _, kind in entries):
            out.append(tuple(dict.fromkeys(ri if kind == "hit" else p.pattern for p, ri, kind in entries)))
        else:
            out.append(None)
    return out


class SpentLines:
    """The Engine's half that recognises spent lines (its state: the rules, findings, per-head hosts)."""

    rules: tuple[Rule, ...]
    _findings: dict[str, Finding]
    _spent_when: list
    _entries_of: list[list[Entry]]
    _heads: dict[str, str | None]
    _always: list[Entry]
    _lit_items: list[tuple[str, list[Entry]]]
    _scope: list[str | None]  # per literal: spent_scope
    _skips: dict[str, set[int]]  # node -> literals spent whatever the key, since the last change
    _by_head: dict[str, dict[str, set[int]]]  # node -> line head -> literals spent for the NCCL host it names
    _spent_keys: dict[tuple[str, str], set[int]]  # (node, key) -> literals found spent there, since the last change
    _prefilter: Prefilter
    _line: Callable[[NodeState, int, str, list[Entry]], None]  # the Engine's: a line read whole
    _match: Callable[[NodeState, int, str, list[Entry]], bool]  # the Engine's: these entries on the line

    def _know_spent(self, literals: list[str]) -> None:
        # per literal of the automaton: the entries anchored on it (none for the facts' own literals)
        self._entries_of = [es for _, es in self._lit_items] + [[]] * (len(literals) - len(self._lit_items))
        self._spent_when = spent_when(literals, self._entries_of)
        self._scope = [spent_scope(w) for w in self._spent_when]
        self._skips, self._spent_keys, self._by_head = {}, {}, {}
        self._heads = {}  # a line's head up to its first "] " -> the NCCL host in it

    def _scan(self, st: NodeState, n: int, text: str) -> None:
        # a coloured line is judged without its colours, which may hide a literal: none is skipped unseen
        coloured = "\x1b" in text
        skip, by_head = ((), None) if coloured else (self._skip_of(st), self._by_head_of(st))
        for i, start, end, held in self._prefilter.candidates(text, skip, by_head, NCCL_MARKS):
            line = text[start:end]
            if coloured and "\x1b" in line:  # the literals are looked for in the line without its colours
                line = ANSI.sub("", line)
                held = None
            if held is None:
                cands = self._candidates(line)
            elif (live := self._live(st, line, held)) is not None:
                if live:  # its facts are known: only the rules not spent yet look at it
                    self._match(st, n + i + 1, line, live)
                continue
            else:
                cands = self._entries_held(held)
            self._line(st, n + i + 1, line, cands)

    def _moved(self) -> None:
        """Something changed (a fact, a pattern seen, evidence, a finding): a literal found spent may
        not be any more. The skip sets are cleared in place: the automaton's reader holds them."""
        for skip in self._skips.values():
            skip.clear()
        for by_head in self._by_head.values():
            by_head.clear()
        self._spent_keys.clear()

    def _skip_of(self, st: NodeState) -> set[int]:
        """The node's literals spent whatever the key (the reader holds the set: cleared in place)."""
        if (skip := self._skips.get(st.name)) is None:
            skip = self._skips[st.name] = set()
        return skip

    def _by_head_of(self, st: NodeState) -> dict[str, set[int]]:
        """The node's literals spent for the host a line head names, per head (as `_skip_of`)."""
        if (by_head := self._by_head.get(st.name)) is None:
            by_head = self._by_head[st.name] = {}
        return by_head

    def _candidates(self, line: str) -> list[Entry]:
        """The entries anchored on the literals the line holds (found in Python: the line's literals
        are not known), and those anchored on none."""
        candidates = self._always + [e for lit, es in self._lit_items if lit in line for e in es]
        if len(candidates) > 1:
            candidates = list(dict.fromkeys(candidates))  # a pattern anchored on two branch literals
        return candidates

    def _entries_held(self, held: Collection[int]) -> list[Entry]:
        """The entries anchored on the literals `held`, in the order of the literals, as
        `_candidates` gives them, each once (a pattern may be anchored on two branch literals)."""
        entries_of = self._entries_of
        if len(held) == 1:
            return entries_of[next(iter(held))]
        cands = [e for li in sorted(held) for e in entries_of[li]]
        return list(dict.fromkeys(cands)) if len(cands) > 1 else cands

    def _live(self, st: NodeState, line: str, held: set[int]) -> list[Entry] | None:
        """What of the line can still change anything on this node (or the NCCL host that printed
        it): None when its facts may (or nothing is known of a literal: `_line` looks at all of
        it); else the entries of its literals not spent yet, [] when none is left. NCCL's
        init chatter repeats lines whose one use was their first few: `via NET/IB/` in every
        `Channel` line says the transport its host already said; a rule that already holds its
        evidence from this node learns nothing from the next copy; a host's `NET/Socket : Using`
        line, printed by each of its ranks, says its interface once and then only needs the rules
        that would flag a bad one. Skipping them in bulk is what keeps the engine near the speed
        of the stream; the findings are the same (test_prefilter)."""
        when = self._spent_when
        for li in held:
            if when[li] is None:
                return None
        key = self._key_of(st, line)
        if key is None:
            return None
        known = self._spent_keys.get((st.name, key))
        if known is not None and held <= known:  # nothing changed since each was found spent here
            self._tell_reader(st, key, line, known)
            return []
        live: list | None = None
        found = False
        for li in held:
            for c in when[li]:  # type: ignore[union-attr]
                if c.__class__ is int:
                    if not self._hit_spent(st, c):  # type: ignore[arg-type]
                        break
                elif c.__class__ is str:
                    if c not in st.seen:
                        break
                elif not c(st, key, line):
                    return None  # a fact the line may still change
            else:
                if (scope := self._scope[li]) is not None:
                    if known is None:
                        known = self._spent_keys[(st.name, key)] = set()
                    if scope == "node":
                        self._skip_of(st).add(li)
                    elif li not in known:
                        found = True  # a literal newly spent for the key: the reader may skip it by head
                    known.add(li)
                continue
            if live is None:
                live = []
            live.append(li)
        if found:
            self._tell_reader(st, key, line, known)  # type: ignore[arg-type]
        return [] if live is None else self._entries_held(live)

    def _hit_spent(self, st: NodeState, ri: int) -> bool:
        """Another match of rule `ri` on this node would change nothing (see `_line` and `_raise`)."""
        rule = self.rules[ri]
        if rule.at_end:
            return f"hit:{ri}" in st.seen
        if rule.requires and not all(r in st.seen for r in rule.requires):
            return len(st.pending.get(ri, ())) >= MAX_EVIDENCE_PER_NODE
        f = self._findings.get(rule.id)
        if rule.decide is not None or f is None or f.state != "active" or st.name not in f.nodes:
            return False
        if f.severity != "error" and graver(rule.severity or CATALOG[rule.id].severity, f.severity):
            return False  # its match would make the finding graver (Engine._raise)
        return sum(e.node == st.name for e in f.evidence) >= MAX_EVIDENCE_PER_NODE

    def _tell_reader(self, st: NodeState, key: str, line: str, known: set[int]) -> None:
        """Where `key` is the NCCL host the line's head names, the automaton's reader is told the
        head: the literals spent for that host (`known`, the same set, which grows with it) are no
        candidates on a line with that head and one of NCCL_MARKS, whose key (`_key_of`) is that
        host. The head of a host not registered yet is never told: its key would be None."""
        end = line.find("] ") + 1
        if end and self._heads.get(head := line[:end]) == key:
            by_head = self._by_head_of(st)
            if len(by_head) < 4096:
                by_head[head] = known

    def _key_of(self, st: NodeState, line: str) -> str | None:
        """The key `_line` files the line's facts under: the node, or the NCCL host that printed the
        line; None when that host is one `_line` has not registered on the node yet."""
        if "NCCL" not in line and " INFO " not in line and " WARN " not in line:  # none of NCCL_MARKS
            return st.name
        host = self._nccl_host(line)
        return st.name if host is None else host if host in st.hosts else None

    def _nccl_host(self, line: str) -> str | None:
        """NCCL_HEAD's first match in the line, its host. A `host:pid:tid [rank]` head ends at the
        line's first "] " (no match holds "] "), so the head is enough, and a rank's head repeats on
        each of its lines: the answer is kept per head (one per rank thread, bounded)."""
        end = line.find("] ") + 1
        if end > 0:
            head = line[:end]
            host = self._heads.get(head, _UNSEEN)
            if host is _UNSEEN:
                m = NCCL_HEAD.search(head)
                host = m.group(1) if m else None
                if len(self._heads) < 4096:
                    self._heads[head] = host
            if host is not None:
                return host  # type: ignore[return-value]
        m = NCCL_HEAD.search(line)
        return m.group(1) if m else None
