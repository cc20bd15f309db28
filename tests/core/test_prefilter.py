"""The engine's bulk prefilter (literals.py): the automaton (ahocorasick_rs) and the pure-Python
path give the same candidate lines, and the engine gives the same findings by either path, and
the same as looking at the batch line by line, on every job of the corpus (split into batches
of several sizes, with colours, fed as lines or as text)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from ddptui.core.diagnosis import literals
from ddptui.core.diagnosis.engine import Engine
from ddptui.core.diagnosis.literals import HAVE_AUTOMATON, Prefilter, literals_of
from ddptui.core.diagnosis.rules import anchored_on
from tests.core.test_diagnosis_corpus import CONTEXT, GROUPS, split

DATA = Path(__file__).resolve().parent.parent / "data"

PATHS = [pytest.param(True, id="automaton"), pytest.param(False, id="pure-python")]


def test_the_automaton_library_is_installed() -> None:
    """ahocorasick_rs is a dependency (pyproject): without it every automaton case below would test
    the pure-Python path twice, so its absence fails here rather than passing unseen."""
    assert HAVE_AUTOMATON, "ahocorasick_rs did not import: `pip install -e .` installs it"


def findings_of(key: str, how: str, automaton: bool, batch: int) -> list[dict]:
    e = Engine(automaton=automaton, **CONTEXT.get(key, {}))
    for f in GROUPS[key]:
        _, body = split(f)
        for i in range(0, len(body), batch):
            part = body[i:i + batch]
            if how == "text":
                e.feed_text(f.stem, "\n".join(part))
            elif how == "lines":
                e.feed(f.stem, part, i + 1)
            else:  # one line at a time through the gate: the engine as it was
                e._feed_lines(e._node(f.stem), i, part)
                e._node(f.stem).lines = i + len(part)
                e._after_batch()
    return [x.to_json() for x in e.finish()]


@pytest.mark.parametrize("automaton", PATHS)
def test_every_corpus_job_gives_the_same_findings_by_every_path(automaton: bool) -> None:
    for key in GROUPS:
        want = findings_of(key, "one-by-one", automaton, 10**9)
        for how, batch in (("lines", 1), ("lines", 7), ("lines", 10**9), ("text", 3), ("text", 10**9)):
            assert findings_of(key, how, automaton, batch) == want, (key, how, batch)


@pytest.mark.parametrize("automaton", PATHS)
def test_coloured_and_odd_lines_are_judged_as_before(automaton: bool) -> None:
    lines = ["\x1b[31mh:1:1 [0] NCCL INFO NET/IB : No\x1b[0m device found.", "",
             "h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0", "a\rb Segmentation fault",
             "h:1:2 [0] NCCL INFO NET/IB : No device found.", "[rank0]: RuntimeError: boom", "  "]
    e1, e2 = Engine(automaton=automaton), Engine(automaton=automaton)
    e1.feed("n", lines)
    e2._feed_lines(e2._node("n"), 0, lines)
    e2._after_batch()
    assert [f.to_json() for f in e1.finish()] == [f.to_json() for f in e2.finish()]
    assert e1.nodes["n"].lines == len(lines)


def test_both_prefilters_find_the_same_lines_and_the_automaton_says_which_literals() -> None:
    lits = ["abc", "bcd", "NET/IB : ", " WARN ", "xx"]
    rnd = random.Random(5)
    alphabet = ["a", "b", "c", "d", "x", " ", "\n", "NET/IB : ", " WARN ", "é"]
    for _ in range(300):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 60)))
        lines = text.split("\n")
        want = [(i, lits_in) for i, line in enumerate(lines) if (lits_in := {j for j, w in enumerate(lits) if w in line})]
        py = list(Prefilter(lits, automaton=False).candidates(text))
        assert [(i, text[s:e]) for i, s, e, _ in py] == [(i, lines[i]) for i, _ in want]
        ac = list(Prefilter(lits, automaton=True).candidates(text))
        assert [(i, held) for i, _, _, held in ac] == want
        assert [c[:3] for c in ac] == [c[:3] for c in py]


def test_the_default_path_follows_the_library_and_can_be_forced(monkeypatch) -> None:
    assert Engine()._prefilter.automaton is HAVE_AUTOMATON
    assert Engine(automaton=False)._prefilter.automaton is False
    monkeypatch.setattr(literals, "HAVE_AUTOMATON", False)
    assert Engine()._prefilter.automaton is False  # the library missing: the pure-Python path


def corpus_lines() -> list[str]:
    out = []
    for d in ("corpus/nccl", "recorded"):
        for f in sorted((DATA / d).glob("*.log")):
            out += [x for x in f.read_text(errors="replace").splitlines() if not x.startswith("# ")]
    return out


def test_every_match_of_every_pattern_holds_one_of_its_anchors() -> None:
    """An anchor that a match can lack would hide that line from its rule: checked on every line
    of the corpus and the recordings, and on the lines each rule was written for."""
    e = Engine()
    lines = corpus_lines()
    checked = 0
    by_pattern: dict = {}
    for lit, entries in e._lit_items:
        for pat, _, _ in entries:
            by_pattern.setdefault(pat, []).append(lit)
    for pat, lits in by_pattern.items():
        for line in lines:
            if pat.search(line):
                checked += 1
                assert any(lit in line for lit in lits), (pat.pattern, lits, line)
    assert checked > 300


def test_an_alternation_anchors_on_its_branches_with_the_text_around_them() -> None:
    assert literals_of(r"(?:Bootstrap|NET/Socket) : Using .*lo") == ["Bootstrap : Using ", "NET/Socket : Using "]
    assert literals_of(r"(?:\.cc:|\.cu:)\d+ -> (\d+)") == [".cc:", ".cu:"]  # not " -> ": every Channel line has it
    assert literals_of(r"Call to recv from \S+ failed : (Broken pipe|Connection reset by peer)") == [
        " failed : Broken pipe", " failed : Connection reset by peer"]
    assert literals_of(r"wait (\d+)ms for a reply") == ["ms for a reply"]  # a group that is no alternation
    assert literals_of(r"(?:ab|c.d) xyzw") == [" xyzw"]  # a branch too short: the longest run


def test_a_pattern_can_be_anchored_on_a_rarer_part_of_its_matches() -> None:
    """wrong-interface reads `NET/Socket : Using [0]IF:ADDR`, which every rank prints: anchored on
    the bad interfaces' names instead, it is found by them, and matches as before, with its groups."""
    pat = r"(?:Bootstrap|NET/Socket) : Using .*\[\d\](docker\w*|virbr\w*):"
    rare = anchored_on(pat, r"\](?:docker|virbr)")
    assert literals_of(pat) == ["Bootstrap : Using ", "NET/Socket : Using "]
    assert literals_of(rare) == ["]docker", "]virbr"]
    lines = ["h:1:1 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>",
             "h:1:1 [0] NCCL INFO NET/Socket : Using [0]ens3:10.0.0.1<0>",
             "[1,0]<stdout>:h:2:2 [0] NCCL INFO Bootstrap : Using [0]virbr0:192.168.122.1<0>",
             "h:1:1 [0] NCCL INFO NET/Socket : Using [0]ens3:10.0.0.1<0> [1]docker0:172.17.0.1<0>",
             "docker0: h:1:1 [0] NCCL INFO NET/Socket : Using [0]ens3:10.0.0.1<0>"]
    found = [(m.groups() if (m := re.search(pat, x)) else None) for x in lines]
    assert found == [("docker0",), None, ("virbr0",), ("docker0",), None]
    assert [(m.groups() if (m := re.search(rare, x)) else None) for x in lines] == found
    # a pattern's own alternation stays inside it: `a|b` is "a or b anywhere", not ".*?a, or b first"
    assert re.search(anchored_on("a|b", "x"), "zzb x") and not re.search(anchored_on("a|b", "x"), "zzc x")


