"""The command line's parser, alone: `ddptui --help` and a usage error load argparse and this
module, nothing of ddptui.core (cli.py imports each command's code once the arguments are read).
A path argument becomes a pathlib.Path without importing pathlib for --help."""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__

SUBCOMMANDS = ("validate", "check", "run", "diagnose", "fix", "bundle", "report", "diff", "open", "sbatch",
               "attach")
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130  # the contract (CONTRACTS.md)


def Path(text: str):  # noqa: N802 — argparse's type=, named as the type it gives
    from pathlib import Path as _P

    return _P(text)


def _columns() -> int:
    """shutil.get_terminal_size's answer without importing shutil (and its bz2, lzma, zlib)."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=max(_columns(), 11) - 2)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *a, **kw) -> None:
        kw.setdefault("formatter_class", _Formatter)
        super().__init__(*a, **kw)

    def error(self, message: str) -> None:  # argparse's own exit code is 2 too; keep its words
        self.print_usage(sys.stderr)
        sys.stderr.write(f"ddptui: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs-dir", type=_folder, help="where runs are recorded (default: the user data folder)")
    p.add_argument("--ssh-config", type=Path, help="an ssh_config to use instead of ~/.ssh/config")
    p.add_argument("--accept-new-host-keys", action="store_true",
                   help="accept and save unknown host keys (like StrictHostKeyChecking=accept-new); "
                        "a changed key is always refused")
    p.add_argument("--version", action="version", version=f"ddptui {__version__}")


def build_parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    top = _Parser(prog="ddptui", description=(
        "Get multi-node PyTorch jobs running from a login node. With no command, opens the TUI: "
        "the playbook picker, or PLAYBOOK ready to step through."),
        epilog="commands (headless): validate PLAYBOOK · check PLAYBOOK [--json] · "
               "run PLAYBOOK --headless [--from STEP] [--json] · diagnose FILE... [--nnodes N] [--json] · "
               "fix PLAYBOOK [--id ID] [--apply] · bundle RUN_DIR [-o FILE] · report RUN · diff RUN RUN · "
               "open BUNDLE [--headless] · sbatch PLAYBOOK [-o FILE] · sbatch --check FILE [--json] · "
               "attach JOBID [--headless] [--json].  `ddptui COMMAND --help` for more.")
    top.add_argument("playbook", nargs="?", type=Path, help="a playbook YAML file")
    _common(top)

    sub = _Parser(prog="ddptui")
    cmds = sub.add_subparsers(dest="command", required=True, parser_class=_Parser)
    v = cmds.add_parser("validate", help="check a playbook; every problem as path:line:col: message")
    v.add_argument("playbook", type=Path)
    _common(v)
    c = cmds.add_parser("check", help="run the preflight steps only, headless")
    c.add_argument("playbook", type=Path)
    c.add_argument("--json", action="store_true", help="print one JSON object")
    _common(c)
    r = cmds.add_parser("run", help="run the whole playbook")
    r.add_argument("playbook", type=Path)
    r.add_argument("--headless", action="store_true", help="without the TUI: lines prefixed with their node")
    r.add_argument("--from", dest="from_step", metavar="STEP", type=_nonempty, help="start at this step id")
    r.add_argument("--json", action="store_true", help="one JSON event per line")
    _common(r)
    d = cmds.add_parser("diagnose", help="offline diagnosis of saved logs, a run directory or a bundle")
    d.add_argument("files", nargs="+", type=Path, metavar="FILE",
                   help="node logs (one per node of one job), a run directory, or a .ddpt bundle")
    d.add_argument("--json", action="store_true", help='print {"findings": [...]}')
    d.add_argument("--nnodes", type=_node_count, help="the job's node count, if the logs do not come from a run directory")
    _common(d)
    f = cmds.add_parser("fix", help="run the checks; show each fixable finding's diff; --apply writes a revision")
    f.add_argument("playbook", type=Path)
    f.add_argument("--id", metavar="ID", help="only this diagnosis id (e.g. bad-socket-ifname)")
    f.add_argument("--apply", action="store_true", help="write the fixed playbook as PLAYBOOK.revN.yaml, print its path")
    _common(f)
    for add_parsers in (_bundle_parsers, _open_parser, _sbatch_parser, _attach_parser):
        add_parsers(cmds, _common)
    return top, sub


def _bundle_parsers(cmds, common) -> None:
    """The `bundle`, `report` and `diff` subcommands; `common` adds the flags every subcommand takes."""
    b = cmds.add_parser("bundle", help="pack a finished run into one hand-off file (.ddpt), secrets redacted")
    b.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    b.add_argument("-o", "--output", type=Path, metavar="FILE", help="where to write it (default: RUN_DIR.ddpt)")
    b.add_argument("--max-size", type=_size, default=None, metavar="SIZE",
                   help="refuse to write a bigger file; node logs are cut (head and tail kept) to fit "
                        "(default 25MB, GitHub's attachment limit; e.g. 10MB, 500KB)")
    b.add_argument("--redact", action="append", default=[], metavar="NAME",
                   help="also hide this env variable's value everywhere (repeatable), beside the playbook's redact:")
    b.add_argument("--json", action="store_true", help="print the manifest")
    common(b)
    r = cmds.add_parser("report", help="Markdown for a GitHub issue, from a bundle or a run directory")
    r.add_argument("source", type=Path, metavar="BUNDLE|RUN_DIR")
    common(r)
    d = cmds.add_parser("diff", help="two runs or bundles side by side: env, facts, transports, findings, exits")
    d.add_argument("a", type=Path, metavar="A")
    d.add_argument("b", type=Path, metavar="B")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    common(d)


def _size(text: str) -> int:
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b?)\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (write e.g. 25MB, 500KB or 1000000)")
    unit = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}[m.group(2).lower()]
    n = float(m.group(1)) * unit
    if not 0 < n < 1 << 50:  # 400 digits were a float infinity, and int() of it a traceback
        raise argparse.ArgumentTypeError(f"{text!r}: the size must be greater than 0 and under 1 PB")
    return int(n)


def _folder(text: str) -> Path:
    if not text.strip():  # Path("") is ".": the runs would land in the current folder unasked
        raise argparse.ArgumentTypeError("an empty folder name (the default is the user data folder: leave it out)")
    return Path(text)


def _nonempty(text: str) -> str:
    if not text.strip():  # "" was taken as "from the start"
        raise argparse.ArgumentTypeError("an empty step id (leave --from out to run from the start)")
    return text


def _node_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= n <= 100_000:
        raise argparse.ArgumentTypeError(f"{text}: the job's node count is 1 or more")
    return n


def _open_parser(cmds, common) -> None:
    o = cmds.add_parser("open", help="a hand-off file (.ddpt) or a run directory in the TUI, read-only, "
                                     "with no cluster; --headless prints a summary")
    o.add_argument("source", type=Path, metavar="BUNDLE|RUN_DIR")
    o.add_argument("--headless", action="store_true",
                   help="print whose run it is, its nodes, steps and findings instead of opening the TUI")
    common(o)


def _sbatch_parser(cmds, common) -> None:
    s = cmds.add_parser("sbatch", help="write the playbook as a Slurm batch script; --check FILE names the "
                                       "mistakes in a batch script, by line")
    s.add_argument("playbook", nargs="?", type=Path, help="the playbook to write as a batch script")
    s.add_argument("-o", "--output", type=Path, metavar="FILE",
                   help="write the script here (mode 0600) instead of printing it")
    s.add_argument("--check", type=Path, metavar="FILE", help="check this batch script instead")
    s.add_argument("--json", action="store_true", help='with --check: print {"file": ..., "mistakes": [...]}')
    common(s)


def _attach_parser(cmds, common) -> None:
    a = cmds.add_parser("attach", help="follow a Slurm batch job's output per node, diagnosed live (read-only)",
                        description="Follow a Slurm batch job (sbatch; srun --label for per-node lines) as its "
                                    "output grows: each node's lines, the live diagnosis, and a run directory "
                                    "for `ddptui diagnose`/`bundle`. Read-only: it never cancels or signals "
                                    "the job; Ctrl-C stops reading, the job goes on.")
    a.add_argument("job_id", metavar="JOBID", help="the Slurm job id (squeue -u $USER lists yours)")
    a.add_argument("--headless", action="store_true", help="without the TUI: lines prefixed with their node")
    a.add_argument("--json", action="store_true", help="with --headless: one JSON event per line")
    common(a)
