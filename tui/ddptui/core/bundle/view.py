"""Looking at someone else's run: its playbook (for viewing, never run from here), who made it, where
and when, a text summary (`ddptui open FILE --headless`), and saving its playbook to run it at home."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from ..errors import DdptuiError, PlaybookError
from ..paths import safe_name
from ..playbook.loader import parse_playbook
from ..playbook.model import DEFAULT_STEPS, STEP_KINDS, Job, NodeSpec, Playbook, Step
from .read import OUTCOME_WORDS, Bundle
from .replay import Timeline


def viewing_playbook(b: Bundle, folder: Path) -> tuple[Playbook, str]:
    """The run's playbook, parsed without looking for its script here, as if it were `folder/<name>.yaml`
    (a fix saved from the viewer goes next to that); and a note when only a stand-in could be made."""
    path = folder / f"{safe_name(b.name)}.yaml"
    if b.playbook_text.strip():
        try:
            return parse_playbook(b.playbook_text, str(path), base=folder, check_files=False), ""
        except PlaybookError as e:
            first = e.problems[0].message if e.problems else str(e)
            note = f"its playbook does not load in this ddptui ({first}): showing its steps and nodes only"
    else:
        note = "it holds no playbook: showing its steps and nodes only"
    return stand_in(b), note


def stand_in(b: Bundle) -> Playbook:
    """A playbook with the run's nodes and steps and nothing to run (path None: nothing to save or fix)."""
    nodes = [n for n in b.nodes if isinstance(n, str)] or ["node"]
    roles = b.summary.get("nodes") if isinstance(b.summary.get("nodes"), dict) else {}
    master = next((n for n in nodes if isinstance(roles.get(n), dict) and roles[n].get("role") == "master"), nodes[0])
    ids = list(b.summary.get("steps") or {}) if isinstance(b.summary.get("steps"), dict) else []
    ids += [e["step"] for e in b.events if e.get("event") == "step" and isinstance(e.get("step"), str)]
    titles = {i: t for i, _, t in DEFAULT_STEPS}
    steps = tuple(Step(id=i, kind=i if i in STEP_KINDS else "shell", title=titles.get(i, i))
                  for i in dict.fromkeys(ids))
    return Playbook(name=b.name, nodes=tuple(NodeSpec(n, transport="local") for n in nodes), master=master,
                    job=Job(script="(not in the bundle)"), steps=steps or tuple(
                        Step(id=i, kind=k, title=t) for i, k, t in DEFAULT_STEPS), source=b.playbook_text)


def save_playbook(b: Bundle, folder: Path) -> Path:
    """Write the run's playbook (as it ran, its fixes applied) as `folder/<name>.yaml`, or `<name>-2.yaml`
    and so on: never over an existing file. Returns the path."""
    if not b.playbook_text.strip():
        raise DdptuiError("this run holds no playbook to save")
    stem = safe_name(b.name)
    for n in range(1, 1000):
        path = folder / (f"{stem}.yaml" if n == 1 else f"{stem}-{n}.yaml")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        except OSError as e:
            raise DdptuiError(f"{path}: cannot write: {e.strerror}") from None
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(b.playbook_text if b.playbook_text.endswith("\n") else b.playbook_text + "\n")
        return path
    raise DdptuiError(f"{folder}: {stem}.yaml and 998 more names are taken")


def _when(t: object) -> str:
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        return ""
    try:
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return ""


def _str(v: object) -> str:
    return v if isinstance(v, str) else ""


def source_host(b: Bundle) -> str:
    return _str(b.manifest.get("host")) or "another machine"


def _iso(text: object) -> str:
    """An ISO time (the manifest's `created`) as the headline writes times."""
    try:
        d = datetime.datetime.fromisoformat(str(text))
    except ValueError:
        return _str(text)
    return _when(d.timestamp()) if d.tzinfo else d.strftime("%Y-%m-%d %H:%M")


def headline(b: Bundle, run_id: bool = True) -> str:
    """Whose run, where and when, and which ddptui made it, in one line."""
    m = b.manifest
    who = _str(m.get("user"))
    started = _when(b.summary.get("started"))
    run = _str(b.summary.get("run_id")) or _str(m.get("run_id"))
    if b.kind == "run":
        return f"{b.name}: the run {run} in {b.source}" + (f", started {started}" if started else "")
    parts = [f"{b.name}: run by {who + ' on ' if who else 'someone on '}{source_host(b)}"]
    if started:
        parts.append(f"started {started}")
    made = _str(m.get("ddptui_version"))
    if _str(m.get("created")) or made:
        parts.append(f"bundled {_iso(m.get('created')) if m.get('created') else ''}".rstrip()
                     + (f" by ddptui {made}" if made else ""))
    return ", ".join(parts) + (f" (run {run})" if run and run_id else "")


def summary_text(b: Bundle, pb: Playbook, note: str = "") -> str:
    """`ddptui open FILE --headless`: whose run, its nodes, steps and findings, as they stood at its end."""
    tl = Timeline.of(b, pb)
    end = tl.final()
    out = [headline(b)]
    if note:
        out.append(f"note: {note}")
    outcome = {**OUTCOME_WORDS, "failed": "FAILED"}[b.outcome]
    out.append(f"outcome: {outcome}, {tl.duration:.1f}s recorded")
    out.append("nodes:")
    for n in pb.ordered_nodes():
        st = end.nodes.get(n.name)
        rc = st.rc if st is not None else None
        out.append(f"  {n.name:<12} {'master' if n.name == pb.master else 'worker':<6} "
                   f"{st.state if st else 'pending':<11}" + (f" exit {rc}" if rc is not None else "")
                   + f"  {end.lines.get(n.name, 0)} lines")
    out.append("steps:")
    for s in pb.steps:
        ev = end.steps.get(s.id)
        msg = ev.message.splitlines()[0] if ev and ev.message else ""
        out.append(f"  {s.id:<16} {ev.state if ev else 'pending':<8} {msg}".rstrip())
    out.append(f"findings: {len(end.findings) or 'none'}")
    for f in reversed(list(end.findings.values())):
        out.append(f"  {f.severity.upper():7} {f.id} [{f.state}; {', '.join(f.nodes)}] {f.summary}")
    return "\n".join(out) + "\n"
