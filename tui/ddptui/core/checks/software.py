"""The software check: python, torch and its backends, as the job's interpreter sees them."""

from __future__ import annotations

import json
from dataclasses import dataclass

# Runs on the node with the job's python and env. Standard library first, so that a missing torch
# is reported as such instead of as a traceback.
PROBE = r"""
import json, os, platform, socket, sys
out = {"python": platform.python_version(), "executable": sys.executable,
       "hostname": socket.gethostname(), "cpus": os.cpu_count()}
try:
    import torch, torch.distributed as dist
    out["torch"] = torch.__version__.split("+")[0]
    out["cuda"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["gpus"] = torch.cuda.device_count() if out["cuda_available"] else 0
    out["gloo"] = bool(dist.is_available() and dist.is_gloo_available())
    out["nccl_available"] = bool(dist.is_available() and dist.is_nccl_available())
    try:
        v = torch.cuda.nccl.version() if out["nccl_available"] else None
        out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else (str(v) if v else None)
    except Exception:
        out["nccl"] = None
except Exception as e:
    out["torch_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Verdict:
    check: str
    status: str  # pass, warn, fail, skip
    summary: str


def parse_probe(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    return {}


def judge_software(facts: dict, backend: str, nproc: int) -> list[Verdict]:
    """Turn the probe's facts into verdicts for this node."""
    out: list[Verdict] = []
    if not facts:
        return [Verdict("python", "fail", "the job's python did not run (see the output)")]
    out.append(Verdict("python", "pass", f"Python {facts['python']} at {facts['executable']}"))
    if "torch" not in facts:
        out.append(Verdict("torch", "fail", f"torch cannot be imported: {facts.get('torch_error', '?')}"))
        return out
    out.append(Verdict("torch", "pass", f"torch {facts['torch']}" + (f", CUDA {facts['cuda']}" if facts.get("cuda") else ", CPU build")))
    if backend == "nccl":
        if not facts.get("cuda_available"):
            out.append(Verdict("backend", "fail", "backend nccl needs NVIDIA GPUs; torch sees none"))
        elif facts.get("gpus", 0) < nproc:
            out.append(Verdict("backend", "fail", f"{facts['gpus']} GPUs, {nproc} processes need one each"))
        else:
            out.append(Verdict("backend", "pass", f"nccl {facts.get('nccl') or '?'}, {facts['gpus']} GPUs"))
    elif backend == "gloo" or not facts.get("cuda_available"):
        ok = facts.get("gloo")
        out.append(Verdict("backend", "pass" if ok else "fail", "gloo available" if ok else "torch has no gloo backend"))
    else:
        out.append(Verdict("backend", "pass", f"auto: nccl on {facts['gpus']} GPUs"))
    return out


def probe_view(software: dict) -> dict:
    """The software dict in the shape judge_software reads."""
    if not software or not software.get("python"):
        return {}
    d = dict(software)
    d.setdefault("executable", software.get("executable") or "?")
    if not d.get("torch"):
        d.pop("torch", None)
        d["torch_error"] = d.get("torch_error") or "not importable"
    return d