CHATTER = [x for x in (DATA / "corpus" / "nccl" / "90-healthy-socket-aws-64ranks.log").read_text().splitlines()
           if not x.startswith("# ")]


def chatter_then_events() -> list[str]:
    """A node's NCCL init chatter, many times over, then what must still be seen after it: a host
    that appears only now (its `via NET/IB` must count although `via NET/` is spent for the others),
    the requirement ib-not-detected waited for, and a failure."""
    lines = CHATTER * 60
    lines += ["late-host:1:1 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
              "late-host:1:1 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).",
              "ip-172-31-1-93:45294:45294 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",  # a known host's first
              "late-host:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0",
              "ip-172-31-1-93:45294:45294 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0"]
    lines += CHATTER * 5
    lines += ["ip-172-31-1-93:45294:45294 [0] misc/socket.cc:533 -> 2",
              "ip-172-31-1-93:45294:45294 [0] NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> returned "
              "113(No route to host) errno 115(Operation now in progress)"]
    return lines


def feed_both(bulk: Engine, one_by_one: Engine, lines: list[str], batch: int) -> None:
    """The same batches of node "n"'s lines to both: as text to `bulk`, line by line (every line
    through the gate, none skipped) to `one_by_one`."""
    for i in range(0, len(lines), batch):
        bulk.feed_text("n", "\n".join(lines[i:i + batch]))
        one_by_one._feed_lines(one_by_one._node("n"), i, lines[i:i + batch])
        one_by_one._after_batch()


