"""The Findings tab: what the diagnosis found, the most severe first (newest first within a severity),
and the selected finding in full."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static, TabbedContent, TabPane

from ...core.diagnosis.model import SEVERITIES, Finding

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}
SHORT = {"warning": "warn"}  # the table's severity column, kept narrow


class FindingsTab(TabPane):
    """The findings table over the selected finding's detail; keeps the findings it shows."""

    def __init__(self, title: str, **kw) -> None:
        super().__init__(title, **kw)
        self.raised: list[Finding] = []  # every finding raised, newest first
        self.findings: list[Finding] = []  # those shown: none that a better explanation raised since covers

    def compose(self) -> ComposeResult:
        yield DataTable(cursor_type="row", id="findings")
        with VerticalScroll(id="finding-box"):
            yield Static("no findings", id="finding-detail")

    def add(self, f: Finding) -> None:
        """A finding raised, or raised again (more nodes, resolved): it goes first among those of its
        severity, and the table lists errors, then warnings, then information, then what is resolved,
        so that the row selected (the first) is the cause, not a word on a node that did not fail
        raised after it. One that explains another better (the catalog's `suppresses`: a segfault,
        the peer's "remote rank died" it caused) hides that one, as the run's summary and `diagnose` do."""
        from ...core.diagnosis.catalog import hidden_ids  # with the first finding: not on the first frame's path

        self.raised = [f] + [x for x in self.raised if x.id != f.id]
        hidden = hidden_ids(self.raised)
        self.findings = sorted((x for x in self.raised if x.id not in hidden),  # stable: newest first in each
                               key=lambda x: (not x.active, SEVERITIES.index(x.severity)
                                              if x.severity in SEVERITIES else len(SEVERITIES)))
        self._fill(0)
        counts = {s: sum(1 for x in self.findings if x.severity == s and x.active)
                  for s in ("error", "warning", "info")}
        label = "Findings " + " ".join(f"{n}{s[0].upper()}" for s, n in counts.items() if n)
        self.query_ancestor(TabbedContent).get_tab(self).label = label
        self._show(0)

    def on_mount(self) -> None:
        self._fill()

    def on_resize(self) -> None:
        self._fill()

    def _fill(self, row: int | None = None) -> None:
        """The table at this width: the summary gets what the other columns leave and wraps there (a
        row grows a line or two); nodes get a column only where the summary keeps 40 cells beside it."""
        t = self.query_one("#findings", DataTable)
        row = t.cursor_row if row is None else row
        t.clear(columns=True)
        marks = [("resolved" if not x.active else SHORT.get(x.severity, x.severity)) for x in self.findings]
        sev_w = max([3] + [len(m) for m in marks])
        id_w = max([2] + [len(x.id) for x in self.findings])
        nodes_w = max([5] + [len(", ".join(x.nodes)) for x in self.findings])
        room = max(self.size.width, 40) - 2 * 4 - 2  # each column's padding, and the scrollbar
        with_nodes = room - sev_w - id_w - nodes_w >= 40
        summary_w = max(20, room - sev_w - id_w - (nodes_w if with_nodes else 0) + (0 if with_nodes else 2))
        t.add_column("sev", key="severity", width=sev_w)
        t.add_column("id", key="id", width=id_w)
        if with_nodes:
            t.add_column("nodes", key="nodes", width=nodes_w)
        t.add_column("summary", key="summary", width=summary_w)
        for x, mark in zip(self.findings, marks):
            style = SEVERITY_STYLE.get(x.severity, "") if x.active else "dim strike"
            cells = [Text(mark, style=style), x.id] + ([", ".join(x.nodes)] if with_nodes else []) + [Text(x.summary)]
            t.add_row(*cells, height=None)
        if self.findings:
            t.move_cursor(row=min(max(row, 0), len(self.findings) - 1))

    def clear(self, message: str) -> None:
        self.raised, self.findings = [], []
        self.query_one("#findings", DataTable).clear()
        self.query_ancestor(TabbedContent).get_tab(self).label = "Findings"
        self.query_one("#finding-detail", Static).update(message)

    def selected(self) -> Finding | None:
        if not self.findings:
            return None
        t = self.query_one("#findings", DataTable)
        return self.findings[min(max(t.cursor_row, 0), len(self.findings) - 1)]

    def _show(self, i: int) -> None:
        if 0 <= i < len(self.findings):
            self.query_one("#finding-detail", Static).update(finding_text(self.findings[i]))

    @on(DataTable.RowHighlighted, "#findings")
    def _finding_hl(self, ev: DataTable.RowHighlighted) -> None:
        self._show(ev.cursor_row)


def finding_text(f: Finding) -> Text:
    t = Text()
    t.append(f.id, style=SEVERITY_STYLE.get(f.severity, "") + " underline")
    t.append(f"  {f.severity} · {', '.join(f.nodes)} · {f.state}\n", style="dim")
    t.append(f.summary + "\n", style="bold")
    if f.explanation:
        t.append(f.explanation + "\n")
    if f.evidence:
        t.append("\nevidence\n", style="bold")
        for e in f.evidence:
            t.append(f"  {e.node}" + (f":{e.line}" if e.line else "") + "  ", style="cyan")
            t.append(f"{e.text}\n")
    fix = f.fix
    if fix:
        t.append("\nfix ", style="bold green")
        if fix.env:
            t.append(" ".join(f"{k}={v}" for k, v in fix.env.items()) + f" ({fix.scope})", style="green")
        for node, env in fix.per_node.items():
            t.append(f" {node}: " + " ".join(f"{k}={v}" for k, v in env.items()), style="green")
        t.append("\n" + fix.explain + "\n")
        for alt in fix.alternatives:
            t.append(f"  or: {alt}\n", style="dim")
        if f.fixable:
            t.append("press f to preview this change to the playbook\n", style="dim italic")
    if any(e.line for e in f.evidence):
        t.append("press j to see the evidence line in its pane\n", style="dim italic")
    elif any(e.command for e in f.evidence):
        t.append("press j to see the check's command and output\n", style="dim italic")
    return t
