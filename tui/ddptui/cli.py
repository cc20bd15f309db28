"""The command line: `ddptui [PLAYBOOK]` starts the TUI; the subcommands work headless.

Errors become words here, in one place: bad input exits 2 with `path:line:col: message`, never a traceback.
`ddptui --help` and a usage error end in the parser (cli_args: argparse alone); each command's code
(cli_commands and the cli_* beside it) is imported once the arguments are read.
"""

from __future__ import annotations

import sys

from .cli_args import EXIT_FAIL, EXIT_USAGE, SUBCOMMANDS, build_parser


def main(argv: list[str] | None = None) -> int:
    argv = _flags_after_command(list(sys.argv[1:] if argv is None else argv))
    top, sub = build_parser()
    is_sub = bool(argv) and argv[0] in SUBCOMMANDS
    try:
        args = (sub if is_sub else top).parse_args(argv)  # --help, --version and bad flags end here
    except BrokenPipeError:
        return EXIT_FAIL
    from .core.errors import DdptuiError, PlaybookError, UsageError

    try:
        return _command(args.command if is_sub else None)(args)
    except PlaybookError as e:
        print_problems(e)
        return EXIT_USAGE
    except UsageError as e:
        sys.stderr.write(f"ddptui: {e}\n")
        return EXIT_USAGE
    except DdptuiError as e:
        sys.stderr.write(f"ddptui: {e}\n")
        return EXIT_FAIL
    except BrokenPipeError:
        return EXIT_FAIL


_VALUED = ("--runs-dir", "--ssh-config")  # the common flags, which every subcommand takes too


def _flags_after_command(argv: list[str]) -> list[str]:
    """`ddptui --runs-dir X check PB`, as `ddptui check PB --runs-dir X` (git's order: it was
    "unrecognized arguments: PB"). Only the common flags move; anything else is left to the parser."""
    i = 0
    while i < len(argv) and argv[i].startswith("--"):
        if argv[i] in _VALUED:
            i += 2
        elif argv[i].startswith(tuple(f + "=" for f in _VALUED)) or argv[i] == "--accept-new-host-keys":
            i += 1
        else:
            return argv
    if 0 < i < len(argv) and argv[i] in SUBCOMMANDS:
        return [argv[i], *argv[:i], *argv[i + 1:]]
    return argv


def _command(name: str | None):
    """The function that runs subcommand `name` (None: the TUI), its module imported now."""
    if name in ("bundle", "report", "diff"):
        from . import cli_bundle as m
    elif name == "open":
        from . import cli_open as m
    elif name == "sbatch":
        from . import cli_sbatch as m
    elif name == "attach":
        from . import cli_attach as m
    else:
        from . import cli_commands as m
    return getattr(m, f"cmd_{name or 'tui'}")


def print_problems(e) -> None:
    for p in e.problems:
        sys.stderr.write(p.render() + "\n")
    n = len(e.problems)
    sys.stderr.write(f"{e.path}: {n} problem{'s' if n != 1 else ''}; nothing was run\n")