@pytest.mark.parametrize("automaton", PATHS)
def test_spent_chatter_is_skipped_and_changes_no_finding(automaton: bool) -> None:
    """Lines whose every literal can no longer change anything on their node are not looked at
    in Python; what comes after them is judged exactly as by looking at every line."""
    lines = chatter_then_events()
    bulk, one_by_one = Engine(automaton=automaton), Engine(automaton=automaton)
    looked = []
    real_line = bulk._line
    bulk._line = lambda st, n, line, c: (looked.append(n), real_line(st, n, line, c))  # type: ignore[method-assign]
    for i in range(0, len(lines), 500):
        bulk.feed("n", lines[i:i + 500])
        one_by_one._feed_lines(one_by_one._node("n"), i, lines[i:i + 500])  # the same batches, line by line
        one_by_one._after_batch()
    want = [f.to_json() for f in one_by_one.finish()]
    assert [f.to_json() for f in bulk.finish()] == want
    ids = {f["id"] for f in want}
    assert {"ib-not-detected", "ib-socket-mismatch"} <= ids, ids  # the late host's IB met the others' Socket
    assert bulk.nodes["n"].transport["late-host"][:2] == ("IB", True)
    a, b = bulk.nodes["n"], one_by_one.nodes["n"]
    for fact in ("hosts", "seen", "version", "transport", "plugin", "nnodes_seen", "comm", "pending"):
        assert getattr(a, fact) == getattr(b, fact), fact  # every fact the cross rules compare, as line by line
    if automaton:  # the pure-Python path does not know which literals a line holds: it skips nothing
        assert len(looked) < len(lines) / 2, (len(looked), len(lines))


