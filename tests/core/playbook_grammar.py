"""Playbooks from a grammar of valid and hostile YAML pieces, and what `ddptui validate` made of each.

Shared by tests/core/test_playbook_fuzz.py (a minute in CI) and bench/fuzz_playbooks.py (12,000
examples, nightly or by hand). `ddptui.cli.main` runs in-process; stdout encodes strictly, as a
terminal's does, and stderr with backslashreplace, as Python's own.

Every example must end in exit 0 (`: ok`) or exit 2 with `path:line:col: message`: never an
exception out of main, never exit 1.
"""

from __future__ import annotations

import io
import re
import traceback
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from hypothesis import strategies as st

TOP = ["name", "description", "nodes", "master", "transport", "job", "steps", "ssh", "redact", "bandwidth"]
JOB = ["script", "args", "nproc_per_node", "master_port", "rendezvous", "backend", "workdir", "python", "env",
       "rdzv_id", "rdzv_timeout", "rdzv_read_timeout", "master_wait_timeout", "stop_grace", "tee"]
NODE = ["name", "host", "user", "port", "transport", "nproc_per_node", "env", "python", "workdir"]
STEP = ["id", "kind", "title", "timeout", "run", "nodes"]
KINDS = ["connect", "check", "launch-master", "wait-master", "launch-workers", "watch", "shell"]

TAGS = ["!!python/object:os.system", "!!python/name:os.system", "!foo", "!!map", "!!int abc", "!!bool maybe",
        "!!timestamp junk", "!", "!!str", "!!float x", "!!binary ===", "!!set", "!!omap"]
ESCAPES = ["\\0", "\\x1b", "\\ud800", "\\udfff", "\\U0001F600", "\\t", "\\n", "\\x7f", "\\x85", "\\uffff", "\\e",
           "\\a", "\\N", "\\L", "\\_"]
NUMBERS = ["0", "1", "-1", "2", "65535", "65536", "29500", ".inf", "-.inf", ".nan", "1.0e+300", "1e300",
           "1" + "0" * 400, "1" * 5000, "0x_", "0b_", "0x" + "f" * 2000, "1:00:00", "3.5", "-0.0", "1_000",
           "2001-12-14", "2001-13-45", "2001-12-14t21:59:43.10-05:00", "604800", "604801", "~", "null", "yes",
           "no", "on", "true", "=", "<<"]
HOSTLISTS = ["n[0-100000][0-100000]", "n[1-4096]", "n[1-4097]", "node[02-04]", "gpu[1,3-4]-ib", "a,b", "a,a",
             "n[5-1]", "n[", "n]", "n[1-2", "a b", "-oProxyCommand=x", "a;id", "a$(id)", "a/b", "a:b,a_b",
             "localhost", "fe80::1%eth0", "n[" + "1" * 20 + "]", "n[1-3][1-3][1-3]", "x" * 300, "A,a", "n[1,1]"]
WORDS = ["builtin:smoke", "builtin:nope", "train.py", "localhost", "ssh", "local", "static", "c10d", "gloo", "nccl",
         "auto", "python3", "/no/such/python", "~nosuchuser4711/x", "~/x", "/tmp", "a" * 5000, "a/" * 2500,
         "s" * 300 + ".py", "NCCL_DEBUG", "1BAD", "connect", "shell", "ok", "échec", "名前", "\U0001F600"]


def _quoted(parts: list[str]) -> str:
    return '"' + "".join(parts).replace('"', '\\"') + '"'


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=12)
RAW_CHARS = st.sampled_from(["\x00", "\x01", "\x1b", "\x7f", "\x9b", "\ud800", "\ufeff", "\u2028", "\t"])

