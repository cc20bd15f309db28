"""The engine's bulk prefilter (literals.py): the automaton (pyahocorasick) and the pure-Python
path give the same candidate lines, and the engine gives the same findings by either path, and
the same as looking at the batch line by line, on every job of the corpus (split into batches
of several sizes, with colours, fed as lines or as text)."""

from __future__ import annotations

import random

import pytest

from ddptui.core.diagnosis import literals
from ddptui.core.diagnosis.engine import Engine
from ddptui.core.diagnosis.literals import HAVE_AUTOMATON, Prefilter
from tests.core.test_diagnosis_corpus import CONTEXT, GROUPS, split

PATHS = [pytest.param(True, id="automaton", marks=pytest.mark.skipif(not HAVE_AUTOMATON, reason="no pyahocorasick")),
         pytest.param(False, id="pure-python")]


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
        if HAVE_AUTOMATON:
            ac = list(Prefilter(lits, automaton=True).candidates(text))
            assert [(i, held) for i, _, _, held in ac] == want
            assert [c[:3] for c in ac] == [c[:3] for c in py]


def test_the_default_path_follows_the_library_and_can_be_forced(monkeypatch) -> None:
    assert Engine()._prefilter.automaton is HAVE_AUTOMATON
    assert Engine(automaton=False)._prefilter.automaton is False
    monkeypatch.setattr(literals, "HAVE_AUTOMATON", False)
    assert Engine()._prefilter.automaton is False  # the library missing: the pure-Python path
