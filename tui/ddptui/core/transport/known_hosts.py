"""known_hosts as OpenSSH reads it, for a host key policy of our own.

paramiko's HostKeys.load raises on any `@cert-authority` or `@revoked` line (InvalidHostKey is not
an SSHException, so it escapes), and its RejectPolicy raises a plain SSHException without the
fingerprint. So we read the files line by line, skip what paramiko cannot use (and say so), and
decide unknown / known / changed ourselves.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry


def lookup_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


@dataclass
class KnownHosts:
    files: list[Path]
    entries: list[tuple[Path, int, HostKeyEntry]] = field(default_factory=list)
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
                if not line or line.startswith("#"):
                    continue
                if line.startswith("@"):
                    marker = line.split(None, 1)[0]
                    kh.skipped.append(f"{f}:{n}: {marker} lines are not supported, skipped")
                    continue
                try:
                    entry = HostKeyEntry.from_line(line, n)
                except Exception as e:  # InvalidHostKey, binascii errors, unknown key types
                    kh.skipped.append(f"{f}:{n}: unreadable entry skipped ({type(e).__name__})")
                    continue
                if entry is None or entry.key is None:
                    kh.skipped.append(f"{f}:{n}: unsupported key type, skipped")
                    continue
                kh.entries.append((f, n, entry))
                for h in entry.hostnames:
                    kh._keys.add(h, entry.key.get_name(), entry.key)
        return kh

    def known_keys(self, name: str) -> list[paramiko.PKey]:
        found = self._keys.lookup(name)
        return list(found.values()) if found else []

    def verify(self, name: str, key: paramiko.PKey) -> str:
        """'known', 'unknown' or 'changed' for this host name (as lookup_name builds it)."""
        known = self.known_keys(name)
        if not known:
            return "unknown"
        if any(k.get_name() == key.get_name() and k.asbytes() == key.asbytes() for k in known):
            return "known"
        return "changed"

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


def _match(pattern: str, name: str) -> bool:
    if pattern.startswith("|1|"):
        return bool(paramiko.HostKeys().hash_host(name, pattern) == pattern)
    return pattern == name