hostile = st.one_of(
    st.sampled_from(NUMBERS),
    st.sampled_from(HOSTLISTS),
    st.sampled_from(WORDS),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=False).map(repr),
    st.builds(lambda t, v: f"{t} {v}", st.sampled_from(TAGS), st.sampled_from(["x", "1", "[a]", "{a: 1}", ""])),
    st.lists(st.one_of(st.sampled_from(ESCAPES), _TEXT), min_size=1, max_size=4).map(_quoted),
    st.builds(lambda a, c, b: a + c + b, _TEXT, RAW_CHARS, _TEXT),
    st.integers(min_value=1, max_value=600).map(lambda k: "[" * k + "]" * k),
    st.integers(min_value=1, max_value=80).map(lambda k: "{a: " * k + "1" + "}" * k),
)
_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=10)
sane = st.one_of(
    _WORD, st.integers(min_value=1, max_value=70000).map(str), st.sampled_from(["true", "false", "2.5", "30"]),
    _TEXT.map(lambda t: "'" + t.replace("'", "''") + "'"),
)


def _mostly(good: st.SearchStrategy[str], bad: st.SearchStrategy[str] = hostile) -> st.SearchStrategy[str]:
    """`good` nine times in ten: one hostile piece anywhere refuses the whole playbook, so they stay rare."""
    return st.integers(0, 9).flatmap(lambda r: bad if r == 0 else good)


scalars = _mostly(sane)


