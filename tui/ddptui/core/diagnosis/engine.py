"""The diagnosis engine: reads each node's lines as they stream, keeps per-node state, and raises
findings as soon as the evidence is there, across nodes too.

Incremental: `feed()` looks at each line once; nothing re-reads a log. Cheap on healthy lines: a
line is matched against the rules only if it contains one of the rules' literal anchors (one
combined regex search per line).

A failed node is never left unexplained: lines that say a node failed without saying why (the
rules' FAILURE_SIGNS: an exception line, a non-zero exitcode, a signal, an NCCL WARN) are kept, and
`finish()` raises `unrecognized-failure` for each node that showed one (or whose exit code the
runner reported as non-zero with `node_exited()`) and that no finding covers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Callable, Iterable

from .bandwidth import ANCHORS as BANDWIDTH_ANCHORS, BandwidthJudge
from .catalog import CATALOG, DEFAULT, finding, hidden_ids
from .classify import decide_signal, signal_of_exit
from .failures import Failures
from .model import Evidence, Finding
from .rules import CROSS_RULES, FAILURE_SIGNS, RULES, CrossRule, Rule, Sign

try:  # the regex parser moved in 3.11; the old name warns
    import re._parser as sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse  # type: ignore[no-redef]

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NCCL_HEAD = re.compile(r"(?:^|[\s:>\]])([A-Za-z0-9][\w.-]*):(\d+):(\d+) \[(\d+)\]")
MAX_EVIDENCE_PER_NODE = 5

# Per-node state extractors: (name, regex). Values feed the cross-node rules.
VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
NET_DEFINITE = re.compile(r"Using (?:network|internal Network) (IB|Socket)\b|via NET/(IB|Socket)/")
NET_TENTATIVE = re.compile(r"NET/(IB|Socket) : Using \[")
PLUGIN_EXTERNAL = re.compile(r"Plugin Path : (\S+)|Loaded net plugin (\S+)")
PLUGIN_INTERNAL = re.compile(r"No plugin found \(libnccl-net\.so\)|Could not find: libnccl-net\.so|Failed to find ncclNetPlugin symbol")
NRANKS = re.compile(r"rank (\d+) nRanks (\d+) nNodes (\d+)")
LOCAL_RANKS = re.compile(r"local_ranks=\[([\d, ]*)\]")  # torchrun's agent, with LOGLEVEL=INFO
GROUP_WORLD = re.compile(r"\bgroup_world_size=(\d+)")  # torchrun's agent: its --nnodes, with LOGLEVEL=INFO
COMM_SIZE = re.compile(r"\brank \d+ n[Rr]anks (\d+)\b")  # NCCL's communicator: init and destroy lines


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


def _literals(pattern: str) -> list[str] | None:
    """Literals one of which every match must contain: the longest run, or one per branch of a
    leading alternation; None when there is no such set (then the pattern sees every line)."""
    lit = _literal(pattern)
    if lit:
        return [lit]
    try:
        parsed = sre_parse.parse(pattern)
    except re.error:
        return None
    for op, av in parsed:
        branch = None
        if op is sre_parse.BRANCH:  # a non-capturing (?:a|b) is inlined by the parser
            branch = av
        elif op is sre_parse.SUBPATTERN and len(av[-1]) == 1 and av[-1][0][0] is sre_parse.BRANCH:
            branch = av[-1][0][1]
        if branch is not None:
            lits = [_literal_items(b) for b in branch[1]]
            if all(lits):
                return lits  # type: ignore[return-value]
    return None


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


@dataclass
class NodeState:
    name: str
    lines: int = 0
    hosts: set = field(default_factory=set)
    seen: dict = field(default_factory=dict)  # pattern source -> (line, text), for `requires` and `absent`
    version: dict = field(default_factory=dict)  # host -> (version, line, text)
    transport: dict = field(default_factory=dict)  # host -> (kind, definite, line, text)
    plugin: dict = field(default_factory=dict)  # host -> (value, line, text)
    nnodes_seen: dict = field(default_factory=dict)  # host -> (nNodes, nRanks, line, text)
    nproc: dict = field(default_factory=dict)  # node -> (local processes torchrun started here, line, text)
    nnodes: dict = field(default_factory=dict)  # node -> (the nnodes torchrun's agent here was started with, line, text)
    comm: dict = field(default_factory=dict)  # host -> (largest communicator it joined, line, text)
    pending: dict = field(default_factory=dict)  # rule index -> [Evidence] waiting for `requires`


class Engine:
    """Feed it lines per node; read `findings`. `on_change(finding)` is called when one appears or changes.

    The live runner calls `node_exited(node, rc)` when a node's command ends, and `finish()` when the
    run does; `ddptui diagnose` calls only `finish()`.
    """

    def __init__(self, rules: Iterable[Rule] = RULES, expected_nnodes: int | None = None,
                 on_change: Callable[[Finding], None] | None = None,
                 cross_rules: Iterable[CrossRule] = CROSS_RULES, signs: Iterable[Sign] = FAILURE_SIGNS,
                 min_busbw_gbps: float | None = None) -> None:
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
        # anchors: literal -> [(rule index, pattern index, kind)], kind: "hit" | "req" | "res" | "abs"
        entries: list[tuple[re.Pattern, int, str]] = []
        for ri, r in enumerate(self.rules):
            entries += [(p, ri, "hit") for p in r.compiled]
            entries += [(re.compile(p), ri, "req") for p in r.requires]
            entries += [(re.compile(p), ri, "res") for p in r.resolved_by]
            entries += [(re.compile(p), ri, "abs") for p in r.absent]
        entries += [(re.compile(sg.pattern), si, "sign") for si, sg in enumerate(self.signs)]
        self._always: list[tuple[re.Pattern, int, str]] = []
        self._by_lit: dict[str, list[tuple[re.Pattern, int, str]]] = {}
        for pat, ri, kind in entries:
            lits = _literals(pat.pattern)
            if lits is None:
                self._always.append((pat, ri, kind))
            else:
                for lit in lits:
                    self._by_lit.setdefault(lit, []).append((pat, ri, kind))
        state_lits = ["NCCL version", "Using network", "Using internal Network", "via NET/", "NET/IB : Using [",
                      "NET/Socket : Using [", "Plugin Path", "Loaded net plugin", "No plugin found", "Could not find: libnccl-net",
                      "Failed to find ncclNetPlugin symbol", " nNodes ", "local_ranks=[", "group_world_size=", " nranks ",
                      " nRanks "]
        lits = sorted(set(self._by_lit) | set(state_lits) | set(BANDWIDTH_ANCHORS), key=len, reverse=True)
        self._gate = re.compile(trie_regex(lits))
        self._lit_items = list(self._by_lit.items())

    # ---- feeding ---------------------------------------------------------------------------
    def feed(self, node: str, lines: Iterable[str], first_line: int | None = None) -> None:
        st = self.nodes.get(node)
        if st is None:
            st = self.nodes[node] = NodeState(node)
        n = st.lines if first_line is None else first_line - 1
        gate = self._gate.search
        for raw in lines:
            n += 1
            if self._always:
                line = ANSI.sub("", raw) if "\x1b" in raw else raw
                self._line(st, n, line, None)
                continue
            if gate(raw) is None:
                continue
            line = ANSI.sub("", raw) if "\x1b" in raw else raw
            self._line(st, n, line, gate)
        st.lines = max(st.lines, n)
        self._cross_node()
        if self.bandwidth.dirty and (verdict := self.bandwidth.judge(self.nodes)):
            self._raise_cross("slow-interconnect", *verdict)

    def _line(self, st: NodeState, n: int, line: str, gate) -> None:
        host = None
        if "NCCL" in line or " INFO " in line or " WARN " in line:
            m = NCCL_HEAD.search(line)
            if m:
                host = m.group(1)
                st.hosts.add(host)
        key = host or st.name
        self._extract(st, key, n, line)
        # measured: a plain `in` per literal beats a lookahead findall of them all (3 vs 7 µs a line)
        candidates = self._always + [e for lit, es in self._lit_items if lit in line for e in es]
        if len(candidates) > 1:
            candidates = list(dict.fromkeys(candidates))  # a pattern anchored on two branch literals
        for pat, ri, kind in candidates:
            m = pat.search(line)
            if not m:
                continue
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
                ev = Evidence(st.name, n, line.strip())
                if rule.at_end:
                    st.seen.setdefault(f"hit:{ri}", (n, line))
                elif rule.requires and not all(r in st.seen for r in rule.requires):
                    pend = st.pending.setdefault(ri, [])
                    if len(pend) < MAX_EVIDENCE_PER_NODE:
                        pend.append((ev, m.groups()))
                else:
                    self._hit(rule, st.name, ev, m.groups())

    def _extract(self, st: NodeState, key: str, n: int, line: str) -> None:
        self.bandwidth.feed(st.name, n, line)  # its anchors are in the gate; it keeps what it needs
        seen = extract_facts(st, key, n, line)
        if seen is not None and self.expected_nnodes and seen[0] < self.expected_nnodes:
            self._raise_cross("ranks-not-joined", [st.name],
                              f"NCCL built a communicator of {seen[0]} node(s) ({seen[1]} ranks), the job has "
                              f"{self.expected_nnodes}", [Evidence(st.name, n, line.strip())])

    # ---- findings ---------------------------------------------------------------------------
    def _hit(self, rule: Rule, node: str, ev: Evidence, groups: tuple) -> None:
        fid, fix, severity = rule.id, rule.fix, rule.severity
        if rule.decide is not None:
            verdict = rule.decide(groups)
            if verdict is None:
                return
            fid, summary = verdict
            if fid != rule.id:  # the rule's own words are for its own id
                fix, severity = DEFAULT, None
        else:
            summary = rule.summary.format(*[g or "" for g in groups]) if rule.summary and groups else (
                rule.summary if rule.summary and "{" not in rule.summary else CATALOG[rule.id].title)
        self._raise(fid, node, ev, summary, fix, severity)

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
        if sum(1 for e in f.evidence if e.node == node) < MAX_EVIDENCE_PER_NODE:
            f.evidence.append(ev)
        if f.state == "resolved" and node not in self._resolved_nodes.get(fid, set()):
            f.state = "active"
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
        if self.on_change:
            self.on_change(f)

    def _cross_node(self) -> None:
        """The cross rules: a per-node fact that differs between the nodes (or the hosts of one log)."""
        for cr in self.cross_rules:
            seen = {}  # (node, host) -> (value, line, text)
            for st in self.nodes.values():
                for host, val in getattr(st, cr.fact).items():
                    seen[(st.name, host)] = (val[0], val[-2], val[-1])
            if not (cr.applies(seen) if cr.applies else len({v[0] for v in seen.values()}) >= 2):
                continue
            nodes = sorted({node for node, _ in seen})
            if cr.hosts_if_one_node and len(nodes) == 1:
                nodes = sorted({host for _, host in seen})
            self._raise_cross(cr.id, nodes, cr.summary(seen),
                              [Evidence(node, v[1], v[2]) for (node, _), v in sorted(seen.items())])

    def finish(self) -> list[Finding]:
        """The log ended (or the run did): judge the at_end rules; return the findings."""
        for st in self.nodes.values():
            for ri, rule in enumerate(self.rules):
                if not rule.at_end or f"hit:{ri}" not in st.seen:
                    continue
                if any(a in st.seen for a in rule.absent):
                    continue
                n, line = st.seen[f"hit:{ri}"]
                self._hit(rule, st.name, Evidence(st.name, n, line.strip()), ())
        self._unrecognized()
        return self.findings

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
        # a finding covers the nodes it names and those its evidence comes from (a cross rule over
        # the hosts of one log names the hosts)
        explained = {n for f in self._findings.values() if f.id != fid for n in [*f.nodes, *(e.node for e in f.evidence)]}
        nodes, summary, evidence = self.failures.unexplained(explained)
        if nodes:
            self._raise_cross(fid, nodes, summary, evidence)
        else:  # explained since (a node's cause arrived after an earlier finish)
            self._findings.pop(fid, None)

    @property
    def findings(self) -> list[Finding]:
        """Findings in the order they appeared, without the ones a better explanation covers (the catalog's
        `suppresses`)."""
        fs = list(self._findings.values())
        hidden = hidden_ids(fs)
        return [f for f in fs if f.id not in hidden]


def extract_facts(st: NodeState, key: str, n: int, line: str) -> tuple[int, int] | None:
    """Keep what a line says about its node (or NCCL host `key`): NCCL version, transport, net plugin,
    local ranks, nnodes, communicator size. Returns (nNodes, nRanks) the first time NCCL reports them."""
    if "NCCL version" in line and (m := VERSION.search(line)) and key not in st.version:
        st.version[key] = (m.group(1), n, line.strip())
    if ("Using " in line or "via NET/" in line) and (m := NET_DEFINITE.search(line)):
        kind = m.group(1) or m.group(2)
        cur = st.transport.get(key)
        if cur is None or not cur[1]:
            st.transport[key] = (kind, True, n, line.strip())
    elif key not in st.transport and " : Using [" in line and (m := NET_TENTATIVE.search(line)):
        st.transport[key] = (m.group(1), False, n, line.strip())
    if "lugin" in line:
        if m := PLUGIN_EXTERNAL.search(line):
            st.plugin[key] = ("external:" + (m.group(1) or m.group(2)), n, line.strip())
        elif PLUGIN_INTERNAL.search(line) and key not in st.plugin:
            st.plugin[key] = ("internal", n, line.strip())
    if not st.nproc and "local_ranks=[" in line and (m := LOCAL_RANKS.search(line)):
        st.nproc[st.name] = (len([x for x in m.group(1).split(",") if x.strip()]), n, line.strip())
    if not st.nnodes and "group_world_size=" in line and (m := GROUP_WORLD.search(line)):
        st.nnodes[st.name] = (int(m.group(1)), n, line.strip())
    if ("nranks " in line or "nRanks " in line) and (m := COMM_SIZE.search(line)):
        size = int(m.group(1))
        if key not in st.comm or size > st.comm[key][0]:
            st.comm[key] = (size, n, line.strip())
    if " nNodes " in line and (m := NRANKS.search(line)) and key not in st.nnodes_seen:
        st.nnodes_seen[key] = (int(m.group(3)), int(m.group(2)), n, line.strip())
        return int(m.group(3)), int(m.group(2))
    return None