@pytest.mark.parametrize("automaton", PATHS)
def test_a_net_plugins_init_chatter_is_skipped_once_its_facts_are_known(automaton: bool) -> None:
    """Corpus 155 (a whole init, 2 x 8 H100, HPC-X's RDMA plugin): its channels say `via NET/NCCL RDMA
    Plugin v8/...`, its network `Using network NCCL RDMA Plugin v8`, every communicator `rank R
    nranks 16`: none can change a fact once each host has its own, and a larger communicator still
    does. The facts and findings are those of looking at every line."""
    _, body = split(DATA / "corpus" / "nccl" / "155-healthy-two-node-h100-hpcx-rdma-plugin.log")
    bigger = "lccn09:2520136:2520234 [0] NCCL INFO comm 0x5c2e9bbbb3f0 rank 0 nranks 32 cudaDev 0 - Init COMPLETE"
    lines = body * 4 + [bigger] + body
    bulk, one_by_one = Engine(automaton=automaton), Engine(automaton=automaton)
    looked = []
    real_line = bulk._line
    bulk._line = lambda st, n, line, c: (looked.append(line), real_line(st, n, line, c))  # type: ignore[method-assign]
    feed_both(bulk, one_by_one, lines, 300)
    assert [f.to_json() for f in bulk.finish()] == [f.to_json() for f in one_by_one.finish()] == []
    a, b = bulk.nodes["n"], one_by_one.nodes["n"]
    for fact in ("hosts", "seen", "version", "transport", "plugin", "nnodes_seen", "comm", "pending"):
        assert getattr(a, fact) == getattr(b, fact), fact
    assert a.comm["lccn09"][0] == 32 and a.comm["lccn19"][0] == 16
    if automaton:
        assert bigger in looked
        later = looked[looked.index(bigger) + 1:]  # the last copy of the log: every fact known by then
        assert not any("via NET/" in x or "Using network" in x or " nranks 16 " in x for x in later), later[:5]


@pytest.mark.parametrize("automaton", PATHS)
def test_a_hosts_repeated_interface_line_is_skipped_but_a_bad_interface_is_flagged(automaton: bool) -> None:
    """Each rank of a host prints `NET/Socket : Using [0]IF:ADDR`: once the host's transport is
    known the line can change no fact, and wrong-interface is anchored on the bad interfaces' names
    (a rule's `anchor`), so a good interface's copies meet no pattern at all; a rank that picked
    docker0 is still flagged, with the findings and facts of looking at every line."""
    good = "h1:{pid}:{pid} [0] NCCL INFO NET/Socket : Using [0]ens3:10.0.0.1<0>"
    lines = ["h1:7:7 [0] NCCL INFO NCCL version 2.18.1+cuda12.1"]
    lines += [good.format(pid=1000 + i) for i in range(400)]
    lines += ["h1:9:9 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>"]
    lines += [good.format(pid=2000 + i) for i in range(100)]
    bulk, one_by_one = Engine(automaton=automaton), Engine(automaton=automaton)
    whole, matched = [], []
    real_line, real_match = bulk._line, bulk._match
    bulk._line = lambda st, n, line, c: (whole.append(n), real_line(st, n, line, c))  # type: ignore[method-assign]
    bulk._match = lambda st, n, line, c: (matched.append(n), real_match(st, n, line, c))  # type: ignore[method-assign]
    feed_both(bulk, one_by_one, lines, 64)
    want = [f.to_json() for f in one_by_one.finish()]
    assert [f.to_json() for f in bulk.finish()] == want
    flagged = [f for f in want if f["id"] == "wrong-interface"]
    assert flagged and any("docker0" in e["text"] for e in flagged[0]["evidence"]), want
    a, b = bulk.nodes["n"], one_by_one.nodes["n"]
    for fact in ("hosts", "seen", "version", "transport", "plugin", "nnodes_seen", "comm", "pending"):
        assert getattr(a, fact) == getattr(b, fact), fact
    assert a.transport["h1"][:2] == ("Socket", False)
    docker = lines.index("h1:9:9 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>") + 1
    if automaton:  # the first interface line gives the host its transport; the copies meet nothing
        assert len(whole) <= 3, whole
        assert docker in matched and len(set(whole) | set(matched)) <= 3, (whole, matched)  # a line read whole is matched too


