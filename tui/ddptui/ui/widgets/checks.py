"""The Checks tab: nodes × checks, filled in live, and the selected cell's command and output."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static, TabPane

CHECK_COLUMNS = ("ping", "hostname", "interfaces", "route", "env", "ib", "shm", "gpus", "python", "torch",
                 "backend", "master-port", "master-reachable", "ping-master", "script", "slurm", "probe")
# short headers, so the matrix fits beside the step list; the evidence below names the check in full
HEADER = {"hostname": "host", "interfaces": "iface", "master-port": "m.port", "master-reachable": "m.reach",
          "ping-master": "m.ping"}
CHECK_STYLE = {"pass": ("✓", "green"), "warn": ("!", "bold yellow"), "fail": ("✗", "bold red"),
               "skip": ("–", "dim"), "running": ("…", "yellow")}


class CheckMatrix(DataTable):
    """Nodes × checks, filled in live as each node's results arrive."""

    def __init__(self, nodes: list[str], **kw) -> None:
        super().__init__(cursor_type="cell", **kw)
        self.nodes = nodes
        self.results: dict[tuple[str, str], object] = {}

    def on_mount(self) -> None:
        self.add_column("node", key="node")
        for c in CHECK_COLUMNS:
            self.add_column(HEADER.get(c, c), key=c)
        for n in self.nodes:
            self.add_row(Text(n, style="bold"), *[Text("·", style="dim") for _ in CHECK_COLUMNS], key=n)

    def set_nodes(self, nodes: list[str]) -> None:
        """The rows of another node list (a Slurm allocation names the nodes once it is granted)."""
        self.nodes = list(nodes)
        self.results.clear()
        DataTable.clear(self, columns=False)  # the rows go; our own clear() only blanks the cells
        for n in self.nodes:
            self.add_row(Text(n, style="bold"), *[Text("·", style="dim") for _ in CHECK_COLUMNS], key=n)

    def reset(self) -> None:
        self.results.clear()
        for n in self.nodes:
            for c in CHECK_COLUMNS:
                self.update_cell(n, c, Text("…", style="yellow"))

    def clear(self) -> None:
        """Back to before any check ran."""
        self.results.clear()
        for n in self.nodes:
            for c in CHECK_COLUMNS:
                self.update_cell(n, c, Text("·", style="dim"))

    def set_result(self, ev) -> None:
        col = ev.check if ev.check in CHECK_COLUMNS else "probe"
        self.results[(ev.node, col)] = ev
        icon, style = CHECK_STYLE.get(ev.status, ("?", ""))
        self.update_cell(ev.node, col, Text(icon, style=style))

    def finish(self) -> None:
        """Checks that did not report for a node (not applicable there) show as blank."""
        for n in self.nodes:
            for c in CHECK_COLUMNS:
                if (n, c) not in self.results:
                    self.update_cell(n, c, Text(" "))

    def selected(self):
        row, col = self.cursor_coordinate
        if col == 0 or row >= len(self.nodes):
            return None
        return self.results.get((self.nodes[row], CHECK_COLUMNS[col - 1]))


def evidence_text(ev) -> Text:
    """A check's verdict, the command that produced it, and its output."""
    icon, style = CHECK_STYLE.get(ev.status, ("?", ""))
    t = Text()
    t.append(f"{ev.node} · {ev.check}: ", style="bold")
    t.append(f"{icon} {ev.status}", style=style)
    t.append(f"  {ev.summary}\n")
    if ev.command:
        t.append("$ " + ev.command + "\n", style="cyan")
    if ev.output:
        out = ev.output if len(ev.output) < 6000 else ev.output[:6000] + "\n…"
        t.append(out, style="")
    return t


class ChecksTab(TabPane):
    """The matrix over the evidence of its selected cell."""

    def __init__(self, title: str, nodes: list[str], **kw) -> None:
        super().__init__(title, **kw)
        self.nodes = nodes

    def compose(self) -> ComposeResult:
        yield CheckMatrix(self.nodes, id="matrix")
        with VerticalScroll(id="evidence-box"):
            yield Static("select a cell to see the command and its output", id="evidence")

    @property
    def matrix(self) -> CheckMatrix:
        return self.query_one(CheckMatrix)

    @on(DataTable.CellHighlighted, "#matrix")
    def _cell_hl(self, ev: DataTable.CellHighlighted) -> None:
        r = self.matrix.selected()
        if r is not None:
            self.query_one("#evidence", Static).update(evidence_text(r))
