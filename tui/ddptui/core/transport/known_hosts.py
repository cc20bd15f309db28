"""known_hosts as OpenSSH reads it, for a host key policy of our own.

paramiko's HostKeys.load raises on any `@cert-authority` or `@revoked` line (InvalidHostKey is not
an SSHException, so it escapes), and its RejectPolicy raises a plain SSHException without the
fingerprint. So we read the files line by line and decide revoked / unknown / known / changed
ourselves, as OpenSSH does:

- `@revoked PATTERNS KEY`: that key is never accepted for a matching host, whatever another line
  says, whatever the flags;
- `@cert-authority PATTERNS KEY`: matching hosts prove themselves with a certificate. paramiko
  cannot check host certificates, so such a host is refused unless its plain key is known too;
- plain lines: exact names, hashed names (`|1|salt|hash`) and `[host]:port` for other ports,
  through paramiko's HostKeys; wildcard patterns work in the marker lines.

What cannot be used (unreadable lines, unknown markers) is skipped, and `skipped` says so.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry


def lookup_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


@dataclass(frozen=True)
class Marked:
    """One `@revoked` or `@cert-authority` line."""

    marker: str
    file: Path
    line: int
    patterns: tuple[str, ...]
    key: paramiko.PKey | None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class KnownHosts:
    files: list[Path]
    entries: list[tuple[Path, int, HostKeyEntry]] = field(default_factory=list)
    marked: list[Marked] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "file:line: why"
    _keys: paramiko.HostKeys = field(default_factory=paramiko.HostKeys)

    @classmethod
    def load(cls, files: list[Path]) -> KnownHosts:
        kh = cls(files)
        for f in files:
            try:
                text = f.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
            except OSError as e:
                kh.skipped.append(f"{f}: cannot read: {e.strerror}")
                continue
            for n, raw in enumerate(text.splitlines(), 1):
                line = raw.strip()
                if line and not line.startswith("#"):
                    kh._read_line(f, n, line)
        return kh

    def _read_line(self, f: Path, n: int, line: str) -> None:
        marker = ""
        if line.startswith("@"):
            marker, _, line = line.partition(" ")
            line = line.strip()
            if marker not in ("@revoked", "@cert-authority"):
                self.skipped.append(f"{f}:{n}: {marker} lines are not supported, skipped")
                return
        try:
            entry = HostKeyEntry.from_line(line, n)
        except Exception as e:  # InvalidHostKey, binascii errors, unknown key types
            entry = None
            why = f"unreadable entry skipped ({type(e).__name__})"
        else:
            why = "unsupported key type, skipped"
        if marker == "@cert-authority":  # the hosts matter, not the key: we refuse them either way
            patterns = tuple(line.split(None, 1)[0].split(",")) if line else ()
            self.marked.append(Marked(marker, f, n, patterns, entry.key if entry else None))
            return
        if entry is None or entry.key is None:
            self.skipped.append(f"{f}:{n}: {marker + ' ' if marker else ''}{why}")
            return
        if marker == "@revoked":
            self.marked.append(Marked(marker, f, n, tuple(entry.hostnames), entry.key))
            return
        self.entries.append((f, n, entry))
        for h in entry.hostnames:
            self._keys.add(h, entry.key.get_name(), entry.key)

    def known_keys(self, name: str) -> list[paramiko.PKey]:
        found = self._keys.lookup(name)
        return list(found.values()) if found else []

    def verify(self, name: str, key: paramiko.PKey) -> str:
        """'known', 'unknown' or 'changed' for this host name (as lookup_name builds it)."""
        known = self.known_keys(name)
        if not known:
            return "unknown"
        if any(_same(k, key) for k in known):
            return "known"
        return "changed"

    def revoked(self, name: str, key: paramiko.PKey) -> Marked | None:
        """The `@revoked` line that revokes this key for this host, if any."""
        return next((m for m in self.marked if m.marker == "@revoked" and m.key is not None and _same(m.key, key)
                     and host_matches(m.patterns, name)), None)

    def cert_authority(self, name: str) -> Marked | None:
        """The `@cert-authority` line that says this host proves itself with a certificate, if any."""
        return next((m for m in self.marked if m.marker == "@cert-authority" and host_matches(m.patterns, name)),
                    None)

    def where(self, name: str) -> str:
        for f, n, e in self.entries:
            if self._keys.lookup(name) and any(_match(h, name) for h in e.hostnames):
                return f"{f}:{n}"
        return ""

    def add(self, name: str, key: paramiko.PKey) -> Path:
        """Append the accepted key to the first (user) known_hosts file, as ssh does."""
        target = self.files[0]
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        needs_nl = target.exists() and target.stat().st_size > 0 and not target.read_bytes().endswith(b"\n")
        with open(target, "a", encoding="utf-8") as f:
            f.write(("\n" if needs_nl else "") + f"{name} {key.get_name()} {key.get_base64()}\n")
        os.chmod(target, 0o600)
        self._keys.add(name, key.get_name(), key)
        return target


def _same(a: paramiko.PKey, b: paramiko.PKey) -> bool:
    return a.get_name() == b.get_name() and a.asbytes() == b.asbytes()


def _match(pattern: str, name: str) -> bool:
    if pattern.startswith("|1|"):
        return bool(paramiko.HostKeys().hash_host(name, pattern) == pattern)
    return pattern == name


def host_matches(patterns: tuple[str, ...] | list[str], name: str) -> bool:
    """OpenSSH's match_hostname: `*` and `?` wildcards, `!` negates (and wins), hashed names."""
    hit = False
    for p in patterns:
        negated = p.startswith("!")
        p = p[1:] if negated else p
        if p.startswith("|1|"):
            ok = _match(p, name)
        else:
            rx = re.escape(p.lower()).replace(r"\*", ".*").replace(r"\?", ".")
            ok = re.fullmatch(rx, name.lower()) is not None
        if ok and negated:
            return False
        hit = hit or ok
    return hit
