"""`ddptui open BUNDLE|RUN_DIR`: someone's run, read-only, in the TUI (or as text with --headless).

Nothing from the file is executed and no node is contacted. A file that is not a bundle is bad
input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .core.errors import UsageError


def open_parser(cmds, common) -> None:
    o = cmds.add_parser("open", help="a hand-off file (.ddpt) or a run directory in the TUI, read-only, "
                                     "with no cluster; --headless prints a summary")
    o.add_argument("source", type=Path, metavar="BUNDLE|RUN_DIR")
    o.add_argument("--headless", action="store_true",
                   help="print whose run it is, its nodes, steps and findings instead of opening the TUI")
    common(o)


def cmd_open(args: argparse.Namespace) -> int:
    from .core.bundle import BundleError, open_any
    from .core.bundle.view import summary_text, viewing_playbook

    try:
        b = open_any(args.source)
    except BundleError as e:
        raise UsageError(str(e)) from None
    if args.headless:
        pb, note = viewing_playbook(b, Path.cwd())
        sys.stdout.write(summary_text(b, pb, note))
        return 0
    from .ui.app import DdptuiApp  # textual is imported only for the TUI

    app = DdptuiApp(bundle=b)
    app.run()
    return app.return_code or 0
