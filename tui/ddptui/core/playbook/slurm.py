"""The playbook's `slurm:` block: what to ask Slurm for, or which allocation to use.

    transport: slurm
    slurm:
      partition: gpu
      nodes: 3              # how many (then `nodes:` may be omitted)
      gpus_per_node: 4
      time: "00:30:00"
      account: myproject    # optional, as are qos and constraint
      extra_args: ["--exclusive"]
      job: 12345            # use this allocation instead of asking for one
      pending_timeout: 300  # seconds to wait while pending
      keep: false           # keep the allocation when the run ends

Every value ends up as one argument of `salloc` and on one `#SBATCH` line of `ddptui sbatch`, so
none may hold a control character (a newline would start another line of the batch script).
"""

from __future__ import annotations

import os
import re
from typing import Any

from yaml.nodes import Node, ScalarNode

from .fields import MAX_NAME, _Ctx, _mapping, _nproc, _seconds, _str_list, _typed
from .model import SlurmOptions
from .names import MAX_NODES

SLURM_KEYS = ("partition", "nodes", "gpus_per_node", "time", "account", "qos", "constraint", "extra_args",
              "job", "pending_timeout", "keep")
# sbatch(1) --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds; or INFINITE / UNLIMITED.
_TIME = re.compile(r"^(\d+(:\d{1,2}){0,2}|\d+-\d{1,2}(:\d{1,2}){0,2}|INFINITE|UNLIMITED)$", re.IGNORECASE)
_JOB = re.compile(r"^[1-9][0-9]{0,18}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _word(v: Any) -> str | None:
    if not v:
        return "is empty"
    if _CONTROL.search(v):
        return "holds a control character (a newline, a tab...); Slurm names never do"
    if v != v.strip():
        return "starts or ends with a space"
    return None if len(v) <= MAX_NAME else f"is {len(v):,} characters long; at most {MAX_NAME} are allowed"


def _count(v: Any) -> str | None:
    return _nproc(v) if v <= MAX_NODES or v <= 0 else f"must be at most {MAX_NODES:,}, not {v:,}"


def parse_slurm(ctx: _Ctx, node: Node | None) -> tuple[SlurmOptions | None, dict[str, tuple[Node, Node]]]:
    """The block's options (None when there is no block) and its keys' YAML nodes; problems go to `ctx`."""
    if node is None:
        return None, {}
    keys = _mapping(ctx, node, "slurm", SLURM_KEYS)
    kw: dict[str, Any] = {}
    for key, (_, v) in keys.items():
        w = f"slurm.{key}"
        if key in ("partition", "account", "qos", "constraint"):
            kw[key] = _typed(ctx, v, w, str, _word)
        elif key in ("nodes", "gpus_per_node"):
            kw[key] = _typed(ctx, v, w, int, _count)
        elif key == "time":
            kw[key] = _time(ctx, v, w)
        elif key == "extra_args":
            kw[key] = _extra_args(ctx, v, w)
        elif key == "job":
            kw[key] = _job_id(ctx, v, w)
        elif key == "pending_timeout":
            kw[key] = _typed(ctx, v, w, float, _seconds)
        elif key == "keep":
            kw[key] = _typed(ctx, v, w, bool)
    return SlurmOptions(**{k: v for k, v in kw.items() if v is not None}), keys


def _time(ctx: _Ctx, node: Node, where: str) -> str | None:
    val = _typed(ctx, node, where, (str, int))
    if val is None:
        return None
    text = str(val)
    if not _TIME.match(text):
        ctx.add(node, f"{where} {text!r} is not a Slurm time limit",
                'write minutes (30), "HH:MM:SS" ("01:30:00") or "D-HH:MM:SS" ("1-00:00:00"), quoted')
        return None
    return text


def _extra_args(ctx: _Ctx, node: Node, where: str) -> tuple[str, ...]:
    args = _str_list(ctx, node, where)
    items = getattr(node, "value", [])
    for i, arg in enumerate(args):
        at = items[i] if i < len(items) else node
        if not arg.startswith("-"):
            ctx.add(at, f"{where}[{i}] {arg!r} is not an option", "write each as an option with its value: "
                    '"--exclusive", "--mem=0" (one item each)')
        elif _CONTROL.search(arg):
            ctx.add(at, f"{where}[{i}] holds a control character (a newline would start another #SBATCH line)")
    return args


def _job_id(ctx: _Ctx, node: Node, where: str) -> str | None:
    val = _typed(ctx, node, where, (int, str))
    if val is None:
        return None
    text = str(val)
    if not _JOB.match(text):
        ctx.add(node, f"{where} {text!r} is not a Slurm job id", "write the number squeue shows, e.g. 12345")
        return None
    return text


def check_slurm_nodes(ctx: _Ctx, slurm: SlurmOptions | None, keys: dict[str, tuple[Node, Node]],
                      transport: str, named: int, transport_node: Node | None, top: Node) -> None:
    """A slurm playbook knows how many nodes it wants: named in `nodes:`, counted in `slurm.nodes`, or
    an allocation (`slurm.job`, or this shell's SLURM_JOB_ID)."""
    if transport != "slurm":
        return
    if slurm is not None and slurm.nodes and named and slurm.nodes != named:
        ctx.add(keys["nodes"][1], f"slurm.nodes is {slurm.nodes} but `nodes:` names {named}",
                "drop one of them: the named nodes are the ones allocated")
    if named:
        return
    if slurm is not None and (slurm.nodes or slurm.job):
        return
    if os.environ.get("SLURM_JOB_ID"):  # inside an allocation: its nodes are the job's
        return
    at: Node = transport_node if isinstance(transport_node, ScalarNode) else top
    ctx.add(at, "transport: slurm needs to know which nodes: none are named and no allocation is given",
            "add `slurm: {nodes: 3}` (how many to allocate), `nodes: node[02-04]`, or `slurm: {job: ID}`")