def _flow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    keys = _mostly(st.sampled_from(TOP + JOB + NODE + STEP + ["<<", "? x", "NAME", "A_1"]))
    return st.one_of(
        st.lists(children, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(st.tuples(keys, children), max_size=4).map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"),
    )


values = st.recursive(scalars, _flow, max_leaves=8)
_seconds = st.sampled_from(["1", "30", "2.5", "604800", "900"])
_env = st.dictionaries(_mostly(st.sampled_from(["A", "NCCL_DEBUG", "OMP_NUM_THREADS"])), scalars, max_size=3).map(
    lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}")
_args = st.lists(scalars, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
GOOD = {  # a value of the right shape for each key
    "script": st.sampled_from(["builtin:smoke", "builtin:smoke", "train.py", "/tmp/x.py"]), "args": _args,
    "nproc_per_node": st.sampled_from(["1", "2", "8"]), "master_port": st.sampled_from(["29500", "1", "65535"]),
    "rendezvous": st.sampled_from(["static", "c10d"]), "backend": st.sampled_from(["auto", "gloo", "nccl"]),
    "workdir": st.sampled_from(["/tmp", "~/x", "."]), "python": st.sampled_from(["python3", "/usr/bin/python3"]),
    "env": _env, "rdzv_id": _WORD, "rdzv_timeout": st.sampled_from(["1", "900"]), "rdzv_read_timeout": _seconds,
    "master_wait_timeout": _seconds, "stop_grace": _seconds, "tee": st.sampled_from(["true", "false"]),
    "name": st.sampled_from(["localhost", "gpu01", "node-2", "h.example.org"]), "host": st.sampled_from(
        ["127.0.0.1", "localhost", "fe80::1%eth0"]), "user": st.sampled_from(["root", "svc.train@corp"]),
    "port": st.sampled_from(["22", "2222"]), "transport": st.sampled_from(["local", "ssh"]),
    "id": _WORD, "kind": st.sampled_from(KINDS), "title": sane, "timeout": _seconds, "run": st.just("'true'"),
    "nodes": st.sampled_from(["localhost", "[localhost]"]), "connect_timeout": _seconds,
    "command_timeout": _seconds, "keepalive": st.sampled_from(["1", "15"]), "min_busbw_gbps": _seconds,
}


def _mapping(keys: list[str]) -> st.SearchStrategy[str]:
    pair = st.sampled_from(keys).flatmap(lambda k: st.tuples(_mostly(st.just(k)), _mostly(GOOD.get(k, sane), values)))
    return st.lists(pair, max_size=len(keys)).map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}")


nodes = st.one_of(
    _mostly(st.sampled_from(["localhost", "[localhost]", "n[1-3]"]), st.sampled_from(HOSTLISTS)),
    st.lists(st.one_of(_mostly(st.sampled_from(["localhost", "a"]), st.sampled_from(HOSTLISTS)), _mapping(NODE)),
             min_size=0, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
    _mostly(st.just("localhost"), st.one_of(values, st.just("[&h 'n[1-4000]', *h, *h]"))),
)
steps = st.one_of(
    st.lists(st.one_of(st.sampled_from(KINDS), _mapping(STEP)), max_size=5).map(lambda xs: "[" + ", ".join(xs) + "]"),
    values,
)
SECTIONS = {"nodes": nodes, "job": _mapping(JOB).map(lambda m: "{script: builtin:smoke, " + m[1:] if m != "{}" else m),
            "steps": steps, "ssh": _mapping(["connect_timeout", "command_timeout", "keepalive"]),
            "bandwidth": _mapping(["min_busbw_gbps"]), "redact": _mostly(st.just("[A, B]"), values),
            "master": _mostly(st.sampled_from(["localhost", "a", "n1"]), values), "description": _mostly(sane, values),
            "name": _mostly(_WORD, values), "transport": _mostly(st.sampled_from(["local", "ssh"]), values)}


@st.composite
def playbooks(draw: st.DrawFn) -> str:
    """A playbook's text: mostly the right shape, with hostile pieces anywhere."""
    base = {"name": "fuzz", "nodes": "localhost", "transport": "local", "job": "{script: builtin:smoke}"}
    lines = []
    for key in draw(st.permutations(TOP)):
        roll = draw(st.integers(0, 9))  # a key of the base: 6 in 10 good, 2 fuzzed, 2 left out; others 3 in 10 fuzzed
        if key in base and roll < 6:
            lines.append(f"{key}: {base[key]}")
        elif roll >= 7 or (key in base and roll == 6):
            lines.append(f"{key}: {draw(SECTIONS.get(key, values))}")
    if draw(st.integers(0, 9)) == 0:
        lines.append(f"{draw(scalars)}: {draw(values)}")
    text = "\n".join(lines) + "\n"
    for _ in range(draw(st.sampled_from([0, 0, 0, 0, 0, 0, 1, 1, 2]))):  # the text itself bent, now and then
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:at] + draw(st.sampled_from(list("[]{}:,'\"&*!|>%@`- \t#\n\x00\x1b\ud800"))) + text[at:]
        else:
            text = text[:at] + text[at + 1:]
    return text


_WHERE = re.compile(r":(\d+):(\d+): \S")


def validate(path: Path, text: str) -> tuple[str, str]:
    """(outcome, detail). outcome: ok | refused | traceback | exit-N | no-position."""
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    from ddptui.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(["validate", str(path)])
            out.flush()
            err.flush()
    except BaseException as e:  # noqa: BLE001 - what escapes main is exactly what we look for
        if isinstance(e, KeyboardInterrupt):
            raise
        return "traceback", "".join(traceback.format_exception(e))[-3000:]
    stdout, stderr = out.buffer.getvalue().decode(), err.buffer.getvalue().decode()
    if "Traceback" in stdout + stderr:
        return "traceback", stderr[-3000:]
    if rc == 0:
        return ("ok", "") if ": ok" in stdout else ("no-position", stdout)
    if rc != 2:
        return f"exit-{rc}", stderr[-3000:]
    first = stderr.splitlines()[0] if stderr else ""
    if not first.startswith(f"{path}:") or not _WHERE.match(first[len(str(path)):]):
        return "no-position", stderr[-3000:]
    return "refused", first[len(str(path)) + 1:]


def tally(counts: Counter, outcome: str, detail: str) -> None:
    counts[outcome] += 1
    if outcome == "refused":  # the kind of problem, without its position and values
        counts["  " + re.sub(r"'[^']*'|\d[\d,]*", "_", detail.split(": ", 1)[-1])[:70]] += 1
