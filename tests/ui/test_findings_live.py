"""The live Findings tab shows what the run's verdict says: a finding that a better explanation
raised later covers (the catalog's `suppresses`) leaves the tab, as it is left out of summary.json,
`diagnose` and the report. Checked on every recorded log of the corpus, fed to the real engine, whose
findings reach the tab one by one as they are raised, as a run's do."""

from __future__ import annotations

from pathlib import Path

from ddptui.core.diagnosis.engine import Engine
from ddptui.ui.app import DdptuiApp
from ddptui.ui.widgets.findings import FindingsTab
from tests.conftest import DATA
from tests.ui import scenes

LOGS = sorted((DATA / "corpus" / "nccl").glob("*.log"))


async def test_the_tab_drops_a_finding_once_a_better_explanation_covers_it(tmp_path: Path) -> None:
    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    covered: list[str] = []  # the logs where a finding raised first was covered later
    async with app.run_test(size=(160, 45)) as pilot:
        tab = app.screen.query_one(FindingsTab)
        await pilot.press("4")
        for log in LOGS:
            tab.clear("no findings")
            raised: list[str] = []

            def changed(f, raised=raised) -> None:
                raised.append(f.id)
                tab.add(f)

            engine = Engine(on_change=changed)
            engine.feed_text("node01", log.read_text(encoding="utf-8", errors="replace"))
            verdict = engine.finish()
            shown = {f.id for f in tab.findings}
            assert shown == {f.id for f in verdict}, log.name
            label = str(tab.query_ancestor("TabbedContent").get_tab(tab).label)
            errors = sum(1 for f in verdict if f.severity == "error" and f.active)
            assert (f"{errors}E" in label) == bool(errors), (log.name, label)
            if set(raised) - shown:
                covered.append(log.name)
        await pilot.pause()
    print(f"{len(covered)} of {len(LOGS)} logs raised a finding a later one covers: {covered}")
    assert covered, "no log of the corpus raised a finding that a later one covers: the test checks nothing"


async def test_the_cause_comes_first_whatever_was_raised_after_it(tmp_path: Path) -> None:
    """A run where rank 0's GPU failed (corpus 330's lines, CUDA's uncorrectable ECC error) and the
    other node's torchrun then met its exit barrier closed (information on a node that did not fail):
    the error is the first row and the one selected, so `f` and the detail are the cause's; the
    information follows, a resolved finding last, newest first within each."""
    from dataclasses import replace

    from ddptui.core.diagnosis.catalog import finding
    from ddptui.core.diagnosis.model import Evidence

    app = DdptuiApp(playbook=scenes.write_playbook(tmp_path), runs_dir=tmp_path / "runs")
    async with app.run_test(size=(100, 30)) as pilot:
        tab = app.screen.query_one(FindingsTab)
        await pilot.press("4")
        ev = Evidence("n0", 1, "[default0]:[rank12]: ... CUDA error: uncorrectable ECC error encountered", "")
        gpu = finding("gpu-hardware-fault", ["n0"], "n0: CUDA: uncorrectable ECC error (the GPU's memory failed)", [ev])
        old = finding("shm-too-small", ["n1"], "n1: /dev/shm", [Evidence("n1", 3, "x", "")])
        tab.add(old)
        tab.add(gpu)
        tab.add(finding("exit-barrier-race", ["n1"], "n1: torchrun's exit barrier failed", [Evidence("n1", 58, "y", "")]))
        tab.add(replace(old, state="resolved"))
        tab.add(finding("watchdog-timeout", ["n1"], "n1: ALLREDUCE #3 timed out", [Evidence("n1", 70, "z", "")]))
        await pilot.pause()
        assert [(f.id, f.severity, f.active) for f in tab.findings] == [
            ("watchdog-timeout", "error", True), ("gpu-hardware-fault", "error", True),
            ("exit-barrier-race", "info", True), ("shm-too-small", "error", False)]
        assert tab.selected().id == "watchdog-timeout"  # the newest error, selected
        tab.add(gpu)  # raised again (more evidence): first again
        await pilot.pause()
        assert [f.id for f in tab.findings][:2] == ["gpu-hardware-fault", "watchdog-timeout"]
        assert tab.selected().id == "gpu-hardware-fault"
