"""Open a hand-off file, or a run directory, as one `Bundle` (report, diff, diagnose and the TUI).

Opening a bundle executes nothing from it: members are read into memory through size limits (no
extraction, nothing written to disk), JSON through `json`, and the playbook stays text. A file that
is not what it claims raises BundleError with one line that says why.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..logs.rundir import clean_summary
from ..paths import safe_name
from . import manifest as M
from .manifest import BundleError


@dataclass
class Bundle:
    source: Path
    kind: str  # "bundle" | "run"
    manifest: dict[str, Any]
    playbook_text: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)  # each with `t` (None before the first timed one)
    node_logs: dict[str, list[tuple[float | None, str]]] = field(default_factory=dict)
    elided: dict[str, tuple[int, int]] = field(default_factory=dict)  # node -> (after line, how many)
    revisions: dict[str, str] = field(default_factory=dict)  # file name -> playbook text
    plan: list[dict[str, Any]] = field(default_factory=list)  # each node's command (masked)
    checks: list[dict[str, Any]] = field(default_factory=list)  # check events: command, output, status
    findings: list[dict[str, Any]] = field(default_factory=list)  # as recorded when the run ended

    @property
    def name(self) -> str:
        return str(self.summary.get("playbook") or self.manifest.get("playbook") or self.source.stem)

    @property
    def outcome(self) -> str:  # OUTCOME_WORDS: each view's words for it
        """How the run ended, one word that each view says its own way: passed, failed, stopped (by
        the user: not ok, and not a failure either), or unknown (no summary, or one with no verdict)."""
        ok = self.summary.get("ok")
        if ok is True:
            return "passed"
        if ok is not False:
            return "unknown"
        return "stopped" if self.summary.get("stopped_by_user") is True else "failed"

    @property
    def nodes(self) -> list[str]:
        names = list((self.summary.get("nodes") or {}).keys())
        return names + [n for n in self.node_logs if n not in names]

    def lines(self, node: str) -> list[str]:
        return [text for _, text in self.node_logs.get(node, [])]

    def line_number(self, node: str, index: int) -> int | None:
        """The 1-based line number in the node's original log of node_logs[node][index] (None: the elided marker)."""
        after, count = self.elided.get(node, (0, 0))
        if not count or index < after:
            return index + 1
        return None if index == after else index + count


# ---- shared parsing ---------------------------------------------------------------------------
# how a run ended (Bundle.outcome) in words: `diff` says these, `open` shouts FAILED, `report` says passed
OUTCOME_WORDS = {"passed": "ok", "failed": "failed", "stopped": "stopped by the user",
                 "unknown": "unknown (no summary)"}


