"""The Results tab: one row per rank from the smoke test's result lines, and the measured bandwidth.

Filled from the nodes' output as it streams (`feed`, parsed by core.logs.results), or from a
finished run's summary (`RunFinished.summary`: `results` and `bandwidth`) when that is all there is.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static, TabbedContent, TabPane

from ...core.logs.bandwidth import Bandwidth, gbps_words, size_words
from ...core.logs.results import parse_result_line

COLUMNS = ("node", "host", "rank", "all_reduce", "allreduce ms", "in sync", "total s")


class ResultsTab(TabPane):
    """Each rank's result; the bandwidth figures below when the job printed them."""

    DEFAULT_CSS = """
    ResultsTab #results { height: auto; max-height: 70%; }
    ResultsTab #bandwidth { height: auto; padding: 1 1 0 1; }
    """

    def __init__(self, title: str, **kw) -> None:
        super().__init__(title, **kw)
        self.results: list[dict] = []
        self.bandwidth = Bandwidth()

    def compose(self) -> ComposeResult:
        yield DataTable(cursor_type="row", id="results")
        yield Static(Text("no results yet: they come when the job's ranks finish", style="dim"), id="bandwidth")

    def on_mount(self) -> None:
        self.query_one("#results", DataTable).add_columns(*COLUMNS)

    def feed(self, node: str, lines: list[str]) -> bool:
        """A node's lines; True when one was a result or a bandwidth figure."""
        got = False
        for line in lines:
            if "ddptui-smoke " not in line:
                continue
            if (r := parse_result_line(line)) is not None:
                self.results.append({**r, "node": node})
                got = True
            elif "ddptui-smoke bandwidth" in line:
                self.bandwidth.feed(node, line)
                got = True
        if got:
            self._show(self.bandwidth.summary())
        return got

    def from_summary(self, summary: dict) -> None:
        """A finished run's summary: what it recorded, when nothing streamed here (a replay)."""
        if self.results:
            return
        if not summary.get("results"):  # the run is over: "they come when the ranks finish" no longer holds
            self.query_one("#bandwidth", Static).update(Text(
                "no rank results in this run: its job printed no `ddptui-smoke result` lines (the "
                "bundled smoke test, builtin:smoke, prints them; other scripts need not)", style="dim"))
            return
        self.results = list(summary["results"])
        self._show(summary.get("bandwidth"))

    def clear(self) -> None:
        self.results = []
        self.bandwidth.clear()
        self.query_one("#results", DataTable).clear()
        self.query_one("#bandwidth", Static).update(Text("no results yet: they come when the job's ranks finish",
                                                         style="dim"))
        self._label()

    def _show(self, bw: dict | None) -> None:
        t = self.query_one("#results", DataTable)
        t.clear()
        for r in sorted(self.results, key=lambda r: (r.get("rank") if isinstance(r.get("rank"), int) else 1 << 30)):
            ok = r.get("all_reduce") == "ok"
            t.add_row(Text(str(r.get("node", "")), style="bold"), r.get("host", ""), str(r.get("rank", "")),
                      Text("ok" if ok else str(r.get("all_reduce", "?")), style="bold green" if ok else "bold red"),
                      r.get("allreduce_ms", ""), r.get("params_in_sync", ""), r.get("total_s", ""))
        self.query_one("#bandwidth", Static).update(bandwidth_text(bw))
        self._label()

    def _label(self) -> None:
        bad = sum(1 for r in self.results if r.get("all_reduce") != "ok")
        label = "Results" + (f" {len(self.results) - bad}✓" if self.results else "") + (f" {bad}✗" if bad else "")
        self.query_ancestor(TabbedContent).get_tab(self).label = label


def bandwidth_text(bw: dict | None) -> Text:
    if not bw:
        return Text("no bandwidth figures: the job printed none (another script, or --bw-seconds 0)", style="dim")
    t = Text("bandwidth", style="bold")
    how = str(bw.get("backend") or "") + (f", NCCL_ALGO={bw['nccl_algo']}" if bw.get("nccl_algo") else "")
    for name, key in (("inter-node", "inter_node"), ("world", "world")):
        f = bw.get(key)
        if not f:
            continue
        t.append(f"\n  {name:<11}", style="cyan")
        t.append(f"busbw {gbps_words(f['busbw_gbps'])}", style="bold")
        t.append(f" · algbw {gbps_words(f['algbw_gbps'])}")
        t.append(f"\n  {'':<11}{size_words(f['size'])} all_reduce over {f['ranks']} ranks, {how}", style="dim")
    if bw.get("single_node") and not bw.get("inter_node"):
        t.append("\n  one node: no inter-node figure", style="dim")
    if bw.get("min_busbw_gbps"):
        t.append(f"\n  playbook minimum: {gbps_words(bw['min_busbw_gbps'])} inter-node busbw", style="dim")
    return t
