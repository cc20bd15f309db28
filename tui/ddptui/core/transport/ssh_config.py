"""Where `ssh NAME` would go: ~/.ssh/config through paramiko's SSHConfig, the playbook's values on top.

HostName, User, Port, IdentityFile, IdentitiesOnly, ProxyJump (hops parsed here; paramiko parses
the keyword but never uses it), ConnectTimeout, ServerAliveInterval, UserKnownHostsFile and
StrictHostKeyChecking=accept-new.
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from ..errors import UsageError
from ..playbook.model import SSHOptions

DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")


@dataclass
class Target:
    """One host to reach, as ssh_config and the playbook resolve it."""

    alias: str
    hostname: str
    port: int = 22
    user: str = field(default_factory=lambda: os.environ.get("USER") or "root")
    identities: list[str] = field(default_factory=list)
    identities_only: bool = False
    proxy_jump: list[str] = field(default_factory=list)
    connect_timeout: float = 10.0
    keepalive: int = 15
    known_hosts_files: list[Path] = field(default_factory=list)
    host_key_alias: str | None = None
    strict: str = "yes"  # yes | accept-new
    ciphers: list[str] = field(default_factory=lambda: list(CIPHERS))  # in order of preference


# AES-GCM first: an AEAD, decrypted and authenticated in one pass. Read by paramiko, CTR + HMAC-SHA2
# costs ~1.5x the CPU per byte (4 nodes x 81 MB: 1.56 s against 1.00 s), and a flood of output is
# what ddptui reads. OpenSSH's own list but chacha20-poly1305 (paramiko has none); CBC is refused.
CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr", "aes192-ctr", "aes256-ctr")


def ciphers(spec: str | None) -> list[str]:
    """ssh_config's `Ciphers` read as OpenSSH reads it, against ddptui's list: a list replaces it,
    `+list` appends, `-list` removes (wildcards allowed), `^list` puts first. Names paramiko cannot
    use are left for the transport to drop (see ssh.py)."""
    if not spec:
        return list(CIPHERS)
    op, names = (spec[0], spec[1:]) if spec[0] in "+-^" else ("", spec)
    given = [n.strip() for n in names.split(",") if n.strip()]
    if op == "+":
        return list(CIPHERS) + [n for n in given if n not in CIPHERS]
    if op == "-":
        return [c for c in CIPHERS if not any(fnmatch.fnmatchcase(c, pat) for pat in given)]
    if op == "^":
        return given + [c for c in CIPHERS if c not in given]
    return given


def _load_config(path: Path | None) -> paramiko.SSHConfig:
    p = Path(path).expanduser() if path else Path("~/.ssh/config").expanduser()
    if not p.is_file():
        return paramiko.SSHConfig()
    try:  # paramiko's words ("Unparsable line HostName") or Python's (int('abc')) name no file
        cfg = paramiko.SSHConfig.from_path(str(p))
        for entry in cfg._config:  # numbers paramiko keeps as text until a lookup int()s them
            for key in ("port", "connecttimeout", "serveraliveinterval"):
                if key in entry["config"] and not str(entry["config"][key]).isdigit():
                    raise ValueError(f"{key} {entry['config'][key]!r} is not a number")
    except (paramiko.SSHException, ValueError, TypeError, KeyError, OSError, UnicodeDecodeError) as e:
        line = _line_of(p, str(e))
        raise UsageError(f"ssh_config {p}{f':{line}' if line else ''}: cannot use it: {e}") from None
    return cfg


def _line_of(p: Path, message: str) -> int | None:
    """The line paramiko's (or our) words are about, which they do not number: the line itself
    ("Unparsable line HostName"), or the first line of the keyword that holds the quoted value
    ("port 'abc' is not a number", "Missing parameter to Match 'foo' keyword")."""
    try:
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    if message.startswith("Unparsable line "):
        target = message.removeprefix("Unparsable line ").strip()
        hits = [i for i, x in enumerate(lines, 1) if x.strip() == target]
    else:
        quoted = re.findall(r"'([^']*)'", message)
        words = message.lower().split()
        key = next((w for w in words if w in ("port", "connecttimeout", "serveraliveinterval", "match")), None)
        hits = [i for i, x in enumerate(lines, 1) if quoted and quoted[0] in re.split(r"[\s=]+", x.strip())
                and (key is None or x.strip().lower().startswith(key))]
    return hits[0] if hits else None


_STDIN = threading.Lock()


def _lookup(cfg: paramiko.SSHConfig, alias: str) -> paramiko.SSHConfigDict:
    """paramiko's lookup, but a `Match exec` command gets no stdin: paramiko runs it through invoke,
    which would read ddptui's own stdin in a thread and forward it (keys meant for the TUI, or an
    error where stdin cannot be read). The TUI reads the terminal through sys.__stdin__, untouched."""
    with _STDIN:
        saved, sys.stdin = sys.stdin, io.StringIO()
        try:
            return cfg.lookup(alias)
        finally:
            sys.stdin = saved


def resolve(alias: str, cfg: paramiko.SSHConfig, opts: SSHOptions, *, host: str | None = None,
            user: str | None = None, port: int | None = None) -> Target:
    c = _lookup(cfg, alias)
    ids = c.get("identityfile") or []
    jump = c.get("proxyjump")
    jumps = [] if not jump or jump.lower() == "none" else [h.strip() for h in jump.split(",") if h.strip()]
    khf = c.get("userknownhostsfile")
    files = [Path(os.path.expanduser(f)) for f in (khf.split() if khf else ["~/.ssh/known_hosts", "~/.ssh/known_hosts2"])]
    files.append(Path("/etc/ssh/ssh_known_hosts"))
    strict = str(c.get("stricthostkeychecking", "yes")).lower()
    return Target(
        alias=alias,
        hostname=host or c.get("hostname", alias),
        port=port or int(c.get("port", 22)),
        user=user or c.get("user") or os.environ.get("USER") or "root",
        identities=[os.path.expanduser(i) for i in ids],
        identities_only=c.as_bool("identitiesonly") if "identitiesonly" in c else False,
        proxy_jump=jumps,
        connect_timeout=float(c.get("connecttimeout", opts.connect_timeout)),
        keepalive=int(c.get("serveraliveinterval", opts.keepalive)),
        known_hosts_files=files,
        host_key_alias=c.get("hostkeyalias"),
        strict="accept-new" if strict == "accept-new" else "yes",
        ciphers=ciphers(c.get("ciphers")),
    )


def _parse_hop(spec: str) -> tuple[str | None, str, int | None]:
    """'user@host:port' -> (user, host, port)."""
    user = None
    if "@" in spec:
        user, spec = spec.rsplit("@", 1)
    port = None
    if spec.startswith("["):
        host, _, rest = spec[1:].partition("]")
        port = int(rest[1:]) if rest.startswith(":") else None
    elif spec.count(":") == 1:
        host, p = spec.split(":")
        port = int(p)
    else:
        host = spec
    return user, host, port