def test_a_literal_found_spent_is_looked_at_again_once_something_changed() -> None:
    """The engine remembers which literals it found spent, and the automaton skips those spent
    whatever the key, until something changes. Corpus 90's eight hosts each say `NET/IB : No device
    found`, which ib-not-detected keeps while it waits for its requirement: five lines fill the
    node's pending evidence, so in the log's second copy the literal is found spent at its first
    line and the other seven are skipped unseen; then the requirement comes and raises the finding,
    and the next such line must be judged again (found spent again: the finding holds its five
    lines). Findings and facts are those of looking at every line."""
    absent = [x for x in CHATTER if "NET/IB : No device found" in x]
    required = "ip-172-31-1-93:45294:45294 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0"
    lines = absent * 2 + [required] + absent * 2
    bulk, one_by_one = Engine(), Engine()
    judged = []
    real_live = bulk._live
    bulk._live = lambda st, line, held: (judged.append(line), real_live(st, line, held))[1]  # type: ignore[method-assign]
    feed_both(bulk, one_by_one, lines, 3)
    want = [f.to_json() for f in one_by_one.finish()]
    assert [f.to_json() for f in bulk.finish()] == want
    assert [f["id"] for f in want] == ["ib-not-detected"] and len(want[0]["evidence"]) == 5
    assert bulk.nodes["n"].seen == one_by_one.nodes["n"].seen
    # the first copy: each host's first line (read whole); then the first line of each copy after
    assert len(absent) == 8 and [x for x in judged if x != required] == absent + absent[:1] + absent[:1], judged


def test_the_reader_skips_a_literal_spent_for_a_lines_head_only_on_lines_with_its_marks() -> None:
    """`by_head` tells the automaton's reader literals spent for a line head (up to the first "] "):
    a line with that head is no candidate for them when it holds one of `marks`; a line of another
    head, a line without the marks, and a later literal of a skipped line's are read as ever."""
    lits = ["via NET/Socket/", "Init COMPLETE"]
    lines = ["h1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0",
             "h1:1:1 [0] via NET/Socket/1",  # the same head without NCCL's marks
             "h2:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [send] via NET/Socket/0",
             "h1:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] [send] via NET/Socket/1 Init COMPLETE",
             "h1:1:1 [0]NCCL via NET/Socket/2",  # no "] " before the literal: its head is not known
             "h1:1:1 [0] tag via NET/Socket/3 INFO done"]  # a mark later in the line, not right after the head
    text = "\n".join(lines)
    pf = Prefilter(lits, automaton=True)
    got = [(i, held) for i, _, _, held in pf.candidates(text, (), {"h1:1:1 [0]": {0}}, ("NCCL", " INFO "))]
    assert got == [(1, {0}), (2, {0}), (3, {1}), (4, {0})]
    assert [(i, held) for i, _, _, held in pf.candidates(text)] == [
        (0, {0}), (1, {0}), (2, {0}), (3, {0, 1}), (4, {0}), (5, {0})]


