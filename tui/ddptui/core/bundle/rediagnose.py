"""`ddptui diagnose FILE.ddpt`: today's rules on an old bundle, and which findings are new."""

from __future__ import annotations

from ..diagnosis.engine import Engine
from ..diagnosis.offline import feed_exits, with_stored
from ..errors import DdptuiError
from ..diagnosis.model import Finding
from .read import Bundle


def rediagnose(b: Bundle, nnodes: int | None = None) -> tuple[list[Finding], set[str]]:
    """The findings today's engine gives on the bundle's logs, with what the run recorded that no
    log shows (exit codes, the checks' findings), as `diagnose RUN_DIR` gives them; and the ids the
    bundle did not have. `nnodes`: the job's node count, where the bundle holds fewer nodes' logs."""
    engine = Engine(expected_nnodes=nnodes or len(b.nodes) or None, min_busbw_gbps=_min_busbw(b.playbook_text))
    feed_exits(engine, b.summary)
    for node, timed in b.node_logs.items():
        lines = [text for _, text in timed]
        after, count = b.elided.get(node, (0, 0))
        if count:  # feed head and tail with their own line numbers; the elided marker is not a log line
            engine.feed(node, lines[:after], 1)
            engine.feed(node, lines[after + 1:], after + count + 1)
        else:
            engine.feed(node, lines, 1)
    findings = with_stored(engine.finish(), b.findings)
    stored = {f.get("id") for f in b.findings if isinstance(f, dict)}
    return findings, {f.id for f in findings if f.id not in stored}


def _min_busbw(playbook_text: str) -> float | None:
    """The bundled playbook's bandwidth.min_busbw_gbps, if it still loads."""
    from ..playbook.loader import parse_playbook

    try:
        return parse_playbook(playbook_text, "playbook.yaml").bandwidth.min_busbw_gbps if playbook_text else None
    except DdptuiError:
        return None
