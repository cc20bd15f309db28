"""From a file to a YAML node tree, refusing what must never reach the loader's field readers.

- only a regular file of at most MAX_BYTES is read (a FIFO would hang, /dev/zero would fill memory);
- characters YAML or a terminal should not see (control characters, lone surrogates, U+FFFE/F) are
  reported with their position, whether written raw or as a double-quoted escape like "\\0";
- explicit tags are refused (`!!python/object`, `!foo`, `!!int abc`): a playbook needs none, and
  each is a way to make the constructor raise or do more than read data;
- nesting deeper than MAX_DEPTH is refused before the composer, which recurses, ever sees it;
- a plain scalar that looks like a number or a date but is none (`2001-13-45`, `0x_`) is reported
  instead of raising from inside the constructor.

Each raises PlaybookError with every problem of its kind, each with its `path:line:col`.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import PlaybookError, Problem

MAX_BYTES = 1 << 20  # a playbook is a page of YAML; 1 MiB is generous
MAX_DEPTH = 50  # a playbook nests four levels deep
MAX_REPORTED = 20  # problems of one kind shown before "and N more"
MAX_INT_BITS = 4096  # ints beyond this cannot even be printed in decimal (Python's 4300-digit limit)
YAML_TAG = "tag:yaml.org,2002:"
STR_TAG = YAML_TAG + "str"
# What YAML itself accepts in a document, less nothing: C0/C1 controls (tab and line breaks aside),
# DEL, lone surrogates, U+FFFE and U+FFFF.
_BAD_CHAR = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# libyaml's parser where PyYAML was built with it (its wheels are): the same events and nodes with
# their marks, 10-20x faster than PyYAML's own. A file it refuses is read again by PyYAML's, whose
# messages are the ones users get (libyaml's differ: a lone surrogate escape is "found invalid
# Unicode character escape code" to it, where ours names the character at the scalar's start).
_FAST = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "timestamp": "a date"}


def _problem(path: str, text: str, offset: int, message: str, hint: str = "") -> Problem:
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    src = text[start:end if end >= 0 else len(text)].rstrip("\r")
    return Problem(path, line, offset - start + 1, message, hint, _BAD_CHAR.sub("\ufffd", src))


def _at(path: str, lines: list[str], mark: yaml.Mark | None, message: str, hint: str = "") -> Problem:
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    return Problem(path, line, col, message, hint, _BAD_CHAR.sub("\ufffd", src))


def fail(path: str, problems: list[Problem], limit: int = MAX_REPORTED) -> PlaybookError:
    """PlaybookError with the first `limit` problems and a line saying how many more there were."""
    if len(problems) > limit:
        last = problems[limit - 1]
        problems = problems[:limit] + [Problem(path, last.line, last.col, f"and {len(problems) - limit:,} more problems")]
    return PlaybookError(path, problems)


def _char_name(ch: str) -> str:
    code = ord(ch)
    if 0xD800 <= code <= 0xDFFF:
        return f"a lone surrogate U+{code:04X} (half of a character)"
    if code in (0xFFFE, 0xFFFF):
        return f"U+{code:04X}, which is not a character"
    return f"the control character U+{code:04X}"


def read_text(path: str | Path) -> str:
    """The text of a playbook file: a regular file of at most MAX_BYTES, in UTF-8."""
    where = str(path)

    def fail(message: str, hint: str = "") -> PlaybookError:
        return PlaybookError(where, [Problem(where, 1, 1, message, hint)])

    try:  # O_NONBLOCK: opening a FIFO with no writer must not hang before we can see it is one
        fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if os.path.islink(where):
            raise fail(f"is a symbolic link to {os.readlink(where)}, which does not exist") from None
        raise fail("no such file") from None
    except OSError as e:
        raise fail(f"cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise fail("is a folder, not a playbook file")
        if not stat.S_ISREG(st.st_mode):
            raise fail("is not a regular file (a pipe, a device or a socket): ddptui reads playbooks "
                       "only from regular files", "save the playbook to a file and give its path")
        if st.st_size > MAX_BYTES:
            raise fail(f"is {st.st_size:,} bytes; a playbook may be at most {MAX_BYTES:,} bytes (1 MiB)")
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:
            raise fail(f"is more than {MAX_BYTES:,} bytes; a playbook may be at most 1 MiB")
    except OSError as e:
        raise fail(f"cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        head = data[: e.start].decode("utf-8", "replace")
        raise PlaybookError(where, [_problem(where, head + "\ufffd", len(head),
                                             f"not UTF-8: byte 0x{data[e.start]:02x} cannot start or continue a character",
                                             "save the file as UTF-8")]) from None


def check_characters(text: str, path: str) -> None:
    """Raise if the raw text holds characters YAML refuses (its ReaderError has no line or column)."""
    problems = [_problem(path, text, m.start(), f"{_char_name(m.group())} is not allowed in a playbook",
                         "delete it (it often comes from copying out of a terminal)")
                for _, m in zip(range(MAX_REPORTED + 1), _BAD_CHAR.finditer(text))]
    if problems:
        raise fail(path, problems)


def _events_ok(text: str, path: str, lines: list[str], loader: type) -> None:
    """One pass over the parser's events, which recurses nowhere: explicit tags and nesting depth."""
    problems: list[Problem] = []
    depth = 0
    for ev in yaml.parse(text, Loader=loader):
        tag = getattr(ev, "tag", None)
        if tag is not None:
            shown = "!!" + tag[len(YAML_TAG):] if tag.startswith(YAML_TAG) else tag
            problems.append(_at(path, lines, ev.start_mark, f"YAML tags are not allowed in a playbook ({shown})",
                                "remove the tag; quote the value if it is meant as text"))
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                problems.append(_at(path, lines, ev.start_mark, f"nested more than {MAX_DEPTH} levels deep",
                                    "a playbook nests a few levels; check the brackets"))
                break
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1
    if problems:
        raise fail(path, problems)


