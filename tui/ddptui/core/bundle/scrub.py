"""A redacted copy of a Bundle read from a run directory, for what leaves the machine (report, diff).

A bundle file was redacted when it was packed; a run directory is raw, so `report RUN_DIR` and
`diff RUN_A RUN_B` hide the same values the bundle would (the playbook's redact: list, secret-looking
names, token shapes) before printing anything.
"""

from __future__ import annotations

import copy

from ..redact import Redactor
from .read import Bundle, split_events


def scrubbed(b: Bundle, extra_names: tuple[str, ...] = ()) -> Bundle:
    if b.kind == "bundle":
        return b
    r = Redactor.from_playbook_text(b.playbook_text, extra_names)
    for text in b.revisions.values():
        other = Redactor.from_playbook_text(text, tuple(r.names))
        r.names |= other.names
        for v, name in other.values.items():
            r.hide(name, v)
    r.learn(b.playbook_text)
    r.learn_obj([b.summary, b.events])
    for timed in b.node_logs.values():
        for _, line in timed:
            r.learn(line)
    out = copy.copy(b)
    out.playbook_text = r.text(b.playbook_text, "playbook")
    out.revisions = {k: r.text(v, "playbook") for k, v in b.revisions.items()}
    out.summary = r.obj(b.summary, "summary")
    out.events = r.obj(b.events, "events")
    out.node_logs = {n: [(t, r.text(line, "log")) for t, line in timed] for n, timed in b.node_logs.items()}
    out.findings = r.obj(b.findings, "findings")
    split_events(out)
    return out
