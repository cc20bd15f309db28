"""Shared fixtures. Tests never read ../shared: everything they need is under tests/data."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
VENV_BIN = Path(sys.executable).parent


def ddptui_exe() -> str:
    """The installed `ddptui` console script of the interpreter running the tests."""
    exe = VENV_BIN / "ddptui"
    if exe.exists():
        return str(exe)
    found = shutil.which("ddptui")
    if not found:
        pytest.fail("the ddptui command is not installed (pip install -e .)")
    return found


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    return d


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the user's real config and data folders out of every test."""
    monkeypatch.setenv("DDPTUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("DDPTUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DDPTUI_CACHE_DIR", str(tmp_path / "cache"))  # the clipboard file


def has_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


needs_torch = pytest.mark.skipif(not has_torch() and not os.environ.get("CI"),
                                 reason="torch is not installed in this venv (CI installs it)")


def pytest_terminal_summary(terminalreporter) -> None:
    """The diagnosis corpus score, when test_corpus_score ran (shown with or without -s)."""
    mod = sys.modules.get("tests.core.test_diagnosis_corpus")
    line = getattr(mod, "SCORE_LINE", "")
    if line:
        terminalreporter.write_line(line)
