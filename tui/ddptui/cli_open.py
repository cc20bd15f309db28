"""`ddptui open BUNDLE|RUN_DIR`: someone's run, read-only, in the TUI (or as text with --headless).

Nothing from the file is executed and no node is contacted. A file that is not a bundle is bad
input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .core.errors import UsageError


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
