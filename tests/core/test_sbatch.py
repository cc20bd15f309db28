"""`ddptui sbatch`: the batch script a playbook becomes, and `--check` on hand-written ones.

Golden files: tests/data/slurm/{static,c10d}.sbatch are what render_sbatch() writes for the playbooks
next to them (the builtin smoke script's folder written as @WORKLOADS@). After a deliberate change,
regenerate them and review the diff:

    DDPTUI_REGEN_GOLDEN=1 PYTHONPATH=tui python -m pytest -q tests/core/test_sbatch.py -k golden
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ddptui.cli import main
from ddptui.core.playbook.loader import load_playbook, workloads_dir
from ddptui.core.slurm.lint import check_script
from ddptui.core.slurm.sbatch import render_sbatch, write_sbatch

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
GOLDEN = ("static", "c10d")
HEADER = re.compile(r"^ddptui: slurm job (\d+) nodes (\S+) master (\S+)$")
SECRET = "hf_abcdefghijklmnopqrstuvwx"  # job.env HF_TOKEN in static.yaml


def _script(name: str) -> str:
    return write_sbatch(load_playbook(DATA / f"{name}.yaml"))


def _golden_text(name: str) -> str:
    return _script(name).replace(str(workloads_dir()), "@WORKLOADS@")


# ---- the generated script -----------------------------------------------------------------------

@pytest.mark.parametrize("name", GOLDEN)
def test_golden_script(name: str) -> None:
    path = DATA / f"{name}.sbatch"
    text = _golden_text(name)
    if os.environ.get("DDPTUI_REGEN_GOLDEN") and text != path.read_text():
        path.write_text(text)
        pytest.fail(f"regenerated {path}: review its diff, then run the tests again without DDPTUI_REGEN_GOLDEN")
    assert text == path.read_text(), f"regenerate with DDPTUI_REGEN_GOLDEN=1 (see this module's docstring): {path}"


@pytest.mark.parametrize("name", GOLDEN)
def test_script_is_valid_bash_and_shellcheck_clean(name: str, tmp_path: Path) -> None:
    f = tmp_path / f"{name}.sbatch"
    f.write_text(_script(name))
    r = subprocess.run(["bash", "-n", str(f)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/test installs it as root)")
    r = subprocess.run(["shellcheck", "-s", "bash", str(f)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_sbatch_lines_come_from_the_slurm_block() -> None:
    text = _script("static")
    sbatch = [ln for ln in text.splitlines() if ln.startswith("#SBATCH")]
    assert sbatch == ["#SBATCH --job-name=three-nodes-static", "#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=1",
                      "#SBATCH --gpus-per-node=4", "#SBATCH --partition=gpu", "#SBATCH --time=00:30:00",
                      "#SBATCH --account=myproject", "#SBATCH --qos=normal", "#SBATCH --constraint=a100",
                      "#SBATCH --exclusive", "#SBATCH --cpus-per-task=16", "#SBATCH --output=ddptui-%x-%j.out"]
    # the named nodes are a hint in a comment, never a pin
    assert "--nodelist=node02,node03,node04" in text and not any("nodelist" in ln for ln in sbatch)
    c10d = _script("c10d")
    assert "#SBATCH --nodes=2" in c10d and "#SBATCH --chdir=/shared/project" in c10d
    assert "--gpus" not in c10d.replace("# ddptui-check: ignore=no-gpu-request", "")


def test_secrets_stay_out_and_per_node_env_is_reported() -> None:
    out = render_sbatch(load_playbook(DATA / "static.yaml"))
    assert SECRET not in out.text
    assert 'export HF_TOKEN="${HF_TOKEN:?set HF_TOKEN in the environment you submit from}"' in out.text
    assert "export SITE=lab" in out.text  # per-node env that agrees on every node is kept
    assert "NCCL_SOCKET_IFNAME=" not in out.text  # eth1/eth2/eth1: not one value
    assert any("HF_TOKEN" in w for w in out.warnings) and any("NCCL_SOCKET_IFNAME" in w for w in out.warnings)


def _fake_slurm(tmp_path: Path) -> dict[str, str]:
    """scontrol and srun stand-ins on PATH: srun runs the step's command once per node, with that
    node's SLURM_NODEID, and labels each line with the task id as `srun --label` does."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "scontrol").write_text('#!/bin/bash\n[ "$1 $2" = "show hostnames" ] && printf "node-a\\nnode-b\\nnode-c\\n"\n')
    (bin_ / "srun").write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$FAKE_OUT/srun.args"\n'
                               'while [ "$1" != bash ]; do shift; done\n'
                               'for ((i = 0; i < SLURM_NNODES; i++)); do\n'
                               '  SLURM_NODEID=$i "$@" | sed "s/^/$i: /" || exit 1\ndone\n')
    (bin_ / "python").write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                                 "keys = ('SLURM_NODEID', 'HF_TOKEN', 'TORCH_DISTRIBUTED_DEBUG', 'NCCL_DEBUG_FILE', "
                                 "'DDPTUI_BACKEND', 'OMP_NUM_THREADS')\n"
                                 "print(json.dumps({'argv': sys.argv[1:], 'env': {k: os.environ.get(k) for k in keys}}))\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    return {"PATH": f"{bin_}:{os.environ['PATH']}", "FAKE_OUT": str(tmp_path), "SLURM_JOB_ID": "4242",
            "SLURM_JOB_NODELIST": "node-[a-c]", "SLURM_NNODES": "3", "HOME": str(tmp_path),
            "TORCH_DISTRIBUTED_DEBUG": "OFF"}  # the submitting shell's value: the playbook's must win


