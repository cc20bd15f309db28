"""The Findings tab: what the diagnosis found, newest first, and the selected finding in full."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static, TabbedContent, TabPane

from ...core.diagnosis.model import Finding

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}


class FindingsTab(TabPane):
    """The findings table over the selected finding's detail; keeps the findings it shows."""

    def __init__(self, title: str, **kw) -> None:
        super().__init__(title, **kw)
        self.findings: list[Finding] = []

    def compose(self) -> ComposeResult:
        yield DataTable(cursor_type="row", id="findings")
        with VerticalScroll(id="finding-box"):
            yield Static("no findings", id="finding-detail")

    def on_mount(self) -> None:
        ft = self.query_one("#findings", DataTable)
        ft.add_column("severity", key="severity")
        ft.add_column("id", key="id")
        ft.add_column("nodes", key="nodes")
        ft.add_column("summary", key="summary")

    def add(self, f: Finding) -> None:
        old = next((i for i, x in enumerate(self.findings) if x.id == f.id), None)
        if old is not None:  # an update (more nodes, or resolved): replace it in place
            self.findings.pop(old)
        self.findings.insert(0, f)  # newest first
        t = self.query_one("#findings", DataTable)
        t.clear()
        for x in self.findings:
            style = SEVERITY_STYLE.get(x.severity, "") if x.active else "dim strike"
            t.add_row(Text(x.severity if x.active else "resolved", style=style), x.id, ", ".join(x.nodes), x.summary)
        counts = {s: sum(1 for x in self.findings if x.severity == s and x.active)
                  for s in ("error", "warning", "info")}
        label = "Findings " + " ".join(f"{n}{s[0].upper()}" for s, n in counts.items() if n)
        self.query_ancestor(TabbedContent).get_tab(self).label = label
        self._show(0)

    def clear(self, message: str) -> None:
        self.findings = []
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
    return t