def split_lines(text: str) -> list[str]:
    """Lines as the run directory counts them: split on \\n only (a \\r inside a line stays in it)."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def parse_times(text: str) -> list[tuple[int, int, float]]:
    rows = []
    for row in text.splitlines():
        parts = row.split()
        if len(parts) == 3:
            try:
                rows.append((int(parts[0]), int(parts[1]), float(parts[2])))
            except ValueError:
                continue
    rows.sort()
    return rows


def time_of(rows: list[tuple[int, int, float]], firsts: list[int], n: int) -> float | None:
    i = bisect.bisect_right(firsts, n) - 1
    if i >= 0 and n < rows[i][0] + rows[i][1]:
        return rows[i][2]
    return None


def timed_lines(lines: list[str], times: str, line_numbers: list[int | None]) -> list[tuple[float | None, str]]:
    rows = parse_times(times)
    firsts = [r[0] for r in rows]
    out: list[tuple[float | None, str]] = []
    last: float | None = None
    for text, n in zip(lines, line_numbers):
        t = time_of(rows, firsts, n) if n is not None and rows else None
        last = t if t is not None else last
        out.append((t if t is not None else (last if n is None else None), text))
    return out


def parse_events(text: str) -> list[dict[str, Any]]:
    out, t = [], None
    for row in text.splitlines():
        try:
            ev = json.loads(row)
        except ValueError:
            continue  # a half-written last line of a run that crashed
        if not isinstance(ev, dict):
            continue
        t = ev.get("t") if isinstance(ev.get("t"), (int, float)) else t
        ev.setdefault("t", t)
        out.append(ev)
    return out


def split_events(b: Bundle) -> None:
    b.plan = [{k: e.get(k) for k in ("node", "role", "node_rank", "command")} for e in b.events
              if e.get("event") == "command"]
    b.checks = [{k: v for k, v in e.items() if k != "event"} for e in b.events if e.get("event") == "check"]


# ---- a run directory --------------------------------------------------------------------------
def _read_text(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8", errors="replace") if p.is_file() and not p.is_symlink() else ""
    except OSError as e:
        raise BundleError(f"{p}: cannot read: {e.strerror}") from None


def run_log_names(path: Path, summary: dict[str, Any]) -> dict[str, Path]:
    """node name -> its log: the summary's names where they match a file, else the file's stem."""
    nodes = summary.get("nodes")
    by_safe = {safe_name(n): n for n in (nodes if isinstance(nodes, dict) else {}) if isinstance(n, str)}
    return {by_safe.get(f.stem, f.stem): f for f in sorted(path.glob("*.log")) if not f.is_symlink() and f.is_file()}


def open_run(path: str | Path) -> Bundle:
    path = Path(path)
    if not path.is_dir():
        raise BundleError(f"{path}: not a run directory")
    try:
        summary = clean_summary(json.loads(_read_text(path / M.SUMMARY) or "{}"))
    except ValueError:
        summary = {}
    logs = run_log_names(path, summary)
    if not logs and not (path / M.EVENTS).is_file():
        raise BundleError(f"{path}: not a run directory (no node logs, no events.jsonl)")
    b = Bundle(path, "run", {"format": "run-directory", "run_id": path.name},
               playbook_text=_read_text(path / M.PLAYBOOK), summary=summary,
               events=parse_events(_read_text(path / M.EVENTS)))
    for node, f in logs.items():
        lines = split_lines(_read_text(f))
        b.node_logs[node] = timed_lines(lines, _read_text(f.with_suffix(".times")), list(range(1, len(lines) + 1)))
    for f in sorted(path.glob("*.rev*.yaml")) + sorted((path / "revisions").glob("*.yaml")):
        b.revisions[f.name] = _read_text(f)
    b.findings = list(b.summary.get("findings") or [])
    split_events(b)
    return b


# ---- a bundle ---------------------------------------------------------------------------------
def _bad_name(name: str) -> bool:
    p = PurePosixPath(name)
    return (not name or "\\" in name or "\x00" in name or p.is_absolute() or ".." in p.parts
            or (len(name) > 1 and name[1] == ":"))


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    with zf.open(info) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise BundleError(f"member {info.filename} is larger than the manifest says ({limit} bytes)")
    return data


def _check_infos(infos: list[zipfile.ZipInfo]) -> None:
    if len(infos) > M.READ_MAX_MEMBERS:
        raise BundleError(f"{len(infos)} members, more than a bundle ever has ({M.READ_MAX_MEMBERS})")
    seen: set[str] = set()
    total = 0
    for i in infos:
        if _bad_name(i.filename):
            raise BundleError(f"member {i.filename!r} has an unsafe path (absolute or with ..)")
        if i.filename in seen:
            raise BundleError(f"member {i.filename!r} appears twice")
        seen.add(i.filename)
        if stat.S_ISLNK(i.external_attr >> 16):
            raise BundleError(f"member {i.filename!r} is a symbolic link")
        total += i.file_size
        if i.file_size > M.READ_MAX_MEMBER or total > M.READ_MAX_TOTAL:
            raise BundleError(f"member {i.filename!r} would unpack to more than a bundle may hold (zip bomb?)")
        if i.file_size > 1024 * 1024 and i.file_size > M.READ_MAX_RATIO * max(1, i.compress_size):
            raise BundleError(f"member {i.filename!r} expands {i.file_size // max(1, i.compress_size)}x (zip bomb?)")


def _manifest(zf: zipfile.ZipFile, names: set[str]) -> dict[str, Any]:
    if M.MANIFEST not in names:
        raise BundleError("no manifest.json: not a ddptui bundle")
    try:
        man = json.loads(_read_member(zf, zf.getinfo(M.MANIFEST), 4 * 1024 * 1024))
    except ValueError:
        raise BundleError("manifest.json is not valid JSON") from None
    if not isinstance(man, dict) or man.get("format") != M.FORMAT:
        raise BundleError("manifest.json does not describe a ddptui bundle")
    ver = man.get("format_version")
    if not isinstance(ver, int) or isinstance(ver, bool) or ver < 1:
        raise BundleError(f"unknown bundle format version {ver!r}")
    if ver > M.FORMAT_VERSION:
        raise BundleError(f"bundle format version {ver} is newer than this ddptui reads "
                          f"(up to {M.FORMAT_VERSION}); upgrade ddptui")
    if not isinstance(man.get("members"), dict):
        raise BundleError("manifest.json has no member list")
    return man


def read_members(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The manifest and every member's bytes, each checked against the manifest's size and sha256."""
    if not path.is_file():
        raise BundleError("is not a regular file (a pipe, a device or a socket): give a .ddpt bundle or a run directory"
                          if path.exists() else "no such file")
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            _check_infos(infos)
            names = {i.filename for i in infos}
            man = _manifest(zf, names)
            members: dict[str, bytes] = {}
            for i in infos:
                if i.filename == M.MANIFEST or i.is_dir():
                    continue
                entry = man["members"].get(i.filename)
                if not isinstance(entry, dict) or not isinstance(entry.get("size"), int):
                    raise BundleError(f"member {i.filename!r} is not listed in the manifest")
                data = _read_member(zf, i, min(entry["size"], M.READ_MAX_MEMBER))
                if hashlib.sha256(data).hexdigest() != entry.get("sha256") or len(data) != entry["size"]:
                    raise BundleError(f"member {i.filename!r} does not match its sha256 in the manifest (corrupt?)")
                members[i.filename] = data
            missing = sorted(set(man["members"]) - set(members))
            if missing:
                raise BundleError(f"member {missing[0]!r} is listed in the manifest but absent (truncated?)")
            return man, members
    except zipfile.BadZipFile as e:
        raise BundleError(f"not a ddptui bundle: not a zip file, or a truncated or corrupt one ({e})") from None
    except (zlib.error, EOFError, NotImplementedError, RuntimeError, OSError) as e:
        raise BundleError(f"the file is corrupt or truncated ({type(e).__name__}: {e})") from None