@pytest.mark.parametrize("name", GOLDEN)
def test_script_runs_one_torchrun_per_node_with_the_right_ranks(name: str, tmp_path: Path) -> None:
    pb = load_playbook(DATA / f"{name}.yaml")
    env = _fake_slurm(tmp_path)
    fake_python = str(tmp_path / "bin" / "python")
    script = tmp_path / "job.sbatch"
    script.write_text(write_sbatch(replace(pb, job=replace(pb.job, python=fake_python))))
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=tmp_path,
                       env={**env, "HF_TOKEN": "from-the-submit-shell"}, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    m = HEADER.match(out[0])
    assert m and m.groups() == ("4242", "node-a,node-b,node-c", f"node-a:{pb.job.master_port}")
    runs = [(int(ln.split(": ", 1)[0]), json.loads(ln.split(": ", 1)[1])) for ln in out[1:]]
    assert [task for task, _ in runs] == [0, 1, 2]
    srun = (tmp_path / "srun.args").read_text().splitlines()
    assert {"--kill-on-bad-exit=1", "--label", "--ntasks-per-node=1", "--nodes=3"} <= set(srun)
    for task, got in runs:
        argv, e = got["argv"], got["env"]
        assert argv[:2] == ["-m", "torch.distributed.run"] and "--nnodes=3" in argv
        assert argv[-len(pb.job.args) - 1:] == [
            str(workloads_dir() / "smoke.py") if name == "static" else "/shared/project/train.py", *pb.job.args]
        if name == "static":
            assert {f"--node-rank={task}", "--master-addr=node-a", "--master-port=29500",
                    "--nproc-per-node=4"} <= set(argv)
            assert e["HF_TOKEN"] == "from-the-submit-shell" and e["TORCH_DISTRIBUTED_DEBUG"] == "INFO"
            assert e["NCCL_DEBUG_FILE"] == f"{tmp_path}/ddptui-4242-nccl.%h.%p.log"
        else:
            assert {"--rdzv-backend=c10d", "--rdzv-endpoint=node-a:29400", "--rdzv-id=4242"} <= set(argv)
            assert not any(a.startswith("--node-rank") for a in argv)
            assert e["DDPTUI_BACKEND"] == "gloo" and e["OMP_NUM_THREADS"] == "1" and e["NCCL_DEBUG_FILE"] is None


