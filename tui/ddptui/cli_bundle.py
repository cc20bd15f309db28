"""The hand-off file's commands: `bundle`, `report`, `diff`, and `diagnose` on a bundle.

Bad input (a file that is not a bundle, a hostile one) is a UsageError: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .core.errors import UsageError
from .cli_args import EXIT_OK, EXIT_FAIL



def _open(path: Path):
    """A bundle or a run directory (redacted like a bundle); neither is bad input (exit 2, one line)."""
    from .core.bundle import BundleError, open_any
    from .core.bundle.scrub import scrubbed

    try:
        return scrubbed(open_any(path))
    except BundleError as e:
        raise UsageError(str(e)) from None


def cmd_diagnose_bundle(args: argparse.Namespace) -> int:
    from .core.bundle.rediagnose import rediagnose
    from .core.redact import strip_escapes

    if len(args.files) != 1:
        raise UsageError("diagnose: give one bundle (a .ddpt file) at a time")
    b = _open(args.files[0])
    findings, new = rediagnose(b, args.nnodes)
    if args.json:
        print(json.dumps({"findings": [{**f.to_json(), "new": f.id in new} for f in findings],
                          "stored": [f.get("id") for f in b.findings]}, indent=2))
    else:
        print(f"{args.files[0]}: today's rules on {b.name} ({len(b.nodes)} nodes); "
              f"{len(b.findings)} finding(s) stored in the bundle")
        if not findings:
            print("no findings: nothing in these logs matches a known failure")
        for f in findings:
            tag = "NEW " if f.id in new else ""
            print(f"{tag}{f.severity.upper():7} {f.id} [{f.state}] — {strip_escapes(f.summary)}")
            for e in f.evidence[:6]:
                print(f"          {e.node}:{e.line}: {strip_escapes(e.text[:200])}")  # a log's OSC 52 or title, not the terminal's
    return EXIT_FAIL if any(f.severity == "error" and f.state == "active" for f in findings) else EXIT_OK


def cmd_bundle(args: argparse.Namespace) -> int:
    from .core.bundle import DEFAULT_MAX_SIZE, BundleError
    from .core.bundle.pack import human_size, pack

    if not args.run_dir.is_dir():
        raise UsageError(f"{args.run_dir}: no such run directory")
    try:
        r = pack(args.run_dir, args.output, max_size=args.max_size or DEFAULT_MAX_SIZE, redact=tuple(args.redact))
    except BundleError as e:
        raise UsageError(str(e)) from None
    except OSError as e:  # the file it names: a member of the run that cannot be read, or the output
        where = Path(e.filename) if e.filename else (args.output or args.run_dir)
        verb = "read" if args.run_dir.resolve() in where.resolve().parents else "write"
        raise UsageError(f"{where}: cannot {verb} it: {e.strerror or e}") from None
    m = r.manifest
    if args.json:
        print(json.dumps(m, indent=2))
        return EXIT_OK
    red = m["redaction"]
    cut = {n: i["elided"] for n, i in m["logs"].items() if i["elided"]}
    print(f"{r.path}: {human_size(r.size)} (cap {human_size(m['max_size'])}), {len(m['nodes'])} node(s), "
          f"{len(m['members'])} members")
    print(f"redacted: {red['replaced']} value(s)" + (f" of {', '.join(red['names'])}" if red["names"] else "")
          + (f" — by kind: {', '.join(sorted({k for p in red['by_place'].values() for k in p}))}" if red["replaced"] else ""))
    for n, k in cut.items():
        print(f"{n}: {k} log lines elided (head and tail kept)")
    for x in m["missing"]:
        print(f"missing: {x['what']} — {x['why']}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from .core.bundle.report import report

    sys.stdout.write(report(_open(args.source)))
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    from .core.bundle.diff import diff, render

    d = diff(_open(args.a), _open(args.b))
    sys.stdout.write(json.dumps(d, indent=2) + "\n" if args.json else render(d))
    return EXIT_OK
