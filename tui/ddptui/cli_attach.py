"""`ddptui attach JOBID`: a Slurm batch job's output, per node, with the live diagnosis (core/slurm/attach.py).

Read-only: attach never cancels or signals the job; Ctrl-C only stops reading. Exit codes: 0 the job
COMPLETED and no error finding stands, 1 it failed or an error finding stands, 2 bad input (no such
job, no Slurm here, its output not readable from here), 130 interrupted.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys

from .core.errors import UsageError
from .cli_args import EXIT_OK, EXIT_FAIL, EXIT_INTERRUPTED



def cmd_attach(args: argparse.Namespace) -> int:
    from .cli_commands import _runs_dir

    if not re.fullmatch(r"\d+(?:_\d+|\+\d+)?", args.job_id):  # 123, an array task 123_4, a het part 123+1
        raise UsageError(f"{args.job_id!r} is not a Slurm job id (a number, as squeue shows it)")
    runs_dir = _runs_dir(args)
    if not args.headless and not args.json:  # --json is for a program: it never opens the TUI
        return _tui(args, runs_dir)
    return _headless(args, runs_dir)


def _headless(args: argparse.Namespace, runs_dir) -> int:
    from .cli_commands import STOPPED_OUTPUT_WAIT, _raise_interrupt
    from .cli_printer import Printer
    from .core import events as E
    from .core.slurm.attach import Attachment
    from .core.slurm.commands import NoSlurm, NoSuchJob
    from .core.slurm.attach import OutputUnreadable

    printer = Printer(args.json, 6)

    def sink(ev: E.Event) -> None:
        if isinstance(ev, E.RunStarted):
            printer.width = max([6, *map(len, ev.nodes)])
        printer(ev)

    att = Attachment(args.job_id, sink, runs_dir)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        att.run()
    except (NoSlurm, NoSuchJob, OutputUnreadable) as e:
        raise UsageError(str(e)) from None
    except KeyboardInterrupt:
        if not args.json:
            printer._w(f"{'ddptui':<{printer.width}} │ interrupted: stopped reading; the job goes on in Slurm"
                       + (f" — what was read is in {att.run_dir.path}" if att.run_dir else ""))
        printer.close(wait=STOPPED_OUTPUT_WAIT)  # a terminal stopped too does not hold it long
        return EXIT_INTERRUPTED
    finally:
        printer.close()  # what waits for a slow terminal, and the word for what it could not take
    if not args.json:
        _verdict(printer, att)
    return EXIT_OK if att.ok else EXIT_FAIL


def _verdict(printer, att) -> None:
    from .cli_printer import mark_of

    w = printer.width
    findings = [f for f in att.findings if f.active]
    for f in findings:
        printer._w(f"{'ddptui':<{w}} │ {mark_of(f)} {f.id} ({f.severity}): {f.summary}")
    state = att.final.state if att.final else "unknown"
    verdict = "ok" if att.ok else "FAILED"
    printer._w(f"{'ddptui':<{w}} │ {verdict}: slurm job {att.job_id} {state}"
               + (f", {len(findings)} finding{'s' if len(findings) != 1 else ''}" if findings else "")
               + (f" — logs in {att.run_dir.path}" if att.run_dir else ""))


def _tui(args: argparse.Namespace, runs_dir) -> int:
    """The TUI once the job has nodes (its panes are made from them): while it pends, its state and
    Slurm's reason are said here, on the terminal."""
    import time

    from .core.slurm import commands
    from .core.slurm.attach import Attachment

    said = None
    try:  # bad input is said here, before the screen opens
        while True:
            st = commands.status(args.job_id)
            if st.nodes or st.terminal:
                break
            if (st.state, st.reason) != said:
                said = (st.state, st.reason)
                sys.stderr.write(f"ddptui: slurm job {args.job_id}: {st.state}"
                                 + (f" ({st.reason})" if st.reason else "") + "; waiting for its nodes (Ctrl-C stops "
                                 "waiting, the job stays queued)\n")
            time.sleep(2.0)
        nodes = commands.hostnames(st.nodes) if st.nodes else []
    except (commands.NoSlurm, commands.NoSuchJob) as e:
        raise UsageError(str(e)) from None
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    from .ui.app import DdptuiApp  # textual is imported only for the TUI

    att = Attachment(args.job_id, lambda ev: None, runs_dir)
    app = DdptuiApp(runs_dir=runs_dir, attach=(att, nodes))
    app.run()
    if att.run_dir is not None:
        print(f"slurm job {args.job_id}: what was read is in {att.run_dir.path}")
    if att.error:
        sys.stderr.write(f"ddptui: {att.error}\n")
        return 2
    if att.final is None or not att.final.terminal:
        return EXIT_INTERRUPTED  # left before the job ended: it goes on
    return EXIT_OK if att.ok else EXIT_FAIL
