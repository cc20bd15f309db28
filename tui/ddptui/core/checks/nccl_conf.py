"""NCCL's own configuration files: what a node's NCCL reads besides its environment.

NCCL (src/misc/param.cc, `initEnv`) reads `$NCCL_CONF_FILE` where that is set and not empty, else
`~/.nccl.conf` (the home /etc/passwd gives the user), and then `/etc/nccl.conf`. Each line
`NAME=VALUE` (one that starts with `#`, or has no `=`, is skipped; nothing is stripped: `NAME==eth0`
sets `=eth0`) is set with `setenv(NAME, VALUE, 0)`: a variable already set stays, so the job's
environment wins, then the first file, then /etc/nccl.conf. Cloud images and admins put
NCCL_TOPO_FILE, NCCL_GRAPH_FILE, NCCL_IB_DISABLE or NCCL_SOCKET_IFNAME there (Azure's ND/NC
images: NVIDIA/nccl#1008, #1240, both fixed by removing them), where neither `env` nor the
playbook shows them; the checks' prediction of NCCL's choices reads them as NCCL does.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .facts import NodeFacts
    from .probe import Section

MARK = "# NCCL reads "  # the probe's line before each file it read (in the env cell as it is)


def command(conf_file: str | None = None) -> str:
    """The probe's shell command: each file NCCL would read, in its order, as `MARK path` and then its
    NCCL_ lines (nothing else of the file leaves the node). `conf_file`: the playbook's NCCL_CONF_FILE,
    which the job has and the probe's shell may not."""
    first = shlex.quote(conf_file) if conf_file else (
        '"${NCCL_CONF_FILE:-$(getent passwd "$(id -u)" | cut -d: -f6)/.nccl.conf}"')
    return (f'for f in {first} /etc/nccl.conf; do [ -f "$f" ] && [ -r "$f" ] || continue; '
            f'echo "{MARK}$f"; grep -a "^NCCL_[A-Za-z0-9_]*=" "$f"; done; true')


def parse(text: str) -> dict[str, dict[str, str]]:
    """The probe's output -> {file: {name: value}}, in NCCL's order; within a file the first line of a
    name is the one setenv keeps."""
    out: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if line.startswith(MARK):
            current = out.setdefault(line[len(MARK):], {})
        elif current is not None and not line.startswith("#"):
            name, sep, value = line.partition("=")
            if sep and name.startswith("NCCL_"):
                current.setdefault(name, value)
    return out


def effective(files: dict[str, dict[str, str]]) -> dict[str, str]:
    """What the files set that the environment does not (the earlier file wins, as setenv(.., 0) does)."""
    env: dict[str, str] = {}
    for values in files.values():
        for name, value in values.items():
            env.setdefault(name, value)
    return env


def origin(name: str, files: dict[str, dict[str, str]]) -> str | None:
    """The file whose line NCCL keeps for `name` (None: no file sets it)."""
    return next((path for path, values in files.items() if name in values), None)


def from_file(nf: NodeFacts, name: str, playbook_env: dict[str, str]) -> str | None:
    """The file whose line gives `name` the value NCCL sees on the node: None where the playbook or
    the shell sets it (the environment wins) or no file does."""
    if name in playbook_env or name in nf.shell_env:
        return None
    return origin(name, nf.nccl_conf)


def take(nf: NodeFacts, section: Section | None, playbook_env: dict[str, str]) -> None:
    """The probe's section into the node's facts: its files (`nccl_conf`), the env NCCL will see (the
    files', then the shell's, then the playbook's), and the env cell's evidence with the files in it."""
    nf.nccl_conf = parse(section.output) if section is not None else {}
    nf.env = {**effective(nf.nccl_conf), **nf.shell_env, **playbook_env}
    if nf.nccl_conf and section is not None:
        env_cmd, env_out = nf.evidence.get("env", ("env", ""))
        nf.evidence["env"] = (f"{env_cmd}; {section.command}", f"{env_out}\n{section.output}".strip("\n"))
