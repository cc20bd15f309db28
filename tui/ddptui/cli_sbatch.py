"""`ddptui sbatch PLAYBOOK [-o FILE]` writes a Slurm batch script; `ddptui sbatch --check FILE [--json]`
names the classic mistakes of one, by line. Exit codes: 0 written / nothing found, 1 mistakes found,
2 bad input (one line on stderr, as every other command)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import stat
import sys
from pathlib import Path

from .core.errors import UsageError
from .core.paths import refuse_to_write, write_private

MAX_SCRIPT_BYTES = 1 << 20  # a batch script is text; a bigger file is something else


def cmd_sbatch(args: argparse.Namespace) -> int:
    if args.check is not None:
        if args.playbook is not None or args.output is not None:
            raise UsageError("sbatch --check FILE takes no PLAYBOOK and no -o")
        return _check(args.check, args.json)
    if args.playbook is None:
        raise UsageError("sbatch: give a PLAYBOOK to write as a batch script, or --check FILE")
    if args.json:
        raise UsageError("sbatch: --json goes with --check FILE")
    from .core.playbook.loader import load_playbook
    from .core.slurm.sbatch import render_sbatch

    if not args.playbook.exists():  # the words `validate` and `run` use
        raise UsageError(f"{args.playbook}: no such playbook file")
    out = render_sbatch(load_playbook(args.playbook))  # a bad playbook: PlaybookError, exit 2 in cli.main
    for w in out.warnings:
        sys.stderr.write(f"ddptui: warning: {w}\n")
    if args.output is None:
        sys.stdout.write(out.text)
        return 0
    if (why := refuse_to_write(args.output, inputs=(args.playbook,))) is not None:
        raise UsageError(f"-o {why}")
    try:  # 0600: the script holds the job's environment (secrets are left out, but hostnames, paths
        write_private(args.output, out.text.encode())  # and settings are nobody else's business)
    except OSError as e:
        raise UsageError(f"-o {args.output}: cannot write it: {e.strerror or e}") from None
    print(args.output)
    print(f"submit it with: sbatch {shlex.quote(str(args.output))}")
    return 0


def read_script(path: Path) -> str:
    """A batch script's text; UsageError (exit 2) for a missing file, a folder, a pipe, a binary file."""
    try:  # O_NONBLOCK: a FIFO with no writer must not hang the check
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read it: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{path}: is a folder, not a batch script")
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{path}: is not a regular file (a pipe, a device or a socket)")
        if st.st_size > MAX_SCRIPT_BYTES:
            raise UsageError(f"{path}: is {st.st_size:,} bytes; not a batch script (at most 1 MiB)")
        data = os.read(fd, MAX_SCRIPT_BYTES + 1)
    except OSError as e:
        raise UsageError(f"{path}: cannot read it: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if b"\0" in data:
        raise UsageError(f"{path}: is a binary file, not a batch script")
    if not data.startswith(b"#!"):  # sbatch's own rule: it refuses such a file too
        first = data.split(b"\n", 1)[0][:60].decode("utf-8", errors="replace")
        raise UsageError(f"{path}:1: not a batch script: sbatch wants #! and an interpreter on the first line"
                         + (f", not {first!r}" if first.strip() else " (the file starts empty)"))
    return data.decode("utf-8", errors="replace")  # comments in another encoding (GBK) must not stop the check


def _check(path: Path, as_json: bool) -> int:
    from .core.slurm.lint import check_script

    mistakes = check_script(read_script(path), str(path))
    if as_json:
        print(json.dumps({"file": str(path), "mistakes": [m.to_json() for m in mistakes]}, indent=2))
        return 1 if mistakes else 0
    for m in mistakes:
        print(f"{path}:{m.line}: {m.message} [{m.id}]")
        print(f"    fix: {m.fix}" + (f" [diagnosis: {m.cause}]" if m.cause else ""))
    n = len(mistakes)
    print(f"{path}: {n} mistake{'s' if n != 1 else ''}" if n else f"{path}: no known mistakes")
    return 1 if mistakes else 0
