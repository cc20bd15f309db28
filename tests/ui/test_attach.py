"""`ddptui attach` in the TUI: a batch job's output, written by a thread as it runs, streams into the
nodes' panes and its findings into the Findings tab; the cluster's actions are refused in words.
The job's record comes through the Attachment's seams, as in tests/core/test_slurm_attach_follow.py."""

from __future__ import annotations

from pathlib import Path

from ddptui.core.hostlist import expand_hostlist
from ddptui.core.slurm.attach import Attachment
from ddptui.ui.app import DdptuiApp
from ddptui.ui.screens.attach import AttachScreen
from tests.core.test_diagnosis_corpus import split
from tests.core.test_diagnosis_recorded import GROUPS
from tests.core.test_slurm_attach_follow import HEAD, Job, writer


async def test_a_failing_job_streams_into_panes_and_findings(tmp_path: Path) -> None:
    key = next(k for k in GROUPS if "worker-killed" in GROUPS[k][0].name)
    bodies = [split(f)[1] for f in GROUPS[key]]
    text = HEAD + "".join(f"{task}: {x}\n" for task, body in enumerate(bodies) for x in body)
    text += "srun: error: node03: task 1: Exited with exit code 1\nsrun: Job step aborted\n"
    job = Job(tmp_path / "slurm-77.out")
    job.state, job.nodes = "RUNNING", "node[02-03]"
    att = Attachment("77", lambda ev: None, tmp_path / "runs", status=job.status, show_job=job.show_job,
                     expand=expand_hostlist, poll=0.05)
    app = DdptuiApp(runs_dir=tmp_path / "runs", attach=(att, ["node02", "node03"]))
    t = writer(job, text.encode(), "FAILED")
    async with app.run_test(size=(160, 45)) as pilot:
        for _ in range(100):
            await pilot.pause(0.1)
            if att.run_dir is not None and (att.run_dir.path / "summary.json").exists():
                break
        await pilot.pause(0.3)
        s = app.screen
        assert isinstance(s, AttachScreen)
        assert list(s.pane_grid.pane("node03").buffer)[-1] == "srun: error: node03: task 1: Exited with exit code 1"
        assert s.pane_grid.pane("node02").total_lines == len(bodies[0])
        assert "host-oom-exit-9" in {f.id for f in s.findings}
        assert str(s.pane_grid.pane("node03").state) == "failed"
        await pilot.press("2")  # the all-nodes view is drawn once its tab shows
        await pilot.pause()
        merged = s.query_one("#merged")
        assert merged.line_count >= len(bodies[0]) + len(bodies[1]) + 2  # srun's own line too
        assert "FAILED" in str(s.query_one("#status").render())
        for key in ("r", "n", "s", "a", "x"):
            await pilot.press(key)
        words = [n.message for n in app._notifications]
        assert words.count(s.refusal) == 1, words  # refused in words, once while its toast is up
        assert "scancel 77" in s.refusal  # and the user is told how to stop the job themselves
        assert not s.busy.is_set() and s.runbook.run_path is None  # nothing ran, no run directory of its own
        assert "READ-ONLY" in str(s.query_one("#banner").render())
    t.join()
