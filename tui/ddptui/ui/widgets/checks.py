"""The Checks tab: nodes × checks, filled in live, and the selected cell's command and output."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static, TabPane

CHECK_COLUMNS = ("ping", "hostname", "interfaces", "route", "env", "ib", "shm", "memlock", "gpus", "fabric", "gpudirect", "python",
                 "torch", "backend", "master-port", "master-reachable", "ping-master", "script", "slurm", "probe")
CHECK_STYLE = {"pass": ("✓", "green"), "warn": ("!", "bold yellow"), "fail": ("✗", "bold red"),
               "skip": ("–", "dim"), "running": ("…", "yellow")}


class CheckMatrix(DataTable):
    """Checks × nodes, filled in live as each node's results arrive.

    A row per check, named in full, and a column per node: sixteen checks side by side were cut at
    100 columns, while a few nodes fit beside the step list (more scroll sideways). Once the checks
    are done, the rows of checks that no node reported (not applicable here) go."""

    def __init__(self, nodes: list[str], **kw) -> None:
        super().__init__(cursor_type="cell", **kw)
        self.nodes = nodes
        self.checks: list[str] = list(CHECK_COLUMNS)  # the rows, in order
        self.results: dict[tuple[str, str], object] = {}

    def on_mount(self) -> None:
        self.add_column("check", key="check")
        for n in self.nodes:
            self.add_column(n, key=n)
        self._rows(CHECK_COLUMNS, "·", "dim")

    def _rows(self, checks, icon: str, style: str) -> None:
        self.clear()
        self.checks = list(checks)
        for c in self.checks:
            self.add_row(Text(c, style="bold"), *[self._cell(n, c) or Text(icon, style=style) for n in self.nodes], key=c)

    def _cell(self, node: str, check: str) -> Text | None:
        ev = self.results.get((node, check))
        if ev is None:
            return None
        icon, style = CHECK_STYLE.get(ev.status, ("?", ""))
        return Text(icon, style=style)

    def set_nodes(self, nodes: list[str]) -> None:
        """The columns of another node list (a Slurm allocation names the nodes once it is granted)."""
        self.nodes = list(nodes)
        self.results.clear()
        self.clear(columns=True)
        self.on_mount()

    def reset(self) -> None:
        self.results.clear()
        self._rows(CHECK_COLUMNS, "…", "yellow")

    def clear_results(self) -> None:
        """Back to before any check ran."""
        self.results.clear()
        self._rows(CHECK_COLUMNS, "·", "dim")

    def set_result(self, ev) -> None:
        col = ev.check if ev.check in CHECK_COLUMNS else "probe"
        self.results[(ev.node, col)] = ev
        if col not in self.checks:  # a row dropped by finish: the checks again, with what came so far
            self._rows([c for c in CHECK_COLUMNS if c in self.checks or any(k[1] == c for k in self.results)], "…", "yellow")
            return
        self.update_cell(col, ev.node, self._cell(ev.node, col))

    def finish(self) -> None:
        """The checks that reported on some node; a node's cell is blank where its check did not apply."""
        self._rows([c for c in CHECK_COLUMNS if any(k[1] == c for k in self.results)], " ", "")

    def selected(self):
        row, col = self.cursor_coordinate
        if col == 0 or row >= len(self.checks) or col > len(self.nodes):
            return None
        return self.results.get((self.nodes[col - 1], self.checks[row]))

    def locate(self, node: str, finding) -> tuple[int, int] | None:
        """The cell (row, column) of `node`'s check behind a finding: a failed or warned one the
        finding says (Finding.says: the cell names it, or it quotes the cell's command), else any
        one it says, else the node's first failed or warned check; None when the node has none here."""
        if node not in self.nodes:
            return None
        mine = [(c, r) for c in self.checks if (r := self.results.get((node, c))) is not None]
        bad = [(c, r) for c, r in mine if r.status in ("fail", "warn")]
        cell = (next((c for c, r in bad if finding.says(r)), None) or next((c for c, r in mine if finding.says(r)), None)
                or next((c for c, r in bad), None))
        return None if cell is None else (self.checks.index(cell), self.nodes.index(node) + 1)

    def row_results(self) -> list:
        """The cursor's check on every node that reported it (the cursor on the check's name)."""
        row, col = self.cursor_coordinate
        if col != 0 or row >= len(self.checks):
            return []
        return [r for n in self.nodes if (r := self.results.get((n, self.checks[row]))) is not None]


def verdict_line(ev, t: Text) -> Text:
    """`node · check: ✓ pass  summary`, appended to `t`."""
    icon, style = CHECK_STYLE.get(ev.status, ("?", ""))
    t.append(f"{ev.node} · {ev.check}: ", style="bold")
    t.append(f"{icon} {ev.status}", style=style)
    t.append(f"  {ev.summary}\n")
    return t


def evidence_text(ev) -> Text:
    """A check's verdict, the command that produced it, and its output."""
    t = verdict_line(ev, Text())
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
        elif rows := self.matrix.row_results():  # on the check's name (where ↓ goes): it on every node
            t = Text()
            for x in rows:
                verdict_line(x, t)
            t.append("→ to a node's cell: its command and output", style="dim")
            self.query_one("#evidence", Static).update(t)
