"""`ddptui open`: a bundle of a REAL local run (a rank dies of SIGSEGV) shown read-only by the same screens.

The run is made once per session with `ddptui run --headless` and packed with `ddptui bundle`; its
script is then deleted, as it would be absent on a colleague's machine.
"""

from __future__ import annotations

import json
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from ddptui.core.bundle import open_bundle
from ddptui.core.bundle.replay import Timeline
from ddptui.core.events import FindingRaised, NodeOutput
from ddptui.ui.app import DdptuiApp
from ddptui.ui.screens.bundle import BundleScreen
from ddptui.ui.widgets.checks import CHECK_COLUMNS, ChecksTab
from tests.bundle.conftest import ddptui
from tests.bundle.test_hostile import manifest
from tests.conftest import DATA, needs_torch

PLAYBOOK = """\
name: segv-smoke
description: a rank dies of SIGSEGV
transport: local
nodes: localhost
job:
  script: {script}
  nproc_per_node: 2
  master_port: 29561
  backend: gloo
  rdzv_timeout: 60
  env:
    OMP_NUM_THREADS: 1
    GLOO_SOCKET_IFNAME: lo
    TORCH_CPP_LOG_LEVEL: WARNING
"""


@pytest.fixture(scope="session")
def segv_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("segv")
    script = base / "segv.py"
    shutil.copy(DATA / "workloads" / "segv.py", script)
    pb = base / "segv.yaml"
    pb.write_text(PLAYBOOK.format(script=script))
    r = ddptui("run", str(pb), "--headless", "--runs-dir", str(base / "runs"), timeout=240)
    assert r.returncode == 1 and "segfault-exit-11" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    (run,) = list((base / "runs").iterdir())
    out = base / "segv.ddpt"
    r = ddptui("bundle", str(run), "-o", str(out))
    assert r.returncode == 0, r.stderr
    script.unlink()  # not on the colleague's machine: the playbook must still open
    return out


def opened(path: Path):
    app = DdptuiApp(bundle=open_bundle(path))
    return app, app.run_test(size=(160, 45))


def check_cells(b) -> set[tuple[str, str]]:
    return {(c["node"], c["check"] if c["check"] in CHECK_COLUMNS else "probe") for c in b.checks}


@needs_torch
async def test_open_shows_what_the_run_recorded(segv_bundle: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    b = open_bundle(segv_bundle)
    recorded_steps = [(e["step"], e["state"]) for e in b.events if e.get("event") == "step"]
    app, run = opened(segv_bundle)
    async with run as pilot:
        await pilot.pause(0.2)
        s = app.screen
        assert isinstance(s, BundleScreen) and s.note == ""  # the playbook parsed, its script absent here
        assert s.made_runbook is None  # replaying the record made no runbook: nothing of it runs
        assert s.t == s.timeline.end and s.pos == len(s.timeline.events)  # opened at the end
        assert s.history == recorded_steps
        assert {k: str(v) for k, v in s.runbook.states.items()} == {k: "pending" for k in b.summary["steps"]}
        assert [st for _, st in s.history][-1] == b.summary["steps"]["watch"] == "failed"
        pane = s.pane_grid.pane("localhost")
        assert str(pane.state) == b.summary["nodes"]["localhost"]["state"] == "failed"
        assert list(pane.buffer) == [f"$ {b.plan[0]['command']}"] + b.lines("localhost")
        assert pane.total_lines == len(b.lines("localhost"))
        states = {e["state"]: e["t"] for e in b.events if e.get("event") == "node" and e.get("node") == "localhost"}
        assert (pane.started, pane.ended) == (states["running"], states["failed"])  # the record's times, not the viewer's clock
        assert set(s.query_one(ChecksTab).matrix.results) == check_cells(b) != set()
        assert [f.id for f in s.findings] == [f["id"] for f in b.findings] == ["segfault-exit-11"]
        banner = str(s.query_one("#banner").render())
        assert "READ-ONLY" in banner and b.manifest["host"] in banner and "ddptui 0.1" in banner
        assert str(b.manifest["created"])[:10] in banner and b.manifest["user"] in banner
        # the all-nodes view, filters and find work on the recorded lines
        await pilot.press("2")  # drawn once its tab shows
        await pilot.pause()
        assert s.query_one("#merged").line_count == len(b.lines("localhost"))
        await pilot.press("1")
        await pilot.press("v", "v", "v")  # no launcher INFO, NCCL, warnings+errors
        assert pane.filter == "warnings+errors" and pane.log.line_count < len(pane.buffer)
        await pilot.press("v", "v", "v")
        assert pane.filter == "all"
        await pilot.press("slash", *"SIGSEGV", "enter")
        assert "localhost: line" in str(s.query_one("#status").render())


@needs_torch
async def test_replay_from_the_start_at_64x_reaches_the_end(segv_bundle: Path) -> None:
    app, run = opened(segv_bundle)
    async with run as pilot:
        await pilot.pause(0.2)
        s = app.screen
        end_history, end_lines = list(s.history), list(s.pane_grid.pane("localhost").buffer)
        await pilot.press("0")
        assert s.pos == 0 and s.history == [] and s.findings == [] and not s.query_one(ChecksTab).matrix.results
        assert list(s.pane_grid.pane("localhost").buffer) == []
        await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")
        assert s.speed == 64
        seen: list[int] = []  # where each frame of the replay got to
        seek = s.seek
        s.seek = lambda t: (seek(t), seen.append(s.pos))
        await pilot.press("space")
        deadline = time.monotonic() + 30
        while (s.playing or not seen) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert not s.playing and s.t == s.timeline.end and s.pos == len(s.timeline.events)
        assert len(seen) > 1 and any(0 < p < len(s.timeline.events) for p in seen) and seen == sorted(seen)
        assert s.history == end_history and list(s.pane_grid.pane("localhost").buffer) == end_lines
        assert [f.id for f in s.findings] == ["segfault-exit-11"]


@needs_torch
async def test_next_finding_lands_at_the_moment_it_was_raised(segv_bundle: Path) -> None:
    b = open_bundle(segv_bundle)
    raised = [e for e in b.events if e.get("event") == "finding"]
    assert raised and isinstance(raised[0]["t"], float)  # findings now record when they were raised
    app, run = opened(segv_bundle)
    async with run as pilot:
        await pilot.pause(0.2)
        s = app.screen
        (t_f,) = [t for t, ev in s.timeline.events if isinstance(ev, FindingRaised)]
        assert t_f == raised[0]["t"]
        await pilot.press("0", "full_stop")
        assert s.t == t_f and [f.id for f in s.findings] == ["segfault-exit-11"]
        assert s.history[-1] == ("watch", "running")  # known then: the step had not failed yet
        pane = s.pane_grid.pane("localhost")
        # exactly the lines that had arrived when it was raised (how many depends on the run's timing:
        # torchrun's traceback after the crash may come before or after the diagnosis named it)
        known = sum(len(ev.lines) for t, ev in s.timeline.events
                    if isinstance(ev, NodeOutput) and ev.node == "localhost" and t <= t_f)
        assert str(pane.state) == "running" and pane.total_lines == known
        ev_line = s.findings[0].evidence[0]
        assert ev_line.text in pane.buffer  # the line that raised it is already there
        assert "segfault-exit-11 raised" in str(s.query_one("#status").render())
        await pilot.press("full_stop")  # the next failure: the node, then the step
        assert s.t > t_f
        await pilot.press("e")
        assert s.t == s.timeline.end
        assert str(pane.state) == "failed" and pane.total_lines == len(b.lines("localhost"))


@needs_torch
async def test_cluster_actions_are_refused_in_words_and_the_playbook_can_be_saved(
        segv_bundle: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    b = open_bundle(segv_bundle)
    app, run = opened(segv_bundle)
    async with run as pilot:
        await pilot.pause(0.2)
        s = app.screen
        for key in ("r", "n", "s", "a", "x"):
            await pilot.press(key)
        words = [n.message for n in app._notifications]
        refusal = f"read-only: this is a bundle from {b.manifest['host']}; save the playbook (w) to run it on your cluster"
        assert words.count(refusal) == 1  # said once while its toast is up, not five toasts stacked
        assert not s.busy.is_set() and s.runbook.run_path is None  # nothing ran, no run directory
        await pilot.press("w", "w")
        assert s.saved_playbooks == [tmp_path / "segv-smoke.yaml", tmp_path / "segv-smoke-2.yaml"]
        assert all(p.read_text() == b.playbook_text for p in s.saved_playbooks)
        assert any(f"saved the playbook as {tmp_path / 'segv-smoke.yaml'}" in n.message for n in app._notifications)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["segv-smoke-2.yaml", "segv-smoke.yaml"]


@needs_torch
def test_headless_summary_and_bad_files(segv_bundle: Path, tmp_path: Path) -> None:
    r = ddptui("open", str(segv_bundle), "--headless")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("segv-smoke: run by ") and "outcome: FAILED" in out
    assert "localhost    master failed      exit 1" in out
    assert "  watch            failed   localhost exited 1" in out and "  connect          passed" in out
    assert "ERROR   segfault-exit-11 [active; localhost]" in out
    (tmp_path / "bad.ddpt").write_text("not a zip\n")
    for bad in (tmp_path / "bad.ddpt", tmp_path / "absent.ddpt"):
        r = ddptui("open", str(bad))
        assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr


async def test_a_hostile_but_well_formed_bundle_opens_without_a_playbook(tmp_path: Path) -> None:
    """Events of kinds, states and types this ddptui does not know, or about nodes the run did not
    have: skipped. No playbook: a stand-in from the summary and the events, and nothing to save."""
    events = [{"event": "run-started", "t": 10.0, "nodes": "node02"},
              {"event": "step", "step": "connect", "state": "running", "t": 10.5, "message": ["x"]},
              {"event": "step", "step": "nope", "state": "passed", "t": 11.0},
              {"event": "step", "step": "connect", "state": "exploded", "t": 11.0},
              {"event": "node", "node": "ghost", "state": "failed", "t": 11.0},
              {"event": "check", "node": "node02", "check": "ib", "status": "fail", "summary": 3},
              {"event": "finding", "finding": {"id": "x", "evidence": [1, {"line": "a"}], "fix": {"env": []}}},
              {"event": "finding", "finding": "nope"}, {"event": "from-the-future", "t": 12.0}, [1, 2]]
    members = {"logs/node02.log": b"hello\nworld\n", "logs/node02.times": b"1 2 10.7\n",
               "summary.json": json.dumps({"steps": {"connect": "passed"}, "started": "soon",
                                           "nodes": {"node02": {"role": "master"}}}).encode(),
               "events.jsonl": "".join(json.dumps(e) + "\n" for e in events).encode()}
    path = tmp_path / "h.ddpt"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", manifest(members, host=["not", "a", "str"], logs={"node02": {
            "member": "logs/node02.log", "times": "logs/node02.times", "kept_head": 2, "elided": 0}}))
        for name, data in members.items():
            zf.writestr(name, data)
    b = open_bundle(path)
    assert Timeline.of(b).duration == 1.0  # 10.0 to 11.0; the unknown kind at 12.0 is skipped, not a moment of the run
    app = DdptuiApp(bundle=b)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.2)
        s = app.screen
        assert isinstance(s, BundleScreen) and "holds no playbook" in s.note
        assert [st.id for st in s.pb.steps] == ["connect", "nope"]  # the summary's steps, then the events'
        assert s.history == [("connect", "running"), ("nope", "passed")]
        assert list(s.pane_grid.pane("node02").buffer) == ["hello", "world"]
        assert [f.id for f in s.findings] == ["x"]
        await pilot.press("0", "space")
        await pilot.pause(0.3)
        await pilot.press("w", "4", "f", "r")
        words = " ".join(n.message for n in app._notifications)
        assert "holds no playbook to save" in words and "read-only: this is a bundle from another machine" in words


async def test_the_shipped_sample_opens(tmp_path: Path) -> None:
    """assets/sample.ddpt (scripts/make_sample_bundle.py) still opens, and still tells its story."""
    sample = Path(__file__).resolve().parents[2] / "assets" / "sample.ddpt"
    assert sample.stat().st_size < 200 * 1024
    b = open_bundle(sample)
    app = DdptuiApp(bundle=b)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.2)
        s = app.screen
        assert isinstance(s, BundleScreen) and s.note == "" and len(s.pb.nodes) == 2
        # one frame timer and one tick: the playbook screen's on_mount ran once (Textual calls a base
        # class' handler itself; calling it again from the subclass doubled both timers)
        assert [sum(t._callback == cb for t in s._timers) for cb in (s._frame, s._tick)] == [1, 1]
        assert app.sub_title == f"{s.pb.name} — read-only"
        assert [f.id for f in s.findings] == ["ib-socket-mismatch"]
        assert all(str(s.pane_grid.pane(n).state) == "exited" for n in ("node02", "node03"))
        await pilot.press("0", "full_stop")
        assert [f.id for f in s.findings] == ["ib-socket-mismatch"] and s.t < s.timeline.end


@pytest.mark.parametrize("width,hints", [(64, 1), (100, 3), (160, 6)])
async def test_the_timeline_names_whole_keys_at_every_width(width: int, hints: int) -> None:
    """The bar's key hints were cut mid-word at 64 and 100 columns ("· 0" and nothing after), and the
    footer offered `] Faster` without its `[`: now as many whole hints as leave the bar 10 cells, and
    the footer's speed key is the pair."""
    from ddptui.ui.widgets.footer import KeysFooter
    from ddptui.ui.widgets.timeline import HINTS, TimelineBar

    sample = Path(__file__).resolve().parents[2] / "assets" / "sample.ddpt"
    app = DdptuiApp(bundle=open_bundle(sample))
    async with app.run_test(size=(width, 30)) as pilot:
        def bar() -> str:
            return str(app.screen.query_one(TimelineBar).render())

        def footer() -> str:
            return " ".join(str(k.render()) for k in app.screen.query_one(KeysFooter).query("FooterKey"))

        hint = "  " + " · ".join(HINTS[:hints])
        for _ in range(60):  # laid out at this width, the footer's keys composed (a loaded CI: frames later)
            if bar().rstrip().endswith(hint) and (width < 100 or footer()):
                break
            await pilot.pause(0.05)
        text = bar()
        assert text.rstrip().endswith(hint), text
        assert text.count("━") + text.count("─") + text.count("╋") + text.count("●") >= 10  # the bar itself
        if width >= 100:
            assert "[ ] Speed" in footer() and "Faster" not in footer()


async def test_a_finished_run_without_results_does_not_promise_them() -> None:
    """"no results yet: they come when the job's ranks finish", said the sample's Results tab, about
    a run that ended long ago and whose job (a replay of recorded NCCL lines) prints none."""
    sample = Path(__file__).resolve().parents[2] / "assets" / "sample.ddpt"
    app = DdptuiApp(bundle=open_bundle(sample))
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.2)
        await pilot.press("5")
        await pilot.pause(0.1)
        said = str(app.screen.query_one("#bandwidth").render())
        assert said.startswith("no rank results in this run") and "yet" not in said, said
