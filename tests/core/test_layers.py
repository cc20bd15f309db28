"""The house rules that an import can break: core is free of textual and rich; nothing imports torch."""

import subprocess
import sys

CORE_MODULES = [
    "ddptui.core.playbook.loader", "ddptui.core.runbook", "ddptui.core.transport.local", "ddptui.core.transport.ssh",
    "ddptui.core.transport.factory", "ddptui.core.launch.plan",
    "ddptui.core.logs.rundir", "ddptui.core.logs.classify", "ddptui.core.checks.software", "ddptui.cli",
]


def _loaded_after(imports: list[str]) -> set[str]:
    code = "import sys\n" + "".join(f"import {m}\n" for m in imports) + "print(' '.join(sorted(sys.modules)))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    return set(r.stdout.split())


def test_core_imports_neither_textual_nor_rich():
    loaded = _loaded_after(CORE_MODULES)
    assert "ddptui.core.runbook" in loaded
    assert not {m for m in loaded if m.split(".")[0] in ("textual", "rich")}


def test_the_tui_process_never_imports_torch():
    loaded = _loaded_after(["ddptui.ui.app", "ddptui.cli"])
    assert "textual.app" in loaded
    assert "torch" not in loaded


def test_import_contracts_hold():
    """pyproject's [tool.importlinter] contracts: core below ui, workloads imported by nothing,
    the UI never reaching into a transport."""
    import shutil
    from pathlib import Path

    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is not installed (pip install -e '.[test]')"
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([exe], cwd=root, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout
