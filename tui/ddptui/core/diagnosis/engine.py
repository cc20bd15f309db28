"""The diagnosis engine: reads each node's lines as they stream, keeps per-node state, and raises
findings as soon as the evidence is there, across nodes too.

Incremental: `feed()` looks at each line once; nothing re-reads a log. Cheap on healthy lines: a
batch is scanned in bulk for the rules' literal anchors (literals.py: one pass in C over the
batch's text), and only the lines that hold one reach Python, each matched against only the
rules anchored on the literals it holds. `feed_text()` takes the text itself (no line list at all:
`ddptui diagnose` reads files in large blocks).

A failed node is never left unexplained: lines that say a node failed without saying why (the
failure signs (signs.py): an exception line, a non-zero exitcode, a signal, an NCCL WARN) are kept, and
`finish()` raises `unrecognized-failure` for each node that showed one (or whose exit code the
runner reported as non-zero with `node_exited()`) and that no finding covers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from .bandwidth import ANCHORS as BANDWIDTH_ANCHORS, BandwidthJudge
from .catalog import CATALOG, DEFAULT, finding, hidden_ids
from .classify import decide_signal, signal_of_exit
from .facts import ANSI, STATE_LITERALS, NodeState, cross_verdicts, extract_facts
from .failures import Failures
from .literals import Prefilter, literals_of
from .model import Evidence, Finding, graver
from .cross_rules import CROSS_RULES, CrossRule
from .rules import RULES, Rule
from .signs import FAILURE_SIGNS, Sign
from .spent import MAX_EVIDENCE_PER_NODE, Entry, SpentLines


class Engine(SpentLines):
    """Feed it lines per node; read `findings`. `on_change(finding)` is called when one appears or changes.
    `automaton=False` takes the pure-Python prefilter even where pyahocorasick is installed.

    The live runner calls `node_exited(node, rc)` when a node's command ends, and `finish()` when the
    run does; `ddptui diagnose` calls only `finish()`.
    """

    def __init__(self, rules: Iterable[Rule] = RULES, expected_nnodes: int | None = None,
                 on_change: Callable[[Finding], None] | None = None,
                 cross_rules: Iterable[CrossRule] = CROSS_RULES, signs: Iterable[Sign] = FAILURE_SIGNS,
                 min_busbw_gbps: float | None = None, automaton: bool | None = None) -> None:
        self.rules = tuple(rules)
        self.cross_rules = tuple(cross_rules)
        self.signs = tuple(signs)
        self.failures = Failures()
        self.expected_nnodes = expected_nnodes
        self.on_change = on_change
        self.nodes: dict[str, NodeState] = {}
        self._findings: dict[str, Finding] = {}  # id -> finding
        self._resolved_nodes: dict[str, set] = {}
        self.bandwidth = BandwidthJudge(min_busbw_gbps)
        self._always, self._lit_items, literals = anchors(self.rules, self.signs)
        self._prefilter = Prefilter(literals, automaton)
        self._know_spent(literals)
        self._said = 0  # findings that appeared or changed so far
        self._crossed = -1  # facts written and findings changed when the cross rules last looked

    # ---- feeding ---------------------------------------------------------------------------
    def _node(self, node: str) -> NodeState:
        st = self.nodes.get(node)
        if st is None:
            st = self.nodes[node] = NodeState(node)
        return st

    def feed(self, node: str, lines: Iterable[str], first_line: int | None = None) -> None:
        """A batch of `node`'s lines; `first_line`: the number of the first (default: after the last fed)."""
        if not isinstance(lines, list):
            lines = list(lines)
        st = self._node(node)
        self._feed(st, st.lines if first_line is None else first_line - 1, lines)
        self._after_batch()

    def feed_sparse(self, node: str, lines: list[list]) -> None:
        """`node`'s lines as [[number, text], ...], in order, with gaps (a sieve's: sieve.py), as one batch."""
        st = self._node(node)
        for first, texts in runs(lines):
            self._feed(st, first - 1, texts)
        self._after_batch()

    def _feed(self, st: NodeState, n: int, lines: list[str]) -> None:
        text = "\n".join(lines)
        if self._always or text.count("\n") != len(lines) - 1:  # a rule sees every line, or a line holds a newline
            self._feed_lines(st, n, lines)
        elif lines:
            self._scan(st, n, text)
        st.lines = max(st.lines, n + len(lines))

    def feed_text(self, node: str, text: str) -> None:
        """`node`'s next lines as one text, the lines joined by "\\n" (no newline after the last)."""
        if self._always:
            return self.feed(node, text.split("\n"))
        st = self._node(node)
        self._scan(st, st.lines, text)
        st.lines += text.count("\n") + 1
        self._after_batch()

    def _feed_lines(self, st: NodeState, n: int, lines: Iterable[str]) -> None:
        gate = self._prefilter.gate.search
        for raw in lines:
            n += 1
            if self._always or gate(raw) is not None:
                line = ANSI.sub("", raw) if "\x1b" in raw else raw
                self._line(st, n, line, self._candidates(line))

    def _after_batch(self) -> None:
        # the cross rules read only the facts, and raise only what differs from the findings: where
        # neither moved since they last looked, they would find what they found (most batches of a
        # running job, each a line or a few: the look is most of such a batch's cost)
        now = self._said + sum(st.changes for st in self.nodes.values())
        if now != self._crossed:
            self._crossed = now
            self._cross_node()
        if self.bandwidth.dirty and (verdict := self.bandwidth.judge(self.nodes)):
            self._raise_cross("slow-interconnect", *verdict)

    def _line(self, st: NodeState, n: int, line: str, candidates: list[Entry]) -> None:
        host = None
        if "NCCL" in line or " INFO " in line or " WARN " in line:
            host = self._nccl_host(line)
            if host is not None:
                st.hosts.add(host)
        facts = st.changes
        self._extract(st, host or st.name, n, line)
        if st.changes != facts:
            self._moved()
        self._match(st, n, line, candidates)

    def _match(self, st: NodeState, n: int, line: str, candidates: list[Entry]) -> bool:
        """The rules' and signs' patterns anchored on the line's literals, each on the line. True
        when one matched (the line may have changed something)."""
        matched = False
        for pat, ri, kind in candidates:
            m = pat.search(line)
            if not m:
                continue
            if not matched:
                matched = True
                self._moved()
            if kind == "sign":
                self.failures.sign(st.name, self.signs[ri], n, line, m)
                continue
            rule = self.rules[ri]
            if kind == "req" or kind == "abs":
                st.seen.setdefault(pat.pattern, (n, line))
                if kind == "req" and ri in st.pending and all(r in st.seen for r in rule.requires):
                    for ev, groups in st.pending.pop(ri):
                        self._hit(rule, st.name, ev, groups)
            elif kind == "res":
                self._resolve(rule.id, st.name)
            elif kind == "hit":
                if rule.at_end:
                    st.seen.setdefault(f"hit:{ri}", (n, line))
                elif rule.requires and not all(r in st.seen for r in rule.requires):
                    pend = st.pending.setdefault(ri, [])
                    if len(pend) < MAX_EVIDENCE_PER_NODE:
                        pend.append((Evidence(st.name, n, line.strip()), m.groups()))
                else:
                    self._hit(rule, st.name, Evidence(st.name, n, line.strip()), m.groups())
        return matched

    def _extract(self, st: NodeState, key: str, n: int, line: str) -> None:
        self.bandwidth.feed(st.name, n, line)  # its anchors are in the gate; it keeps what it needs
        seen = extract_facts(st, key, n, line)
        if seen is not None and self.expected_nnodes and seen[0] < self.expected_nnodes:
            self._raise_cross("ranks-not-joined", [st.name],
                              f"NCCL built a communicator of {seen[0]} node(s) ({seen[1]} ranks), the job has "
                              f"{self.expected_nnodes}", [Evidence(st.name, n, line.strip())])

    # ---- findings ---------------------------------------------------------------------------
    def _hit(self, rule: Rule, node: str, ev: Evidence, groups: tuple, severity: str | None = None) -> None:
        if (said := _said_by(rule, groups)) is not None:
            self._raise(said[0], node, ev, said[1], said[2], severity or said[3])

    def _raise(self, fid: str, node: str, ev: Evidence, summary: str, fix, severity: str | None) -> None:
        f = self._findings.get(fid)
        if f is None:
            f = finding(fid, [node], f"{node}: {summary}", [ev], fix=fix, severity=severity)
            self._findings[fid] = f
            self._changed(f)
            return
        changed = False
        if node not in f.nodes:
            f.nodes.append(node)
            f.summary = f"{', '.join(f.nodes)}: {summary}"
            changed = True
        # a line is evidence once on its node: several rules of this id may match it, and a retry loop
        # repeats it; the repeats would take the places of the node's other lines
        mine = [e for e in f.evidence if e.node == node]
        if len(mine) < MAX_EVIDENCE_PER_NODE and all(e.text != ev.text for e in mine):
            f.evidence.append(ev)
        if f.state == "resolved" and node not in self._resolved_nodes.get(fid, set()):
            f.state = "active"
            changed = True
        # a graver word of the same id (NCCL's information that GPUDirect RDMA is off, then NVSHMEM's
        # failure for want of it) makes the finding that grave, in its words
        if graver(sev := severity or CATALOG[fid].severity, f.severity):
            f.severity, f.summary = sev, f"{', '.join(f.nodes)}: {summary}"
            changed = True
        if changed:
            self._changed(f)

    def _resolve(self, rule_id: str, node: str) -> None:
        f = self._findings.get(rule_id)
        if f is None or node not in f.nodes:
            return
        done = self._resolved_nodes.setdefault(rule_id, set())
        done.add(node)
        if f.state == "active" and set(f.nodes) <= done:
            f.state = "resolved"
            self._changed(f)

    def _raise_cross(self, fid: str, nodes: list[str], summary: str, evidence: list[Evidence],
                     explanation: str | None = None) -> None:
        f = self._findings.get(fid)
        if f is not None and sorted(f.nodes) == sorted(nodes) and f.summary == summary:
            return
        self._findings[fid] = finding(fid, nodes, summary, evidence, explanation=explanation)
        self._changed(self._findings[fid])

    def _changed(self, f: Finding) -> None:
        self._moved()
        self._said += 1
        if self.on_change:
            self.on_change(f)

    def _cross_node(self) -> None:
        for fid, nodes, summary, evidence in cross_verdicts(self.cross_rules, self.nodes.values()):
            self._raise_cross(fid, nodes, summary, evidence)

    def finish(self) -> list[Finding]:
        """The log ended (or the run did): judge the at_end rules; return the findings."""
        for st in self.nodes.values():
            for ri, rule in enumerate(self.rules):
                if not rule.at_end or f"hit:{ri}" not in st.seen:
                    continue
                if any(a in st.seen for a in rule.absent):
                    continue
                n, line = st.seen[f"hit:{ri}"]
                m = next(m for p in rule.compiled if (m := p.search(line)))  # the line matched when it was seen
                quiet = rule.info_unless_failed and not self._unexplained(st.name)
                self._hit(rule, st.name, Evidence(st.name, n, line.strip()), m.groups(), "info" if quiet else None)
        self._unrecognized()
        return self.findings

    def _unexplained(self, node: str) -> bool:
        """`node` failed and no finding says why but unrecognized-failure and information (the test
        `_unrecognized` makes, failures.unexplained)."""
        causes = [f for f in self._findings.values() if f.id != "unrecognized-failure" and f.severity != "info"]
        return node in self.failures.unexplained(causes)[0]

    def node_exited(self, node: str, rc: int) -> None:
        """The runner saw `node`'s command end with exit code `rc` (a negative rc: killed by that signal).

        A signal the catalog knows (SIGSEGV, SIGKILL) is raised at once; any other non-zero rc makes the
        node a failed one, and `finish()` raises `unrecognized-failure` for it if nothing explains it.
        """
        self.nodes.setdefault(node, NodeState(node))
        self.failures.exited(node, rc)
        sig = signal_of_exit(rc)
        if sig and (verdict := decide_signal((str(sig),))):
            self._raise(verdict[0], node, Evidence(node, 0, f"exit code {rc}"), verdict[1], DEFAULT, None)

    def _unrecognized(self) -> None:
        fid = "unrecognized-failure"
        nodes, summary, evidence = self.failures.unexplained([f for f in self._findings.values() if f.id != fid])
        if nodes:
            self._raise_cross(fid, nodes, summary, evidence)
        elif self._findings.pop(fid, None) is not None:  # explained since (a node's cause arrived after an earlier finish)
            self._moved()

    @property
    def findings(self) -> list[Finding]:
        """Findings in the order they appeared, without the ones a better explanation covers (the catalog's
        `suppresses`)."""
        fs = list(self._findings.values())
        hidden = hidden_ids(fs)
        return [f for f in fs if f.id not in hidden]