def test_script_stops_when_a_secret_is_not_in_the_submitting_environment(tmp_path: Path) -> None:
    script = tmp_path / "job.sbatch"
    script.write_text(_script("static"))
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=tmp_path,
                       env=_fake_slurm(tmp_path), timeout=60)
    assert r.returncode != 0 and "set HF_TOKEN in the environment you submit from" in r.stderr
    assert not (tmp_path / "srun.args").exists()  # nothing was started


# ---- --check --------------------------------------------------------------------------------------

SEED_MISTAKES = [  # (line, id) in tests/data/slurm/seed.sbatch
    (6, "no-gpu-request"), (7, "ntasks-per-node-with-torchrun"), (10, "hard-coded-nodelist"),
    (18, "nccl-ib-disabled"), (33, "task-var-in-batch-shell"),
    (40, "literal-master-addr"), (40, "srun-per-node-loop"), (40, "srun-no-kill-on-bad-exit"),
    (40, "unlabeled-output"),
    (43, "literal-master-addr"), (43, "srun-no-kill-on-bad-exit"), (43, "unlabeled-output"),
]


def test_check_names_each_of_the_seed_scripts_mistakes_on_its_line() -> None:
    text = (DATA / "seed.sbatch").read_text()
    found = check_script(text, "seed.sbatch")
    assert [(m.line, m.id) for m in found] == SEED_MISTAKES
    by_id = {m.id: m for m in found}
    lines = text.splitlines()
    assert "--nodelist=node02" in lines[by_id["hard-coded-nodelist"].line - 1]
    assert by_id["nccl-ib-disabled"].cause == "ib-socket-mismatch"
    assert by_id["ntasks-per-node-with-torchrun"].cause == "duplicate-gpu"
    assert "192.168.0.101" in by_id["literal-master-addr"].message
    assert "40, 43" in by_id["srun-per-node-loop"].message
    assert all(m.fix for m in found)


@pytest.mark.parametrize("name", GOLDEN)
def test_check_finds_nothing_in_our_own_scripts(name: str) -> None:
    assert check_script(_script(name)) == []


@pytest.mark.parametrize("text, expected", [
    # the shape ddptui writes, by hand: -K1, -l, the rank escaped inside double quotes
    ('#SBATCH -N2 --ntasks-per-node=1 --gpus-per-node=4\n'
     'srun -K1 -l bash -c "torchrun --nnodes=2 --node-rank=\\$SLURM_NODEID train.py"\n', []),
    # expanded by the batch shell inside a double-quoted bash -c; a continuation keeps the first line's number
    ('#SBATCH --gres=gpu:4\nsrun --kill-on-bad-exit=1 --label \\\n  bash -c "torchrun --node_rank=$SLURM_PROCID x.py"\n',
     [(2, "task-var-in-batch-shell")]),
    ('#SBATCH --gpus=8\nexport MASTER_ADDR=10.0.0.1\nsrun -K1 -l --export=ALL,NCCL_IB_HCA=mlx5 torchrun t.py\n',
     [(2, "literal-master-addr"), (3, "export-all-with-values")]),
    ('#!/bin/bash\necho start\n#SBATCH --gpus-per-node=4\n', [(3, "late-sbatch-directive")]),
    ('# ddptui-check: ignore=no-gpu-request\nsrun -K1 -l python -m torch.distributed.run t.py\n', []),
    # a comment or a single-quoted string is not code
    ("#SBATCH --gpus-per-node=2\n# export NCCL_IB_DISABLE=1\necho '$SLURM_NODEID'\n", []),
    # however srun is started, it is srun
    ("#SBATCH --gpus-per-node=2\nexec /usr/bin/srun torchrun t.py\n",
     [(2, "srun-no-kill-on-bad-exit"), (2, "unlabeled-output")]),
    # srun that does not run torchrun (a probe) needs neither -K nor --label
    ("srun hostname\n", []),
    # a fixed node rank on a 2-node step, however torchrun's argparse reads it: every node is rank 0
    ("#SBATCH -N2 --gpus-per-node=4\nsrun -K1 -l torchrun --nnodes=2 --node_rank 0 t.py\n", [(2, "literal-node-rank")]),
    ("#SBATCH -N2 --gpus-per-node=4\nsrun -K1 -l torchrun --nnodes 2 --node-rank=1 t.py\n", [(2, "literal-node-rank")]),
    # the last one given is the one taken, and c10d assigns the ranks itself (the fixed one is ignored)
    ("#SBATCH -N2 --gpus-per-node=4\nsrun -K1 -l torchrun --nnodes=2 --node_rank=0 --node_rank=$SLURM_NODEID t.py\n",
     [(2, "task-var-in-batch-shell")]),
    ("#SBATCH -N2 --gpus-per-node=4\nsrun -K1 -l torchrun --nnodes=2 --rdzv-backend=c10d --node_rank=0 t.py\n", []),
])
def test_check_reads_the_script_as_bash_does(text: str, expected: list) -> None:
    assert [(m.line, m.id) for m in check_script(text)] == expected