def open_bundle(path: str | Path) -> Bundle:
    path = Path(path)
    try:
        man, members = read_members(path)
        return _build(path, man, members)
    except BundleError as e:
        raise BundleError(f"{path}: {e}") from None


def _json(members: dict[str, bytes], name: str, default: Any) -> Any:
    if name not in members:
        return default
    try:
        val = json.loads(members[name].decode("utf-8"))
    except ValueError:
        raise BundleError(f"member {name} is not valid JSON") from None
    return val if isinstance(val, type(default)) else default


def _count(v: Any) -> int:
    """A count of lines from a manifest: a non-negative int, else 0."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def _text(members: dict[str, bytes], name: str) -> str:
    return members.get(name, b"").decode("utf-8", errors="replace")


def _build(path: Path, man: dict[str, Any], members: dict[str, bytes]) -> Bundle:
    b = Bundle(path, "bundle", man, playbook_text=_text(members, M.PLAYBOOK),
               summary=clean_summary(_json(members, M.SUMMARY, {})), events=parse_events(_text(members, M.EVENTS)))
    logs = man.get("logs") if isinstance(man.get("logs"), dict) else {}
    for node, info in logs.items():
        if not isinstance(info, dict):
            continue
        member = str(info.get("member", ""))
        lines = split_lines(_text(members, member))
        # counts from the manifest, held to what the member holds: a hostile `kept_head` of 10**9
        # made a list of that many numbers
        head, elided = min(_count(info.get("kept_head")), len(lines)), _count(info.get("elided"))
        if elided:
            b.elided[node] = (head, elided)
            numbers: list[int | None] = [*range(1, head + 1), None,
                                         *range(head + elided + 1, head + elided + len(lines) - head)]
        else:
            numbers = list(range(1, len(lines) + 1))
        b.node_logs[node] = timed_lines(lines, _text(members, str(info.get("times", ""))), numbers)
    for name in sorted(members):
        if name.startswith("revisions/"):
            b.revisions[name.split("/", 1)[1]] = _text(members, name)
    found = _json(members, M.FINDINGS, {}).get("findings")
    b.findings = [f for f in found if isinstance(f, dict)] if isinstance(found, list) else []
    split_events(b)
    return b


def is_bundle_path(path: Path) -> bool:
    return path.suffix == M.EXTENSION or (path.is_file() and zipfile.is_zipfile(path))


def open_any(path: str | Path) -> Bundle:
    """A bundle file or a run directory, whichever `path` is."""
    path = Path(path)
    if path.is_dir():
        return open_run(path)
    if not path.exists():
        raise BundleError(f"{path}: no such file or directory")
    return open_bundle(path)
