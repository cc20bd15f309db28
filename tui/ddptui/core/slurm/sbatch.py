"""`ddptui sbatch`: a playbook as a Slurm batch script (one task per node, each running torchrun).

The script asks Slurm for nodes and never names them; inside the allocation it takes the first node
as the master, prints one `ddptui: slurm job ID nodes A,B,C master A:PORT` line (attach and diagnose
map srun's `--label` task ids to node names with it: task i runs on the i-th node), exports the
job's environment in the batch shell (so it wins over the environment sbatch was called from), and
starts ONE srun step. Values reach the step's command through exported variables and positional
arguments, never spliced into its single-quoted text, so no value can break the quoting.

Pure code: the same playbook gives the same script, byte for byte (golden files test it).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..launch.plan import base_env, env_for, torchrun_flags
from ..playbook.loader import resolve_builtin
from ..playbook.model import Playbook
from ..redact import Redactor, shape_of

HEADER_RE = re.compile(r"^ddptui: slurm job (\d+) nodes (\S+) master (\S+)$")
_SAFE_WORD = re.compile(r"^[A-Za-z0-9_./=:,+%@-]+$")
_PATH_OK = re.compile(r"^[A-Za-z0-9_./+@%-]+$")  # written bare on an #SBATCH line


@dataclass(frozen=True)
class Sbatch:
    text: str
    warnings: list[str] = field(default_factory=list)  # what the script cannot express: said on stderr


def job_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "ddptui"


def _inner_word(w: str) -> str:
    """One word of the single-quoted step command: bare when safe, else double-quoted (it holds a
    `$VAR` that must expand on the node). Every value here comes from ints and fixed names."""
    if _SAFE_WORD.match(w):
        return w
    if re.search(r"[\"'\\`\n]", w):  # never: the values are passed as variables instead
        raise ValueError(f"cannot quote {w!r} inside the step command")
    return f'"{w}"'


def script_path(pb: Playbook) -> str:
    """The script as the nodes find it: a builtin's absolute path in this package (the nodes must
    see the same installation, e.g. a shared home), a relative script under job.workdir (else under
    the playbook's folder)."""
    script = pb.job.script
    builtin = resolve_builtin(script)
    if builtin is not None:
        return str(builtin)
    if posixpath.isabs(script):
        return script
    if pb.job.workdir:
        return posixpath.join(pb.job.workdir, script)
    if pb.path is not None:
        return str(Path(pb.path).resolve().parent / script)
    return script


def _common(pb: Playbook, what: str, values: list, default, warnings: list[str]):
    """The value every node agrees on, else the job's default and a warning (one step, one command)."""
    distinct = sorted({repr(v) for v in values})
    if len(distinct) <= 1:
        return values[0] if values else default
    warnings.append(f"the nodes' {what} differ ({', '.join(distinct)}); a batch script runs one command on "
                    f"every node: it uses {default!r}")
    return default


def _env(pb: Playbook, warnings: list[str]) -> tuple[dict[str, str], list[str]]:
    """The env every node gets (job.env, and node env that is the same on every node); the names whose
    value differs by node go to a comment and a warning."""
    env = base_env(pb.job)
    env.update(pb.job.env_dict())
    per_node = [env_for(pb, n) for n in pb.nodes]
    differ: list[str] = []
    for k in sorted({k for e in per_node for k in e}):
        vals = {e.get(k) for e in per_node}
        if len(vals) == 1:
            env[k] = per_node[0][k]
        else:
            differ.append(k)  # not even the job's value: it would be wrong on the nodes that override it
            env.pop(k, None)
    if differ:
        warnings.append(f"per-node env cannot be expressed in one batch script, left out: {', '.join(differ)} "
                        "(set them in the job's env if one value fits every node)")
    return env, differ


def render_sbatch(pb: Playbook) -> Sbatch:
    warnings: list[str] = []
    job, slurm = pb.job, pb.slurm
    lines = ["#!/bin/bash",
             f"# Written by `ddptui sbatch` from {Path(pb.path).name if pb.path else 'a playbook'} "
             f"(playbook {pb.name!r}): one task per node, each running torchrun.",
             "# Submit with: sbatch THIS_FILE; the output goes to ddptui-<job name>-<job id>.out, one line",
             "# per node and process, each line starting with its task id (= the node's index, see below).",
             f"#SBATCH --job-name={job_name(pb.name)}"]
    nnodes = (slurm.nodes if slurm else None) or len(pb.nodes)
    if nnodes:
        lines.append(f"#SBATCH --nodes={nnodes}")
    else:
        warnings.append("the playbook says neither how many nodes (slurm.nodes) nor which (nodes:): "
                        "the script asks for Slurm's default, one node")
    lines.append("#SBATCH --ntasks-per-node=1")
    nproc = _common(pb, "nproc_per_node", [pb.nproc_of(n) for n in pb.nodes], job.nproc_per_node, warnings)
    gpus = slurm.gpus_per_node if slurm else None
    if gpus is None and job.backend == "nccl":
        gpus = nproc  # NCCL needs GPUs, one per process; without a request a cgroup may hide them all
    if gpus:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    elif job.backend == "gloo":
        lines.append("# ddptui-check: ignore=no-gpu-request (backend gloo: the job runs on CPUs)")
    else:
        warnings.append("no GPUs are requested (slurm.gpus_per_node is not set): where Slurm constrains "
                        "devices the job sees none")
    for key in ("partition", "time", "account", "qos", "constraint"):
        val = getattr(slurm, key, None) if slurm else None
        if val:
            lines.append(f"#SBATCH --{key}={val}")
    extra = slurm.extra_args if slurm else ()
    lines += [f"#SBATCH {a}" for a in extra]
    lines.append("#SBATCH --output=ddptui-%x-%j.out")
    cd_line = None
    if job.workdir and _PATH_OK.match(job.workdir):
        lines.append(f"#SBATCH --chdir={job.workdir}")
    elif job.workdir:
        cd_line = f"cd -- {shlex.quote(job.workdir)}"
    if pb.nodes:
        names = ",".join(n.name for n in pb.nodes)
        lines += [f"# The playbook names {names}. Slurm picks the nodes here; to pin these (the job then",
                  f"# waits until exactly they are free): sbatch --nodelist={names} THIS_FILE"]
    if any(n.python for n in pb.nodes) or any(n.workdir for n in pb.nodes):
        warnings.append("per-node python/workdir are ignored: the script uses the job's (job.python, job.workdir)")
    lines += ["", "set -euo pipefail", ': "${SLURM_JOB_ID:?submit this script with sbatch}"']
    if cd_line:
        lines.append(cd_line)
    port = job.master_port
    lines += ["",
              "# The master is the allocation's first node; node_rank 0 runs there.",
              'nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")',
              'mapfile -t hosts <<<"$nodes"',
              "master=${hosts[0]}",
              "export DDPTUI_MASTER=$master",
              "# ddptui maps srun's --label task ids to node names with this line: task i runs on the i-th node.",
              f'echo "ddptui: slurm job $SLURM_JOB_ID nodes $(IFS=,; echo "${{hosts[*]}}") master $master:{port}"',
              "",
              "# The job's environment, exported here so that it wins over the environment sbatch was called",
              "# from (srun --export=ALL hands this shell's environment to every task)."]
    env, differ = _env(pb, warnings)
    redactor = Redactor.for_playbook(pb)
    secret_names: list[str] = []
    for k in sorted(env):
        v = env[k]
        if redactor.is_secret(k) or shape_of(v) or v.strip() in redactor.values:
            secret_names.append(k)
            lines.append(f'export {k}="${{{k}:?set {k} in the environment you submit from}}"')
        else:
            lines.append(f"export {k}={shlex.quote(v)}")
    if any(a.strip() in redactor.values or shape_of(a) for a in job.args):
        warnings.append("job.args hold a secret-looking value, and it is written into the script: pass it "
                        "through the job's env instead (which the script leaves to the submitting shell)")
    if secret_names:
        warnings.append(f"secret-looking values are not written into the script: {', '.join(secret_names)} "
                        "must be set in the environment you run sbatch from")
    if differ:
        lines.append(f"# Left out, their values differ by node: {', '.join(differ)}")
    if "NCCL_DEBUG" in env and "NCCL_DEBUG_FILE" not in env:
        lines += ["# NCCL_DEBUG is set: NCCL writes one log per node and process (it fills in %h, the host,",
                  "# and %p, the pid) next to the job's output, rather than all of them into the one file.",
                  'export NCCL_DEBUG_FILE="$PWD/ddptui-$SLURM_JOB_ID-nccl.%h.%p.log"']
    python = job.python or "python3"
    lines += [f"export DDPTUI_PYTHON={shlex.quote(python)}",
              f"export DDPTUI_SCRIPT={shlex.quote(script_path(pb))}"]
    static = job.rendezvous == "static"
    flags = torchrun_flags(job, "$SLURM_NNODES", nproc, "$DDPTUI_MASTER", "$SLURM_NODEID",
                           rdzv_id="$SLURM_JOB_ID")
    cpus = next((a.split("=", 1)[1] for a in extra if a.startswith("--cpus-per-task=")), None)
    srun = ["srun", "--kill-on-bad-exit=1", "--wait=60", "--label", "--unbuffered", '--nodes="$SLURM_NNODES"',
            "--ntasks-per-node=1", *([f"--cpus-per-task={cpus}"] if cpus else []), "--export=ALL"]
    inner = ['exec "$DDPTUI_PYTHON" -m torch.distributed.run', *(_inner_word(f) for f in flags),
             '"$DDPTUI_SCRIPT" "$@"']
    lines += ["",
              "# One step, one task per node (not a loop of srun -w NODE &: one step starts every node at",
              "# once and fails as one):",
              "#   --kill-on-bad-exit=1  a node that fails ends the others, instead of them hanging until a timeout",
              "#   --wait=60             once one task has ended, the others get 60 s to end too",
              "#   --label               each output line starts with its task id",
              (f"# --cpus-per-task={cpus} again on srun: since Slurm 22.05 a step does not inherit it."
               if cpus else "# Slurm gives each task 1 CPU unless asked: add --cpus-per-task=N to slurm.extra_args."),
              ("# $SLURM_NODEID is single-quoted: it expands on each node (in this shell it is always 0)."
               if static else "# c10d rendezvous: the nodes may start in any order; ranks are assigned as they join."),
              "# The job's arguments follow `bash` (the step command's $0) and reach torchrun as \"$@\".",
              "# shellcheck disable=SC2016  # the single-quoted variables expand on the nodes, on purpose",
              " ".join(srun) + " \\",
              "  bash -c '" + " ".join(inner[:2]) + " \\"]
    rest = inner[2:]
    for i in range(0, len(rest), 3):
        lines.append("    " + " ".join(rest[i:i + 3]) + ("'" if i + 3 >= len(rest) else "") + " \\")
    lines.append("  bash" + "".join(" " + shlex.quote(a) for a in job.args))
    return Sbatch("\n".join(lines) + "\n", warnings)


def write_sbatch(pb: Playbook) -> str:
    """The batch script for a playbook (warnings: render_sbatch)."""
    return render_sbatch(pb).text