REAL = {  # tests/data/slurm/real/SOURCES.md: each script verbatim, and what its thread established
    "trixie-52-two-sruns-fixed-node-rank.sbatch": [  # failed: both nodes of each step were node_rank 0, then 1
        (9, "srun-no-kill-on-bad-exit"), (9, "unlabeled-output"), (9, "literal-node-rank"),
        (10, "srun-no-kill-on-bad-exit"), (10, "unlabeled-output"), (10, "literal-node-rank")],
    # worked on 20 nodes of AWS EFA: NCCL_IB_DISABLE=1 beside FI_PROVIDER=efa is no fallback to sockets
    "torchtitan-63-efa-worked.sbatch": [(55, "srun-no-kill-on-bad-exit"), (55, "unlabeled-output")],
    # worked, one node; its srun's -l comes after "${AUTO_RESUME_ARGS[@]}"
    "awsome-1112-one-node-worked.sbatch": [],
    # failed: the merged fix escapes $SLURM_PROCID (line 37's string, whose line 44 holds it; 27 sets NODE_RANK)
    "gritlm-62-procid-in-batch-shell.sbatch": [(27, "task-var-in-batch-shell"), (37, "task-var-in-batch-shell")],
    # torchrun held in CMD="..." and run by `srun ... bash -c "$CMD"`: before the fix, no GPU request
    "coreweave-1a3dc03-before-no-gpu-request.sbatch": [
        (9, "no-gpu-request"), (80, "srun-no-kill-on-bad-exit"), (80, "unlabeled-output")],
    "coreweave-1a3dc03-fixed-worked.sbatch": [(81, "srun-no-kill-on-bad-exit"), (81, "unlabeled-output")],
    # srun's options and torchrun in variables, --role $(hostname) with --tee naming each line's node
    "stas00-744d01e-torchrun-launcher-worked.sbatch": [],
    "picotron-486c176-static-rank-in-batch-shell.sbatch": [
        (60, "task-var-in-batch-shell"), (72, "srun-no-kill-on-bad-exit"), (72, "unlabeled-output")],
    # the same expanded --node_rank under c10d, which assigns the ranks itself: no mistake
    "picotron-bd6b8a0-c10d-worked.sbatch": [(74, "srun-no-kill-on-bad-exit"), (74, "unlabeled-output")],
    "cscfi-1-one-node-worked.sbatch": [],  # one task, torchrun --standalone
    "bigscience-ad17103-nproc8-on-gres4.sbatch": [  # GPUS_PER_NODE=8 in LAUNCHER, --gres=gpu:4
        (198, "srun-no-kill-on-bad-exit"), (198, "unlabeled-output"), (198, "nproc-over-gpus")],
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_check_on_real_scripts_says_what_their_threads_established(name: str) -> None:
    """Scripts users wrote, collected with what was found wrong (or that they worked): two that
    worked drew false alarms (nccl-ib-disabled on EFA; -K and --label on a one-node job, its -l
    unseen after an array's expansion), the two sruns with a fixed --node_rank went unnamed, and a
    torchrun held in a variable was not seen at all (no GPU request unnamed). -K and --label on a
    multi-node step are advice even where the job worked."""
    text = (DATA / "real" / name).read_text()
    assert [(m.line, m.id) for m in check_script(text, name)] == REAL[name]


@pytest.mark.parametrize("text, expected", [
    # torchrun straight in the batch shell of a 2-node job: one node runs it (accelerate#2816's "I forgot srun")
    ("#SBATCH --nodes=2 --gpus-per-node=4\ntorchrun --nnodes=2 --nproc-per-node=4 train.py\n",
     [(2, "torchrun-without-srun")]),
    ("#SBATCH -N 2 --gpus-per-node=4\npython -m torch.distributed.run --nnodes 2 train.py\n",
     [(2, "torchrun-without-srun")]),
    # one node: torchrun in the batch shell is the right way
    ("#SBATCH --nodes=1 --gpus-per-node=8\ntorchrun --nproc-per-node=8 train.py\n", []),
    # no --nnodes across nodes (llama-cookbook#491), or another count than the step's
    ("#SBATCH --nodes=2 --gpus-per-node=4\nsrun -K1 -l torchrun --nproc_per_node 4 --rdzv_id $RANDOM "
     "--rdzv_backend c10d --rdzv_endpoint $head:29500 train.py\n", [(2, "torchrun-nnodes")]),
    ("#SBATCH --nodes=4 --gpus-per-node=4\nsrun -K1 -l torchrun --nnodes=2 --rdzv-backend=c10d t.py\n",
     [(2, "torchrun-nnodes")]),
    # what torchrun is told comes from an array: not known here, nothing said
    ('#SBATCH --nodes=2 --gpus-per-node=4\nsrun -K1 -l torchrun "${TORCHRUN_ARGS[@]}" t.py\n', []),
    ("#SBATCH --nodes=2 --gpus-per-node=4\nsrun -K1 -l torchrun --nnodes=$SLURM_NNODES t.py\n", []),
    # a command the script prints before it runs it is said once, where it runs
    ('#SBATCH --nodes=2 --gpus-per-node=4\nCMD="torchrun --nproc_per_node 4 t.py"\necho $CMD\n'
     'srun -K1 -l bash -c "$CMD"\n', [(4, "torchrun-nnodes")]),
])
def test_check_sees_torchrun_across_the_nodes(text: str, expected: list) -> None:
    assert [(m.line, m.id) for m in check_script(text)] == expected

# ---- the command line -----------------------------------------------------------------------------

def test_cli_prints_or_writes_the_script(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["sbatch", str(DATA / "c10d.yaml")]) == 0
    assert capsys.readouterr().out == _script("c10d")
    out = tmp_path / "job.sbatch"
    out.write_text("old")
    out.chmod(0o644)
    assert main(["sbatch", str(DATA / "static.yaml"), "-o", str(out)]) == 0
    cap = capsys.readouterr()
    assert out.read_text() == _script("static")
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # it holds the job's env: private, also when it existed
    assert cap.out.splitlines() == [str(out), f"submit it with: sbatch {out}"]
    assert "HF_TOKEN" in cap.err and SECRET not in cap.err + cap.out


def test_cli_check_exit_codes_and_lines(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    seed = DATA / "seed.sbatch"
    assert main(["sbatch", "--check", str(seed)]) == 1
    out = capsys.readouterr().out
    assert f"{seed}:10: #SBATCH --nodelist=node02,node03,node04 pins" in out
    assert out.count("    fix: ") == len(SEED_MISTAKES)
    assert main(["sbatch", "--check", str(seed), "--json"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert [(m["line"], m["id"]) for m in got["mistakes"]] == SEED_MISTAKES
    ours = tmp_path / "ours.sbatch"
    ours.write_text(_script("static"))
    assert main(["sbatch", "--check", str(ours)]) == 0
    assert capsys.readouterr().out.strip() == f"{ours}: no known mistakes"


@pytest.mark.parametrize("argv, words", [
    (["sbatch", "--check", "{tmp}/nope.sbatch"], "no such file"),
    (["sbatch", "--check", "{tmp}"], "is a folder"),
    (["sbatch", "--check", "{tmp}/binary"], "binary file"),
    (["sbatch", "--check", "{tmp}/mine.yaml"], "not a batch script: sbatch wants #!"),  # sbatch refuses it too
    (["sbatch", "--check", "{tmp}/empty"], "not a batch script"),
    (["sbatch", "{tmp}/nope.yaml"], "no such playbook file"),
    (["sbatch", "{bad}"], "nothing was run"),
    (["sbatch"], "give a PLAYBOOK"),
    (["sbatch", "{tmp}/x.yaml", "--check", "{tmp}/binary"], "takes no PLAYBOOK"),
    (["sbatch", str(DATA / "c10d.yaml"), "-o", "{tmp}"], "is not a regular file"),
    (["sbatch", str(DATA / "c10d.yaml"), "-o", "{tmp}/fifo"], "is not a regular file"),  # as root, /dev/null was replaced
    (["sbatch", "{tmp}/mine.yaml", "-o", "{tmp}/mine.yaml"], "is the input"),
])
def test_cli_bad_input_is_one_clear_line_and_exit_2(argv: list[str], words: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "binary").write_bytes(b"\x7fELF\x00\x01\x02")
    os.mkfifo(tmp_path / "fifo")
    mine = (DATA / "c10d.yaml").read_text()
    (tmp_path / "mine.yaml").write_text(mine)
    (tmp_path / "empty").write_text("")
    bad = Path(__file__).resolve().parents[1] / "data" / "playbooks" / "bad" / "missing-field.yaml"
    assert main([a.format(tmp=tmp_path, bad=bad) for a in argv]) == 2
    cap = capsys.readouterr()
    assert words in cap.err and "Traceback" not in cap.err and cap.out == ""
    assert stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode) and (tmp_path / "mine.yaml").read_text() == mine


def test_a_write_cut_short_leaves_the_old_script_and_says_so(tmp_path: Path) -> None:
    """A file-size limit (or a full disk) stops the write: exit 2, and the file is as it was, not a
    script cut mid-line that `sbatch` would run."""
    out = tmp_path / "job.sbatch"
    out.write_text("#!/bin/bash\necho the old script\n")
    r = subprocess.run(["bash", "-c", 'ulimit -f 1 && exec "$@"', "-", sys.executable, "-m", "ddptui", "sbatch",
                        str(DATA / "static.yaml"), "-o", str(out)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "tui")})
    assert len(_script("static").encode()) > 1024  # longer than the limit lets through
    assert r.returncode == 2 and "cannot write it" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert out.read_text() == "#!/bin/bash\necho the old script\n" and r.stdout == ""
    assert [p.name for p in tmp_path.iterdir()] == ["job.sbatch"]  # no half-written file beside it


def test_a_token_in_job_args_is_warned_about() -> None:
    pb = load_playbook(DATA / "c10d.yaml")
    out = render_sbatch(replace(pb, job=replace(pb.job, args=("--hub-token", SECRET))))
    assert any("job.args hold a secret-looking value" in w for w in out.warnings)
