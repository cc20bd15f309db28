"""`ddptui bundle RUN_DIR`: pack a finished run into one hand-off file, redacted, capped, self-checked.

Only the run's known files are read (never a symlink, never anything from ~/.ssh). Every text
goes through one Redactor: it first learns every secret value from all of them, then hides those
values everywhere. Before writing, the packed bytes are searched for every value it was told to
hide; if one is still there, nothing is written (BundleRefused).
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import socket
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import __version__
from ..logs.lines import lines_in
from ..paths import refuse_to_write, write_private
from ..redact import Redactor
from . import manifest as M
from .manifest import BundleError, BundleRefused
from .read import open_run, run_log_names, split_lines


@dataclass(frozen=True)
class PackResult:
    path: Path
    size: int
    manifest: dict[str, Any]


@dataclass
class _Log:
    lines: list[str]
    total: int
    head: int
    elided: int
    times: str


def cap_log(path: Path, cap: int) -> _Log:
    """The log's lines, or its first and last cap/2 bytes (whole lines) with an explicit elided line."""
    size = path.stat().st_size
    times = path.with_suffix(".times")
    times_text = times.read_text(encoding="utf-8", errors="replace") if times.is_file() and not times.is_symlink() else ""
    with open(path, "rb") as f:
        if size <= cap:
            lines = split_lines(f.read().decode("utf-8", "replace"))
            return _Log(lines, len(lines), len(lines), 0, times_text)
        head_b = f.read(cap // 2)
        head = split_lines(head_b[: head_b.rfind(b"\n") + 1].decode("utf-8", "replace"))
        f.seek(size - cap // 2)
        tail_b = f.read()
        tail = split_lines(tail_b[tail_b.find(b"\n") + 1:].decode("utf-8", "replace"))
        f.seek(0)
        total = sum(lines_in(chunk) for chunk in iter(lambda: f.read(1 << 20), b""))
        total += 0 if tail_b.endswith(b"\n") else 1  # a last line without its newline
    elided = total - len(head) - len(tail)
    marker = M.elided_line(elided, len(head) + 1, len(head) + elided, len(head), len(tail))
    return _Log([*head, marker, *tail], total, len(head), elided, _times_kept(times_text, len(head), total - len(tail)))


def _times_kept(text: str, head: int, tail_from: int) -> str:
    """The sidecar rows that touch a kept line (original numbering)."""
    out = []
    for row in text.splitlines():
        parts = row.split()
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            first, count = int(parts[0]), int(parts[1])
            if first <= head or first + count - 1 > tail_from:
                out.append(row)
    return "\n".join(out) + ("\n" if out else "")


def _default_node_cap(max_size: int, nnodes: int) -> int:
    return max(M.NODE_CAP_MIN * 4, min(M.NODE_CAP_MAX, 4 * max_size // max(1, nnodes)))


def pack(run_dir: str | Path, out: str | Path | None = None, *, max_size: int = M.DEFAULT_MAX_SIZE,
         node_cap: int | None = None, redact: tuple[str, ...] | list[str] = (),
         now: datetime.datetime | None = None) -> PackResult:
    """Write RUN_DIR as one `.ddpt` file (default: RUN_DIR's name beside it); BundleRefused when it cannot."""
    run_dir = Path(run_dir)
    _refuse_ssh(run_dir)
    b = open_run(run_dir)  # BundleError when it is not a run directory
    out = Path(out) if out else run_dir.parent / (run_dir.name + M.EXTENSION)
    if (why := refuse_to_write(out, inside=run_dir)) is not None:
        raise BundleError(why)
    cap = node_cap or _default_node_cap(max_size, max(1, len(b.node_logs)))
    while True:
        data, man = _build(run_dir, b, cap, max_size, redact, now)
        if len(data) <= max_size:
            break
        if node_cap is not None or cap // 2 < M.NODE_CAP_MIN:
            raise BundleRefused(f"the bundle would be {human_size(len(data))}, over --max-size {human_size(max_size)} even "
                                f"with each node's log cut to {cap // 1024} KiB; raise --max-size")
        cap //= 2
    write_private(out, data)  # all or nothing, the owner's only: a bundle holds logs
    return PackResult(out, len(data), man)


def human_size(n: int) -> str:
    """Bytes for a person, in --max-size's units (its KB and MB are 1024 and 1024 x 1024 bytes):
    "25 MB", "8.7 KB" (1KB was "0.0 MB")."""
    v, unit = (n / 1024 ** 2, "MB") if n >= 1024 ** 2 else (n / 1024, "KB")
    return f"{v:.1f}".removesuffix(".0") + f" {unit}"


def _refuse_ssh(run_dir: Path) -> None:
    ssh = (Path.home() / ".ssh").resolve()
    real = run_dir.resolve()
    if real == ssh or ssh in real.parents:
        raise BundleError(f"{run_dir}: is inside ~/.ssh; nothing from there goes into a bundle")


def _build(run_dir: Path, b, cap: int, max_size: int, redact, now) -> tuple[bytes, dict[str, Any]]:
    r = Redactor.from_playbook_text(b.playbook_text, tuple(redact))
    for text in b.revisions.values():  # a value named in any revision is hidden in all of them
        other = Redactor.from_playbook_text(text, tuple(r.names))
        r.names |= other.names
        for v, name in other.values.items():
            r.hide(name, v)
    logs = {node: cap_log(p, cap) for node, p in run_log_names(run_dir, b.summary).items()}
    texts: dict[str, str] = {M.PLAYBOOK: b.playbook_text}
    texts.update({f"revisions/{n}": t for n, t in b.revisions.items()})
    objs: dict[str, Any] = {M.SUMMARY: b.summary, M.PLAN: {"nodes": b.plan},
                            M.CHECKS: {"checks": b.checks, "facts": b.summary.get("facts") or {}},
                            M.FINDINGS: {"findings": b.findings}}
    for t in texts.values():  # learn every secret before hiding any: a token seen in one file hides it in all
        r.learn(t)
    for o in objs.values():
        r.learn_obj(o)
    r.learn_obj(b.events)
    for lg in logs.values():
        for line in lg.lines:
            r.learn(line)
    members: dict[str, bytes] = {}
    for name, t in texts.items():
        members[name] = r.text(t, name).encode()
    for name, o in objs.items():
        members[name] = (json.dumps(r.obj(o, name), indent=2, default=str) + "\n").encode()
    members[M.EVENTS] = "".join(json.dumps(r.obj(e, M.EVENTS), default=str) + "\n" for e in b.events).encode()
    log_info: dict[str, Any] = {}
    used: set[str] = set()
    for node, lg in logs.items():
        stem = _unique(_member_stem(node), used)
        place = f"logs/{stem}.log"
        members[place] = "".join(r.text(line, place) + "\n" for line in lg.lines).encode()
        if lg.times:
            members[f"logs/{stem}.times"] = lg.times.encode()
        log_info[node] = {"member": place, "times": f"logs/{stem}.times" if lg.times else None, "lines": lg.total,
                          "kept_head": lg.head, "kept_tail": len(lg.lines) - lg.head - (1 if lg.elided else 0),
                          "elided": lg.elided, "arrival_times": "recorded" if lg.times else "none (an older run)"}
    man = _manifest(run_dir, b, members, log_info, r, cap, max_size, now)
    leaks = {name: r.leaks(data) for name, data in {**members, M.MANIFEST: man[1]}.items()}
    leaks = {k: v for k, v in leaks.items() if v}
    if leaks:
        where = "; ".join(f"{', '.join(v)} in {k}" for k, v in sorted(leaks.items()))
        raise BundleRefused(f"refusing to write the bundle: a value it must hide is still there ({where})")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        zf.writestr(_info(M.MANIFEST, now), man[1])
        for name in sorted(members):
            zf.writestr(_info(name, now), members[name])
    return buf.getvalue(), man[0]


def _manifest(run_dir: Path, b, members: dict[str, bytes], log_info: dict[str, Any], r: Redactor, cap: int,
              max_size: int, now) -> tuple[dict[str, Any], bytes]:
    missing = []
    for name, why in ((M.SUMMARY, "the run has no summary.json (it was cut short?)"),
                      (M.EVENTS, "the run has no events.jsonl"), (M.PLAYBOOK, "the run has no playbook.yaml")):
        if not (run_dir / name).is_file():
            missing.append({"what": name, "why": why})
    if not b.plan:
        missing.append({"what": M.PLAN, "why": "no launch command was recorded (the job was not launched)"})
    for node, info in log_info.items():
        if info["arrival_times"] != "recorded":
            missing.append({"what": f"{info['member']} arrival times", "why": "the run predates <node>.times"})
        if info["elided"]:
            missing.append({"what": f"{info['elided']} lines of {node}'s log",
                            "why": f"over the per-node cap of {cap} bytes: the first and last lines are kept"})
    for f in sorted(run_dir.iterdir()):
        if f.is_symlink():
            missing.append({"what": f.name, "why": "a symbolic link: not followed"})
    created = (now or datetime.datetime.now(datetime.timezone.utc)).isoformat(timespec="seconds")
    man = {"format": M.FORMAT, "format_version": M.FORMAT_VERSION, "ddptui_version": __version__,
           "created": created, "host": socket.gethostname(), "user": _user(), "run_id": b.summary.get("run_id") or run_dir.name,
           "playbook": b.name, "nodes": b.nodes, "max_size": max_size, "node_cap": cap,
           "members": {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in sorted(members.items())},
           "logs": log_info, "revisions": sorted(b.revisions),
           "fixes": [e for e in b.events if e.get("event") == "revision" or "fix" in str(e.get("event", ""))], "missing": missing,
           "redaction": r.summary()}
    man["fixes"] = r.obj(man["fixes"], M.MANIFEST)
    return man, (json.dumps(man, indent=2, default=str) + "\n").encode()


def _user() -> str:
    """Whose run it is (`ddptui open` says so); empty when the login name cannot be found."""
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return ""


def _member_stem(node: str) -> str:
    from ..paths import safe_name

    return safe_name(node)


def _unique(stem: str, used: set[str]) -> str:
    s, i = stem, 1
    while s in used:
        i += 1
        s = f"{stem}-{i}"
    used.add(s)
    return s


def _info(name: str, now) -> zipfile.ZipInfo:
    t = (now or datetime.datetime.now()).timetuple()[:6]
    zi = zipfile.ZipInfo(name, date_time=max(t, (1980, 1, 1, 0, 0, 0)))
    zi.compress_type = zipfile.ZIP_DEFLATED
    zi.external_attr = 0o600 << 16
    return zi
