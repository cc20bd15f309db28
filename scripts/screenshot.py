"""Refresh the README's screenshots: the real app, run on the shipped local playbook.

    .venv/bin/python scripts/screenshot.py        # writes assets/*.svg ; `... screenshot.py open`: only assets/open-sample.svg, from assets/sample.ddpt

Textual saves the screen as SVG; nothing here is drawn by hand.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tui"))

from ddptui.ui.app import DdptuiApp  # noqa: E402


async def shoot() -> None:
    assets = ROOT / "assets"
    assets.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as runs:
        app = DdptuiApp(search_dirs=[("here", ROOT / "playbooks")], runs_dir=Path(runs))
        async with app.run_test(size=(130, 24)) as pilot:
            await pilot.pause()
            app.save_screenshot(str(assets / "picker.svg"))
        for (w, h), name in (((160, 45), "local-smoke.svg"), ((100, 30), "local-smoke-100x30.svg")):
            app = DdptuiApp(playbook=ROOT / "playbooks" / "local-smoke.yaml", runs_dir=Path(runs))
            async with app.run_test(size=(w, h)) as pilot:
                await pilot.press("a")
                await app.workers.wait_for_complete()
                await pilot.pause(0.2)
                app.save_screenshot(str(assets / name))
                print(f"{w}x{h} watch:", app.screen.runbook.states["watch"])
    await shoot_open(assets)


async def shoot_open(assets: Path) -> None:
    """`ddptui open assets/sample.ddpt`, replayed to the moment the finding was raised: its Findings tab."""
    from ddptui.core.bundle import open_bundle

    app = DdptuiApp(bundle=open_bundle(assets / "sample.ddpt"))
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.3)
        await pilot.press("0", "full_stop", "4")  # the Findings tab
        await pilot.pause(0.3)
        app.save_screenshot(str(assets / "open-sample.svg"))
        print("open: at", f"{app.screen.t - app.screen.timeline.start:.1f}s", [f.id for f in app.screen.findings])


if __name__ == "__main__":
    asyncio.run(shoot_open(ROOT / "assets") if sys.argv[1:] == ["open"] else shoot())
