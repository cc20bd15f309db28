"""Size limits CI checks: no module under tui/ddptui/ over 400 lines, no class over 250 lines."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "tui" / "ddptui"
MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 250
# Over the limits before the limits existed, and being rewritten elsewhere: listed so nothing else
# grows past them. Remove an entry once its module or class is back under the limit.
KNOWN_LONG: set[str] = set()


def _modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def test_no_module_is_too_long() -> None:
    long = {name: n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
            and (name := str(p.relative_to(PKG))) not in KNOWN_LONG}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_class_is_too_long() -> None:
    long = {}
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                name = f"{p.relative_to(PKG)}:{node.name}"
                if (n := node.end_lineno - start + 1) > MAX_CLASS_LINES and name not in KNOWN_LONG:
                    long[name] = n
    assert not long, f"classes over {MAX_CLASS_LINES} lines: {long}"
