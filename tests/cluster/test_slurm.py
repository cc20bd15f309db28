"""Slurm as a first-class way to get and use nodes, on the real Slurm of the namespace cluster
(tests/cluster/slurm.py: munged, slurmctld, one slurmd per node): allocate → check → launch with
job steps; what is left behind afterwards (queue, steps, processes) is asserted, not assumed."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddptui.core.logs.results import parse_result_line
from tests.cluster.conftest import NODES
from tests.cluster.netns import Cluster
from tests.cluster.slurm import SlurmCluster
from tests.cluster.test_lifecycle import job_pids
from tests.conftest import ddptui_exe, needs_torch

pytestmark = [needs_torch, pytest.mark.torch]


def slurm_playbook(tmp_path: Path, *, slurm: str = "  nodes: 3\n", nodes: str = "", args: str = '["--steps", "3"]',
                   port: int = 29570, name: str = "slurm-smoke") -> Path:
    text = f"""\
name: {name}
transport: slurm
{nodes}slurm:
  partition: debug
  time: "00:10:00"
  pending_timeout: 20
{slurm}job:
  script: builtin:smoke
  args: {args}
  nproc_per_node: 2
  master_port: {port}
  backend: gloo
  python: {sys.executable}
  rdzv_timeout: 60
  master_wait_timeout: 60
  stop_grace: 5
  env:
    OMP_NUM_THREADS: 1