def _scalars_ok(root: Node, path: str, lines: list[str]) -> None:
    """Every scalar constructs, is free of forbidden characters and holds a printable number."""
    problems: list[Problem] = []
    constructor = SafeConstructor()
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias: the same node again (and again: a billion laughs)
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            stack.extend(n for pair in reversed(node.value) for n in reversed(pair))
            continue
        if isinstance(node, SequenceNode):
            stack.extend(reversed(node.value))
            continue
        if not isinstance(node, ScalarNode):
            continue
        bad = _BAD_CHAR.search(node.value)
        if bad:
            problems.append(_at(path, lines, node.start_mark, f"{_char_name(bad.group())} is not allowed in a value",
                                "remove the escape that writes it"))
            continue
        kind = node.tag.rsplit(":", 1)[-1]
        if kind in ("value", "merge"):  # `=` and `<<` alone: text, as anyone would read them
            node.tag = STR_TAG
            continue
        try:
            val = constructor.construct_object(node)
        except (yaml.YAMLError, ValueError, TypeError, KeyError, AttributeError, OverflowError) as e:
            why = str(e).split("\n")[0]
            msg = (f"a number with {len(node.value):,} digits is too large" if "digits" in why else
                   f"{node.value[:40]!r} looks like {_WORDS.get(kind, kind)} but is not one ({why})")
            problems.append(_at(path, lines, node.start_mark, msg, "quote it if it is meant as text"))
            continue
        if isinstance(val, int) and val.bit_length() > MAX_INT_BITS:
            problems.append(_at(path, lines, node.start_mark, f"a number with {len(node.value):,} digits is too large",
                                "quote it if it is meant as text"))
    if problems:
        problems.sort(key=lambda p: (p.line, p.col))
        raise fail(path, problems)


def _tree(text: str, path: str, lines: list[str], loader: type) -> Node | None:
    _events_ok(text, path, lines, loader)  # before the composer, which recurses
    return yaml.compose(text, Loader=loader)


def compose(text: str, path: str) -> Node | None:
    """The document's node tree (None when empty), or PlaybookError with where and why."""
    check_characters(text, path)
    lines = text.splitlines()
    try:
        try:
            root = _tree(text, path, lines, _FAST)
        except yaml.YAMLError:
            if _FAST is yaml.SafeLoader:
                raise
            root = _tree(text, path, lines, yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise PlaybookError(path, [_at(path, lines, mark, f"YAML syntax error: {e.problem or e.context}",
                                       "check the indentation and quoting")]) from None
    except yaml.YAMLError as e:  # not marked: the reader's own errors, which check_characters forestalls
        raise PlaybookError(path, [_at(path, lines, None, f"YAML error: {str(e).splitlines()[0]}")]) from None
    if root is not None:
        _scalars_ok(root, path, lines)
    return root