def runs(lines: list[list]) -> list[tuple[int, list[str]]]:
    """[[number, text], ...] as (first number, texts) of consecutive numbers."""
    out: list[tuple[int, list[str]]] = []
    for n, text in lines:
        if out and out[-1][0] + len(out[-1][1]) == n:
            out[-1][1].append(text)
        else:
            out.append((n, [text]))
    return out


def _said_by(rule: Rule, groups: tuple) -> tuple | None:
    """What a match of `rule` raises (its groups): (id, summary, fix, severity), or None (its
    `decide` says the match is nothing)."""
    fid, fix, severity = rule.id, rule.fix, rule.severity
    if rule.decide is not None:
        verdict = rule.decide(groups)
        if verdict is None:
            return None
        fid, summary, *own_fix = verdict
        if fid != rule.id:  # the rule's own words are for its own id
            fix, severity = DEFAULT, None
        if own_fix:  # the verdict's variant of the cause has a fix of its own
            fix = own_fix[0]
    else:
        summary = rule.summary.format(*[g or "" for g in groups]) if rule.summary and groups else (
            rule.summary if rule.summary and "{" not in rule.summary else CATALOG[rule.id].title)
    return fid, summary, fix, severity


def anchors(rules: tuple[Rule, ...], signs: tuple[Sign, ...]) -> tuple[list[Entry], list[tuple[str, list[Entry]]], list[str]]:
    """Every pattern the engine runs, by the literal anchors one of which its matches hold: the
    entries with no anchor (they see every line), (literal, its entries) in a fixed order, and
    every literal of the gate (those, then the facts' and the bandwidth judge's own)."""
    entries: list[Entry] = []
    for ri, r in enumerate(rules):
        entries += [(p, ri, "hit") for p in r.compiled]
        entries += [(re.compile(p), ri, "req") for p in r.requires]
        entries += [(re.compile(p), ri, "res") for p in r.resolved_by]
        entries += [(re.compile(p), ri, "abs") for p in r.absent]
    entries += [(re.compile(sg.pattern), si, "sign") for si, sg in enumerate(signs)]
    always: list[Entry] = []
    by_lit: dict[str, list[Entry]] = {}
    for pat, ri, kind in entries:
        lits = literals_of(pat.pattern)
        if lits is None:
            always.append((pat, ri, kind))
        else:
            for lit in lits:
                by_lit.setdefault(lit, []).append((pat, ri, kind))
    more = sorted((set(STATE_LITERALS) | set(BANDWIDTH_ANCHORS)) - set(by_lit))
    return always, list(by_lit.items()), list(by_lit) + more