"""
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return p


def ddptui(*args: str, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([ddptui_exe(), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def by_node(stdout: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for line in stdout.splitlines():
        prefix, _, rest = line.partition(" │ ")
        if r := parse_result_line(rest):
            out.setdefault(prefix.strip(), []).append(r)
    return out


def assert_nothing_left(slurm: SlurmCluster, cluster: Cluster, keep: tuple[str, ...] = ()) -> None:
    """No job of ours queued, no step running, no job process on any node (within Slurm's KillWait)."""
    deadline = time.time() + 15
    while time.time() < deadline:
        jobs = [j for j in slurm.jobs() if j not in keep]
        steps, pids = slurm.steps(), {n: job_pids(cluster, n) for n in NODES}
        if not jobs and not steps and not any(pids.values()):
            return
        time.sleep(0.3)
    raise AssertionError(f"left behind: jobs {jobs}, steps {steps}, processes {pids}")


def test_allocate_check_launch_three_nodes_healthy(slurm: SlurmCluster, cluster: Cluster, tmp_path: Path,
                                                  runs_dir: Path) -> None:
    pb = slurm_playbook(tmp_path)
    for _ in range(2):  # torch 2.13 may abort at exit after a good run: one retry
        r = ddptui("run", str(pb), "--headless", "--runs-dir", str(runs_dir))
        if r.returncode == 0:
            break
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    assert "slurm job" in r.stdout and "granted: node02, node03, node04 (debug)" in r.stdout
    got = by_node(r.stdout)
    assert sorted(got) == NODES
    for i, node in enumerate(NODES):  # the allocation's order: node02 is the master (ranks 0-1)
        assert sorted(x["rank"] for x in got[node]) == [2 * i, 2 * i + 1]
        assert all(x["host"] == node and x["world_size"] == 6 and x["all_reduce"] == "ok" for x in got[node])
    assert "released Slurm allocation" in r.stdout
    assert_nothing_left(slurm, cluster)
    run = next(p for p in sorted(runs_dir.iterdir()) if json.loads((p / "summary.json").read_text())["ok"])
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    alloc = next(e for e in events if e["event"] == "allocated")
    assert alloc["nodes"] == NODES and alloc["owned"] is True


def test_more_nodes_than_exist_is_refused_with_slurms_reason(slurm: SlurmCluster, cluster: Cluster,
                                                             tmp_path: Path, runs_dir: Path) -> None:
    r = ddptui("run", str(slurm_playbook(tmp_path, slurm="  nodes: 5\n")), "--headless", "--runs-dir", str(runs_dir),
               timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    # Slurm 22.05 queues it with a reason waiting cannot change: withdrawn at once, not at pending_timeout (20 s)
    assert "Slurm will not grant job" in r.stdout, r.stdout
    assert "PartitionConfig" in r.stdout or "PartitionNodeLimit" in r.stdout, r.stdout  # Slurm's reason
    assert "cancelled it: nothing is left queued" in r.stdout
    assert "slurm.pending_timeout" not in r.stdout, r.stdout  # not the other way out, after waiting 20 s
    assert "Traceback" not in r.stdout + r.stderr
    assert_nothing_left(slurm, cluster)


def test_a_pending_request_is_bounded_and_withdrawn(slurm: SlurmCluster, cluster: Cluster, tmp_path: Path,
                                                    runs_dir: Path) -> None:
    holder = hold_nodes(slurm)  # someone else holds every node
    pb = slurm_playbook(tmp_path, slurm="  nodes: 3\n").read_text().replace("pending_timeout: 20", "pending_timeout: 3")
    (tmp_path / "p.yaml").write_text(pb)
    r = ddptui("run", str(tmp_path / "p.yaml"), "--headless", "--runs-dir", str(runs_dir), timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "PENDING (Resources)" in r.stdout  # shown while it waited, with Slurm's reason
    assert "after 3 s (slurm.pending_timeout); cancelled it: nothing is left queued" in r.stdout
    assert slurm.jobs() == [holder]
    assert_nothing_left(slurm, cluster, keep=(holder,))


def hold_nodes(slurm: SlurmCluster, n: int = 3) -> str:
    r = slurm.cmd("salloc", "--no-shell", f"-N{n}", "--exclusive", "--job-name=holder")
    return next(w for w in r.stderr.split() if w.isdigit())


def start_run(pb: Path, runs_dir: Path) -> subprocess.Popen:
    return subprocess.Popen([ddptui_exe(), "run", str(pb), "--headless", "--runs-dir", str(runs_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(p: subprocess.Popen, text: str, timeout: float = 90) -> list[str]:
    seen: list[str] = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return seen
    p.kill()
    raise AssertionError(f"never saw {text!r}: " + "".join(seen[-30:]))


def test_a_node_killed_mid_run_stops_the_others_and_releases(slurm: SlurmCluster, cluster: Cluster, tmp_path: Path,
                                                            runs_dir: Path) -> None:
    p = start_run(slurm_playbook(tmp_path, args='["--steps", "1", "--sleep", "60"]', port=29571), runs_dir)
    wait_for(p, "watch: running")
    wait_for(p, "ddptui-smoke result")  # the job is up on every node
    victims = [pid for pid in job_pids(cluster, "node04")]
    assert victims
    for pid in victims:  # everything of the job on node04, guard included: the node's job is gone
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 1, out[-3000:]
    assert "node04" in out and "released Slurm allocation" in out
    assert_nothing_left(slurm, cluster)


def test_ctrl_c_cancels_the_steps_and_releases(slurm: SlurmCluster, cluster: Cluster, tmp_path: Path,
                                               runs_dir: Path) -> None:
    p = start_run(slurm_playbook(tmp_path, args='["--steps", "1", "--sleep", "60"]', port=29572), runs_dir)
    wait_for(p, "watch: running")
    assert slurm.steps()  # the job runs as steps of the allocation
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, out[-3000:]
    assert "released Slurm allocation" in out
    assert_nothing_left(slurm, cluster)


@pytest.mark.parametrize("how", ["slurm.job", "SLURM_JOB_ID"])
def test_an_allocation_the_user_holds_is_used_and_kept(slurm: SlurmCluster, cluster: Cluster, tmp_path: Path,
                                                       runs_dir: Path, how: str) -> None:
    job = hold_nodes(slurm)
    if how == "slurm.job":
        pb, env = slurm_playbook(tmp_path, slurm=f"  job: {job}\n"), {}
        pb.write_text(pb.read_text().replace("  partition: debug\n", ""))
    else:  # ddptui started inside the allocation (salloc's shell, a batch script)
        pb, env = slurm_playbook(tmp_path, slurm=""), {"SLURM_JOB_ID": job}
        pb.write_text(pb.read_text().replace("  partition: debug\n", ""))
    r = ddptui("check", str(pb), "--runs-dir", str(runs_dir), env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert f"slurm job {job} joined: node02, node03, node04" in r.stdout
    assert "released" not in r.stdout
    assert slurm.state(job) == "RUNNING"  # the user's allocation outlives the run
    assert_nothing_left(slurm, cluster, keep=(job,))


def test_bad_input_is_one_line_and_exit_2(slurm: SlurmCluster, tmp_path: Path, runs_dir: Path) -> None:
    pb = slurm_playbook(tmp_path)
    cases = {
        "no Slurm here": (pb, {"PATH": str(tmp_path / "empty")}, "no Slurm here: `srun` is not installed"),
        "unknown partition": (pb.with_name("part.yaml"), {}, "slurm.partition 'gpu' is not a partition"),
        "no such job": (pb.with_name("job.yaml"), {}, "slurm job 999999 does not exist"),
    }
    (tmp_path / "empty").mkdir()
    pb.with_name("part.yaml").write_text(pb.read_text().replace("partition: debug", "partition: gpu"))
    pb.with_name("job.yaml").write_text(pb.read_text().replace("  nodes: 3\n", "  job: 999999\n"))
    for what, (path, env, words) in cases.items():
        r = ddptui("check", str(path), "--runs-dir", str(runs_dir), env=env, timeout=60)
        assert r.returncode == 2, (what, r.stdout, r.stderr)
        assert words in r.stderr and "Traceback" not in r.stderr, (what, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, (what, r.stderr)
    assert slurm.jobs() == []


@pytest.mark.parametrize("rendezvous", ["static", "c10d"])
def test_a_script_from_ddptui_sbatch_runs_under_the_real_sbatch(slurm: SlurmCluster, cluster: Cluster,
                                                                tmp_path: Path, rendezvous: str) -> None:
    pb = slurm_playbook(tmp_path, port=29573, name=f"batch-{rendezvous}")
    pb.write_text(pb.read_text().replace("  backend: gloo\n", f"  backend: gloo\n  rendezvous: {rendezvous}\n"))
    script = tmp_path / "job.sbatch"
    w = ddptui("sbatch", str(pb), "-o", str(script), timeout=60)
    assert w.returncode == 0, w.stdout + w.stderr
    job = slurm.submit(script.read_text())
    state = slurm.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"), timeout=180)
    out = next(slurm.workdir.glob(f"ddptui-*-{job}.out"))
    text = out.read_text()
    assert state == "COMPLETED", text[-3000:]
    assert f"ddptui: slurm job {job} nodes node02,node03,node04 master node02:29573" in text
    # every rank's result line, each on its own node (srun's --label maps back to the node)
    d = ddptui("diagnose", str(out), "--json", timeout=60)
    assert d.returncode == 0, d.stdout + d.stderr  # nothing loud
    assert not [f for f in json.loads(d.stdout)["findings"] if f["severity"] in ("error", "warning")]
    ranks = sorted(r["rank"] for r in (parse_result_line(x.partition(": ")[2]) for x in text.splitlines()) if r)
    assert ranks == list(range(6))
    assert_nothing_left(slurm, cluster)


HOSTLISTS = [
    "node[02-04,07]", "gpu-[1-3]-x[01-02]", "n[1-3],m[8-10]",
    "node[001-010]", "a[9-11]", "rack[1-2]-node[01-03]", "node02", "node02,node03", "h[7,3,5]",
    "big[098-102]", "n[00-03,10]", "s[1-1]", "login,cn[1-2],gpu[10-11]",
]  # Slurm 22.05 refuses text after a bracket (`x[0-2]y`), which ours (like ClusterShell) expands


def test_hostlists_expand_as_slurm_does(slurm: SlurmCluster) -> None:
    """Our own expander (core/hostlist.py) against `scontrol show hostnames`, Slurm's own, on the
    expressions users write (ranges, lists, zero padding, several brackets, suffixes)."""
    from ddptui.core.hostlist import expand_hostlist

    for expr in HOSTLISTS:
        theirs = slurm.cmd("scontrol", "show", "hostnames", expr).stdout.split()
        assert expand_hostlist(expr) == theirs, expr


def test_check_shows_the_allocation_and_names_gpus_short(slurm: SlurmCluster, cluster: Cluster, tmp_path: Path,
                                                        runs_dir: Path) -> None:
    """The allocation's own facts in check --json; a held allocation with no GPUs, for a playbook that
    needs 2 per node, is named before anything launches (gpu-count-short, with scontrol's line)."""
    job = hold_nodes(slurm)
    pb = slurm_playbook(tmp_path, slurm=f"  job: {job}\n  gpus_per_node: 2\n")
    pb.write_text(pb.read_text().replace("  partition: debug\n", ""))
    r = ddptui("check", str(pb), "--json", "--runs-dir", str(runs_dir))
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr
    report = json.loads(r.stdout)
    for node in report["nodes"]:
        s = node["facts"]["slurm"]
        assert s["job_id"] == job and s["cpus"] == 2 and s["gpus"] == 0  # --exclusive: both CPUs of the node
        assert s["step_env"]["SLURM_JOB_ID"] == job and s["step_env"]["SLURM_STEP_NODELIST"] == node["name"]
        row = next(c for c in node["checks"] if c["id"] == "slurm")
        assert row["status"] == "fail" and row["summary"] == f"job {job}: 2 CPUs, 0 GPUs granted"
    short = next(f for f in report["findings"] if f["id"] == "gpu-count-short")
    assert sorted(short["nodes"]) == NODES and "Slurm granted 0 GPUs, nproc_per_node is 2" in short["summary"]
    assert short["evidence"][0]["text"].startswith("Nodes=node[02-04] CPU_IDs=0-1")
    # Slurm hands a step the limits of the shell that ran srun (PropagateResourceLimits, ALL by default):
    # a login shell's low locked-memory limit reaches every node (NVIDIA/pyxis#60), and the check reads it there
    low = subprocess.run([ddptui_exe(), "check", str(pb), "--json", "--runs-dir", str(runs_dir)], capture_output=True,
                         text=True, timeout=240, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_MEMLOCK, (65536, 65536)))
    limits = {n["name"]: n["facts"]["memlock"]["limit_kib"] for n in json.loads(low.stdout)["nodes"]}
    assert limits == dict.fromkeys(NODES, 64), limits
    assert {n["name"]: n["facts"]["memlock"]["limit_kib"] for n in report["nodes"]} != limits  # this shell's own
    assert_nothing_left(slurm, cluster, keep=(job,))