@pytest.mark.parametrize("automaton", PATHS)
def test_a_hosts_repeated_fact_line_is_skipped_by_its_head_until_a_new_host_or_a_change(automaton: bool) -> None:
    """A host's `Channel ... via NET/Socket/` lines say its transport once; once `_live` found the
    literal spent for the host a rank's head names, the reader skips that head's copies (without
    the line's key being worked out in Python). A new host's line is still read (its IB against the
    others' Socket is the finding), a line with the same head but none of NCCL's marks is filed
    under the node and read (and a head seen only on such lines is not told for a host), and after
    a change the head's next line is judged again. Findings and
    facts are those of looking at every line."""
    chan = "{h}:{p}:{p} [{r}] NCCL INFO Channel {c:02d}/0 : {r}[{r}] -> 9[9] [send] via NET/{t}/0"
    h1 = [chan.format(h="h1", p=100 + r, r=r, c=c, t="Socket") for c in range(32) for r in range(4)]
    h2 = [chan.format(h="h2", p=200, r=8, c=c, t="IB") for c in range(8)]
    bare = "h1:100:100 [0] Channel 99/0 : 0[0] -> 9[9] [send] via NET/Socket/0"  # no NCCL mark: the node's line
    version = "h1:100:100 [0] NCCL INFO NCCL version 2.18.1+cuda12.1"  # a fact: something changed
    lines = [version] + h1 + h2 + h1 + [bare] + h1 + [version.replace("h1:", "h3:")] + h1
    # a head first seen on lines without marks (spent for the node), then on a new host's marked line
    lines += [bare.replace("h1:100:100", "h4:400:400")] * 2 + [chan.format(h="h4", p=400, r=0, c=0, t="Socket")]
    bulk, one_by_one = Engine(automaton=automaton), Engine(automaton=automaton)
    between: list[list[str]] = [[]]  # the lines `_live` judged, between two changes
    real_live, real_moved = bulk._live, bulk._moved
    bulk._live = lambda st, line, held: (between[-1].append(line), real_live(st, line, held))[1]  # type: ignore[method-assign]
    bulk._moved = lambda: (between.append([]), real_moved())[1]  # type: ignore[method-assign]
    feed_both(bulk, one_by_one, lines, 50)
    want = [f.to_json() for f in one_by_one.finish()]
    assert [f.to_json() for f in bulk.finish()] == want
    assert "ib-socket-mismatch" in {f["id"] for f in want}, want
    a, b = bulk.nodes["n"], one_by_one.nodes["n"]
    for fact in ("hosts", "seen", "version", "transport", "plugin", "nnodes_seen", "comm", "pending"):
        assert getattr(a, fact) == getattr(b, fact), fact
    assert a.transport["n"][0] == "Socket" and a.transport["h2"][0] == "IB"  # the bare line was read
    assert a.hosts == {"h1", "h2", "h3", "h4"} and a.transport["h4"][0] == "Socket"
    if automaton:  # between two changes a head's marked line is judged once, its other copies skipped
        assert len(between) >= 6 and sum(map(len, between)) < 40, between
        for seen in between:
            heads = [x[:x.find("] ") + 1] for x in seen if "NCCL" in x]  # a line without marks is never skipped by head
            assert len(heads) == len(set(heads)), seen


def test_corpus_logs_mixed_shuffled_and_renamed_give_the_findings_and_facts_of_every_line() -> None:
    """The spent lines' memory (per node, key and head) against orders no single log has: three
    corpus logs at a time, repeated, some copies shuffled, some lines' NCCL marks taken out or their
    host renamed (a new host mid-stream, a head without marks), fed as text in batches of several
    sizes. Findings and facts are those of looking at every line; `hosts` may lack a host whose
    only lines were spent whatever the key (it decides nothing but which path its next lines take)."""
    rnd = random.Random(42)
    files = sorted((DATA / "corpus" / "nccl").glob("*.log"))
    for _ in range(12):
        body = [x for f in rnd.sample(files, 3) for x in split(f)[1]]
        lines = []
        for _ in range(rnd.randint(2, 4)):
            copy = body[:]
            if rnd.random() < 0.5:
                rnd.shuffle(copy)
            for x in copy:
                r = rnd.random()
                lines.append(x.replace("NCCL INFO ", "") if r < 0.05 else x.replace(":", "x:", 1) if r < 0.08 else x)
        bulk, one_by_one = Engine(), Engine()
        feed_both(bulk, one_by_one, lines, rnd.choice([1, 17, 400, 10**6]))
        assert [f.to_json() for f in bulk.finish()] == [f.to_json() for f in one_by_one.finish()]
        a, b = bulk.nodes["n"], one_by_one.nodes["n"]
        for fact in ("seen", "version", "transport", "plugin", "nnodes_seen", "comm", "pending", "network"):
            assert getattr(a, fact) == getattr(b, fact), fact
        assert a.hosts <= b.hosts
