"""A batch script read the way bash and sbatch read it, for `ddptui sbatch --check` (lint.py).

`\\` continuations and open quotes join physical lines into one logical line, comments are dropped
(outside quotes only), each command is split into words with shlex, and a `bash -c '...'` string is
read as the command it runs. `$VAR` is "expanded in the batch shell" when it is neither
single-quoted nor escaped. Written by hand: bashlex and the like parse bash, but neither keeps the
quoting state that says which `$SLURM_*` the batch shell expands, nor reads srun's options.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

TASK_VAR = re.compile(r"\$(?:\{)?(SLURM_NODEID|SLURM_PROCID|SLURM_LOCALID)\b")
SEPARATORS = {";", "&", "&&", "|", "||", "(", ")", ";;", "|&"}
KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "for", "!", "time", "{", "}", "fi", "done"}
# srun/sbatch options whose value may be the next word (`-w NODE`, `--nodes 1`)
VALUE_SHORT = set("AbcCdDeGiJLmMnNopqrSTtWwx")
VALUE_LONG = {"--nodes", "--ntasks", "--nodelist", "--ntasks-per-node", "--output", "--error", "--export",
               "--partition", "--time", "--job-name", "--chdir", "--gres", "--gpus", "--gpus-per-node",
               "--gpus-per-task", "--cpus-per-task", "--mem", "--exclude", "--constraint", "--account", "--qos",
               "--wait", "--jobid", "--mpi", "--cpu-bind", "--distribution", "--input", "--dependency"}
HELD = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")  # a word that is one variable: $CMD, ${CMD}
# a word that is only an expansion ("${ARGS[@]}", $OPTS): what it holds is not known before the job runs
OPAQUE = re.compile(r'^"?\$\{?[A-Za-z_][A-Za-z0-9_]*(?:\[[@*]\])?\}?"?$')


@dataclass
class Line:
    start: int  # 1-based number of its first physical line
    raw: str  # the first physical line as written
    code: str  # the logical line without its comment
    batch_vars: list[tuple[str, int]]  # ($SLURM_* task variables the batch shell expands, offset in code)


@dataclass
class Command:
    line: Line
    words: list[str]  # the command's words, leading assignments and keywords dropped
    assigns: list[str]  # NAME=value words before the command (or after `export`)
    background: bool
    in_loop: bool


def scan_code(text: str) -> tuple[str, list[tuple[str, int]]]:
    """The text up to its comment, and the task variables expanded outside single quotes and not
    escaped. Tracks '...', "...", $( ... ) nesting, backslashes."""
    stack = ["n"]  # n: plain, s: single, d: double, c: $( ) inside double quotes
    out_vars: list[tuple[str, int]] = []
    i, n = 0, len(text)
    while i < n:
        ch, st = text[i], stack[-1]
        if st == "s":
            if ch == "'":
                stack.pop()
            i += 1
            continue
        if ch == "\\":
            i += 2
            continue
        if ch == "$":
            m = TASK_VAR.match(text, i)
            if m:
                out_vars.append((m.group(1), i))
            if text.startswith("$(", i) and st == "d":
                stack.append("c")
                i += 2
                continue
        if st == "d":
            if ch == '"':
                stack.pop()
        elif ch == "'":
            stack.append("s")
        elif ch == '"':
            stack.append("d")
        elif ch == ")" and st == "c":
            stack.pop()
        elif ch == "#" and (i == 0 or text[i - 1] in " \t;&|()"):
            return text[:i], out_vars
        i += 1
    return text, out_vars


def read_lines(text: str) -> list[Line]:
    phys = text.splitlines()
    out: list[Line] = []
    i = 0
    while i < len(phys):
        start, buf = i, phys[i]
        while True:
            if buf.endswith("\\") and (len(buf) - len(buf.rstrip("\\"))) % 2 == 1 and i + 1 < len(phys):
                i += 1
                buf = buf[:-1] + " " + phys[i]
                continue
            code, task_vars = scan_code(buf)
            try:
                shlex.split(code)
            except ValueError:  # an open quote: the string goes on on the next line
                if i + 1 < len(phys):
                    i += 1
                    buf += "\n" + phys[i]
                    continue
            break
        out.append(Line(start + 1, phys[start], code, task_vars))
        i += 1
    return out


def split_words(code: str) -> list[str]:
    lex = shlex.shlex(code, posix=True, punctuation_chars=";&|()")
    lex.whitespace_split = True
    lex.commenters = ""
    try:
        return list(lex)
    except ValueError:
        return code.split()


def read_commands(lines: list[Line]) -> list[Command]:
    cmds: list[Command] = []
    loops = 0
    for ln in lines:
        words = split_words(ln.code)
        cur: list[str] = []
        for w in words + [";"]:
            if w not in SEPARATORS:
                cur.append(w)
                continue
            while cur and cur[0] in KEYWORDS:
                kw = cur.pop(0)
                if kw in ("for", "while", "until"):
                    loops += 1
                    cur = [] if kw == "for" else cur  # `for X in LIST`: no command here
                elif kw == "done":
                    loops = max(0, loops - 1)
            assigns = []
            if cur and cur[0] in ("export", "declare", "local", "readonly"):
                assigns = [a for a in cur[1:] if "=" in a and not a.startswith("-")]
                cur = []
            while cur and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", cur[0]):
                assigns.append(cur.pop(0))
            while cur and cur[0] in ("exec", "command", "nohup"):  # `exec srun ...` runs srun
                cur.pop(0)
            if cur and cur[0].rsplit("/", 1)[-1] == "srun":  # /usr/bin/srun is srun
                cur[0] = "srun"
            if cur or assigns:
                cmds.append(Command(ln, cur, assigns, background=w == "&", in_loop=loops > 0))
            cur = []
    return cmds


def read_options(words: list[str]) -> tuple[list[tuple[str, str | None]], list[str]]:
    """A Slurm command's options as (name, value) and the rest (the program and its arguments)."""
    opts: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words) and (words[i].startswith("-") or (
            OPAQUE.match(words[i]) and i + 1 < len(words) and words[i + 1].startswith("-"))):
        w = words[i]
        if not w.startswith("-"):  # `srun "${RESUME_ARGS[@]}" -l ...`: options may follow an array's expansion
            i += 1
            continue
        if w.startswith("--"):
            name, eq, val = w.partition("=")
            if not eq and name in VALUE_LONG and i + 1 < len(words):
                i += 1
                val = words[i]
            opts.append((name, val if (eq or name in VALUE_LONG) else None))
        else:
            name, val = w[:2], w[2:] or None
            if val is None and w[1:2] in VALUE_SHORT and i + 1 < len(words):
                i += 1
                val = words[i]
            opts.append((name, val))
        i += 1
    return opts, words[i:]


def program_words(rest: list[str], held: dict[str, str]) -> list[str]:
    """A program's words: a `bash -c STRING` read as the words of STRING (behind a container's `run
    IMAGE` too), each word that is only a variable the script set (`CMD="torchrun ..."`) as its value."""
    rest = expand(rest, held)
    for i in range(len(rest) - 2):
        if rest[i].rsplit("/", 1)[-1] in ("bash", "sh") and rest[i + 1] == "-c":
            return rest[:i + 2] + expand(split_words(scan_code(rest[i + 2])[0]), held) + rest[i + 3:]
    return rest


def expand(words: list[str], held: dict[str, str], depth: int = 4) -> list[str]:
    """Each word that is one variable the script set, as the words of its value (theirs too, a few
    levels deep: LAUNCHER="torchrun --nproc_per_node $GPUS_PER_NODE ..."); any other word as it is."""
    out: list[str] = []
    for w in words:
        m = HELD.match(w)
        if m and m.group(1) in held and depth:
            out += expand(split_words(held[m.group(1)]), held, depth - 1)
        else:
            out.append(w)
    return out
