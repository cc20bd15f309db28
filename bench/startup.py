"""Start-up: `ddptui --help` against `python -c pass`, and the TUI's first frame in a pseudo-terminal
(the picker's title drawn) against a minimal Textual app's (one Static drawn), and against a
Textual app of the picker's own widgets (header, title, a 4-column table of 2 rows, footer: what
Textual alone takes to draw that screen), and the first frame of `ddptui PLAYBOOK` (README's
first command opens the shipped local playbook: its step list drawn) against the minimal app's,
each process started fresh; and `import ddptui.ui.app` against `import textual.app` alone. What ddptui.tcss
costs: the app's first frame with and without it (CSS_PATH = None; the widgets' DEFAULT_CSS stays).

Every process runs as from a user's shell: without PYTHONDONTWRITEBYTECODE (some sandboxes and CI
images set it), so ddptui's own modules, like Textual's installed ones, are read from their cached
bytecode, not compiled again at each start; one untimed round first writes that cache (none with
--quick). `--playbooks N` puts N more playbooks where the picker looks (its first frame reads them all).

    .venv/bin/python -m bench.startup [--quick] [--reps R] [--playbooks N]
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMOKE = Path(__file__).resolve().parent.parent / "playbooks" / "local-smoke.yaml"

APP = ("import sys\nfrom ddptui.ui.app import DdptuiApp\n"
       "if sys.argv[1:] == ['--no-css']:\n    DdptuiApp.CSS_PATH = None\nDdptuiApp().run()\n")
MINIMAL = ("from textual.app import App\nfrom textual.widgets import Static\n"
           "class A(App):\n    def compose(self):\n        yield Static('minimal-ready')\nA().run()\n")
SAME = """\
from textual.app import App
from textual.widgets import DataTable, Footer, Header, Static
class A(App):
    BINDINGS = [("q", "quit", "Quit")]
    def compose(self):
        yield Header()
        yield Static("same-ready")
        yield DataTable(cursor_type="row")
        yield Static("")
        yield Footer()
    def on_mount(self):
        t = self.query_one(DataTable)
        t.add_columns("playbook", "file", "from", "description")
        t.add_row("local-smoke", "playbooks/local-smoke.yaml", "examples", "A real torchrun job on this machine")
        t.add_row("three-nodes", "playbooks/three-nodes.yaml", "examples", "Three nodes over ssh")
        t.focus()
A().run()
"""


def first_frame(argv: list[str], marker: bytes, cwd: str, timeout: float = 60.0) -> float:
    """Seconds from the start of the process until `marker` is on its terminal."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a 120x40 terminal
        os.chdir(cwd)
        os.environ.update(TERM="xterm-256color", COLUMNS="120", LINES="40")
        os.execv(argv[0], argv)
    t0 = time.perf_counter()
    seen = b""
    try:
        while time.perf_counter() - t0 < timeout:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    seen += os.read(fd, 65536)
                except OSError:
                    break
                if marker in seen:
                    return time.perf_counter() - t0
        raise RuntimeError(f"{argv}: no {marker!r} within {timeout} s: {seen[-500:]!r}")
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.startup")
    ap.add_argument("--quick", action="store_true", help="two repetitions")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--playbooks", type=int, default=0, metavar="N",
                    help="N more playbooks in the picker's ./playbooks (copies of the shipped local one)")
    args = ap.parse_args(argv)
    reps = args.reps or (2 if args.quick else 9)
    py = sys.executable
    rows: dict[str, list[float]] = {k: [] for k in ("help", "pass", "imp_app", "imp_textual", "tui", "minimal",
                                                    "same", "playbook", "app_css", "app_nocss")}
    with tempfile.TemporaryDirectory() as d:
        minimal = Path(d) / "minimal.py"
        minimal.write_text(MINIMAL)
        same = Path(d) / "same.py"
        same.write_text(SAME)
        app = Path(d) / "app.py"
        app.write_text(APP)
        if args.playbooks:
            (Path(d) / "playbooks").mkdir()
            text = SMOKE.read_text()
            for i in range(args.playbooks):
                (Path(d) / "playbooks" / f"copy-{i:03}.yaml").write_text(text.replace("name: local-smoke", f"name: copy-{i:03}"))
        no_pyc = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None
        warm = 0 if args.quick else 1  # --quick: no untimed round, its figures are not read
        for rep in range(warm + reps):  # interleaved: each figure next to its baseline
            if rep == warm:
                rows = {k: [] for k in rows}
            rows["help"].append(timed([py, "-m", "ddptui", "--help"]))
            rows["pass"].append(timed([py, "-c", "pass"]))
            rows["imp_app"].append(timed([py, "-c", "import ddptui.ui.app"]))
            rows["imp_textual"].append(timed([py, "-c", "import textual.app"]))
            rows["tui"].append(first_frame([py, "-m", "ddptui"], b"Pick a playbook", d))
            rows["minimal"].append(first_frame([py, str(minimal)], b"minimal-ready", d))
            rows["same"].append(first_frame([py, str(same)], b"same-ready", d))
            rows["playbook"].append(first_frame([py, "-m", "ddptui", str(SMOKE), "--runs-dir", str(Path(d) / "runs")],
                                                b"launch-master", d))
            rows["app_css"].append(first_frame([py, str(app)], b"Pick a playbook", d))
            rows["app_nocss"].append(first_frame([py, str(app), "--no-css"], b"Pick a playbook", d))
    m = {k: statistics.median(v) for k, v in rows.items()}
    more = f", {args.playbooks} more playbooks in ./playbooks" if args.playbooks else ""
    print(f"start-up, median of {reps} (each a fresh process{more}):")
    if no_pyc:
        print("  (PYTHONDONTWRITEBYTECODE was set here; these processes ran without it, as from a user's shell)")
    print(f"  ddptui --help           {m['help'] * 1e3:6.0f} ms   python -c pass     {m['pass'] * 1e3:6.0f} ms   "
          f"ratio {m['help'] / m['pass']:.1f}x")
    print(f"  import ddptui.ui.app    {m['imp_app'] * 1e3:6.0f} ms   import textual.app {m['imp_textual'] * 1e3:6.0f} ms   "
          f"ratio {m['imp_app'] / m['imp_textual']:.2f}x")
    print(f"  TUI first frame         {m['tui'] * 1e3:6.0f} ms   minimal Textual    {m['minimal'] * 1e3:6.0f} ms   "
          f"ratio {m['tui'] / m['minimal']:.2f}x")
    print(f"  TUI first frame         {m['tui'] * 1e3:6.0f} ms   the same widgets   {m['same'] * 1e3:6.0f} ms   "
          f"ratio {m['tui'] / m['same']:.2f}x   (Textual alone drawing the picker's screen)")
    print(f"  ddptui PLAYBOOK, frame  {m['playbook'] * 1e3:6.0f} ms   minimal Textual    {m['minimal'] * 1e3:6.0f} ms   "
          f"ratio {m['playbook'] / m['minimal']:.2f}x   (the local playbook's screen: steps, panes, tabs)")
    print(f"  the app, ddptui.tcss    {m['app_css'] * 1e3:6.0f} ms   without it         {m['app_nocss'] * 1e3:6.0f} ms   "
          f"the CSS costs {(m['app_css'] - m['app_nocss']) * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
