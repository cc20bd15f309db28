"""Reading what a Slurm allocation grants per node, from `scontrol show job -d`'s detail lines
(the formats below are Slurm's own: slurm.schedmd.com/scontrol.html, `show job -d`)."""

from __future__ import annotations

import pytest

from ddptui.core.checks.allocation import count_ids, gpus_in
from ddptui.core.playbook.loader import parse_playbook
from ddptui.core.slurm.alloc import salloc_argv
from ddptui.core.slurm.commands import JobStatus, parse_record


@pytest.mark.parametrize(("gres", "gpus"), [
    ("gpu:4(IDX:0-3)", 4), ("gpu:a100:2(IDX:0-1)", 2), ("gpu:a100:2(IDX:0-1),nic:1", 2),
    ("gpu:v100:1(IDX:0),gpu:a100:2(IDX:1-2)", 3), ("", 0), ("(null)", 0), ("nic:1", 0),
])
def test_gpus_granted(gres: str, gpus: int) -> None:
    assert gpus_in(gres) == gpus


@pytest.mark.parametrize(("ids", "n"), [("0", 1), ("0-1", 2), ("0-3,8", 5), ("0-15,32-47", 32), ("", 0)])
def test_cpus_granted(ids: str, n: int) -> None:
    assert count_ids(ids) == n


def test_a_job_record_with_spaces_in_values() -> None:
    rec = parse_record("JobId=41 JobName=ddptui-x JobState=PENDING Reason=Resources Dependency=(null) "
                       "Command=/bin/sh -c sleep 1 NodeList=(null) Partition=gpu RunTime=00:00:12")
    st = JobStatus.of("41", rec)
    assert (st.state, st.reason, st.nodes, st.partition) == ("PENDING", "Resources", "", "gpu")
    assert rec["Command"] == "/bin/sh -c sleep 1"
    assert not st.terminal and JobStatus("41", "COMPLETED").terminal


def playbook(slurm: str, nodes: str = "") -> str:
    return (f"name: s\ntransport: slurm\n{nodes}slurm:\n{slurm}job:\n  script: builtin:smoke\n  nproc_per_node: 4\n")


def test_salloc_asks_for_one_task_and_a_cpu_per_process_per_node() -> None:
    argv = salloc_argv(parse_playbook(playbook("  nodes: 3\n  partition: gpu\n  gpus_per_node: 4\n"
                                               "  time: \"00:30:00\"\n")))
    assert argv[:2] == ["salloc", "--no-shell"]
    assert {"--nodes=3", "--ntasks-per-node=1", "--partition=gpu", "--gpus-per-node=4", "--time=00:30:00",
            "--cpus-per-task=4"} <= set(argv)
    assert not any(a.startswith("--nodelist") for a in argv)  # the scheduler picks, unless the playbook names them


def test_named_nodes_are_asked_for_and_the_users_cpu_request_wins() -> None:
    pb = parse_playbook(playbook("  extra_args: [\"--exclusive\"]\n", nodes="nodes: gpu[01-02]\n"))
    argv = salloc_argv(pb)
    assert "--nodelist=gpu01,gpu02" in argv and "--nodes=2" in argv
    assert "--exclusive" in argv and not any(a.startswith("--cpus-per-task") for a in argv)


def test_a_slurm_playbook_must_say_which_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    from ddptui.core.errors import PlaybookError

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(PlaybookError) as e:
        parse_playbook("name: s\ntransport: slurm\njob:\n  script: builtin:smoke\n")
    assert "transport: slurm needs to know which nodes" in e.value.problems[0].message
    monkeypatch.setenv("SLURM_JOB_ID", "12")  # inside an allocation: its nodes
    assert parse_playbook("name: s\ntransport: slurm\njob:\n  script: builtin:smoke\n").nodes == ()
