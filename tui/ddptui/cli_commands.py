"""What each command of cli.py does (validate, check, run, fix, diagnose, the TUI); imported
once the arguments are read, so that `ddptui --help` loads none of it."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import signal
import sys
from pathlib import Path

from .cli_bundle import cmd_diagnose_bundle
from .cli_printer import Printer
from .core.errors import PlaybookError, UsageError
from .cli_args import EXIT_OK, EXIT_FAIL, EXIT_INTERRUPTED



def _load(path: Path):
    from .core.playbook.loader import load_playbook

    if not os.path.lexists(path):  # a link that leads nowhere: the loader says where it leads
        raise UsageError(f"{path}: no such playbook file")
    return load_playbook(path)


def _ssh_settings(args: argparse.Namespace, pb=None):
    from .core.transport.settings import SSHSettings

    cfg = args.ssh_config
    if cfg is not None:  # `-F /dev/null`, as with ssh: no config at all
        if cfg.is_dir():
            raise UsageError(f"--ssh-config {cfg}: is a directory, not an ssh_config file")
        if not cfg.exists():
            raise UsageError(f"--ssh-config {cfg}: no such file")
    if pb is not None and any(n.transport == "ssh" for n in pb.nodes):  # a broken one is bad input: exit 2
        from .core.transport.ssh_config import _load_config
        _load_config(cfg)
    return SSHSettings(ssh_config=cfg, accept_new_host_keys=args.accept_new_host_keys)


def _runs_dir(args: argparse.Namespace) -> Path:
    from .core.paths import default_runs_dir, private_dir

    d = args.runs_dir or default_runs_dir()
    try:
        private_dir(d)  # what it creates is 0700: runs hold logs and commands
    except OSError as e:
        raise UsageError(f"--runs-dir {d}: cannot create it: {e.strerror}") from None
    if not os.access(d, os.W_OK):
        raise UsageError(f"--runs-dir {d}: not writable")
    return d


def cmd_validate(args: argparse.Namespace) -> int:
    pb = _load(args.playbook)
    from .core.slurm.alloc import describe_request

    n = len(pb.nodes)
    where = f"{n} node{'s' if n != 1 else ''} (master {pb.master})" if n else describe_request(pb)
    print(f"{args.playbook}: ok — {pb.name}: {where}, {pb.job.nproc_per_node} proc/node, "
          f"steps: {', '.join(s.id for s in pb.steps)}")
    return EXIT_OK


def _headless(args: argparse.Namespace, step_ids: list[str] | None, as_json: bool) -> tuple[int, object]:
    from .core.events import Notice
    from .core.redact import Redactor
    from .core.runbook import Runbook
    from .core.states import NodeStatus
    from .core.transport.factory import make_factory

    pb = _load(args.playbook)
    settings = _ssh_settings(args, pb)
    runs_dir = _runs_dir(args)
    if pb.on_slurm:  # no Slurm here, an unknown partition or job id: bad input, before anything is asked
        from .core.slurm.alloc import check_request
        check_request(pb)
    width = max([len(n.name) for n in pb.nodes] + [6])
    printer = Printer(as_json, width, Redactor.for_playbook(pb))
    rb = Runbook(pb, printer, runs_dir, make_factory(settings))
    ids = [s.id for s in pb.steps]
    start = getattr(args, "from_step", None)
    if start and start not in ids:
        raise UsageError(f"--from {start}: no such step (the steps are: {', '.join(ids)})")
    # SIGTERM is handled like Ctrl-C: stop the remote processes first.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    rc = EXIT_INTERRUPTED  # until the steps end: an error on the way does not wait for a stopped terminal
    try:
        if step_ids is not None:
            ok = all(rb.run_step(s) for s in step_ids)
        else:
            if start:
                for sid in ids[: ids.index(start)]:
                    rb.skip(sid)
            ok = rb.run_all(start)
        rc = EXIT_OK if ok else EXIT_FAIL
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        printer(Notice("warning", "interrupted: stopping the job on every node"))
        rc = EXIT_INTERRUPTED
    finally:
        rb.close()
        # what waits for a slow terminal, and the word for what it could not take; a run the user
        # stopped does not wait long for a terminal stopped too (Ctrl-S): its logs have every line
        printer.close(wait=STOPPED_OUTPUT_WAIT if rc == EXIT_INTERRUPTED else None)
    if not as_json and rb.run_path is not None:
        s = rb.summary()
        bad = [f"{n} {d['state']}" + (f" (exit {d['exit_code']})" if d["exit_code"] not in (None, 0) else "")
               for n, d in s["nodes"].items() if NodeStatus(d["state"]).bad]
        verdict = "ok" if rc == EXIT_OK else ("interrupted" if rc == EXIT_INTERRUPTED else "FAILED")
        gaps = s.get("logs_incomplete") or {}
        printer._w(f"{'ddptui':<{width}} │ {verdict}" + (f": {', '.join(bad)}" if bad else "") +
                   f" — logs in {rb.run_path}" +
                   (f" (INCOMPLETE: {', '.join(f'{k}: {v}' for k, v in gaps.items())})" if gaps else ""))
    return rc, rb


STOPPED_OUTPUT_WAIT = 5.0  # seconds a stopped run waits for its output to be written


def _raise_interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def cmd_run(args: argparse.Namespace) -> int:
    if not args.headless and not args.json:  # --json is for a program: it never opens the TUI
        return cmd_tui(argparse.Namespace(**{**vars(args), "start_step": args.from_step, "run_all": True}))
    rc, _ = _headless(args, None, args.json)
    return rc


def cmd_check(args: argparse.Namespace) -> int:
    pb = _load(args.playbook)
    ids = _check_steps(pb)
    if args.json:
        rb, ok = _quiet_checks(args, pb, ids)
        if rb is None:
            return EXIT_INTERRUPTED
        report = rb.check_report()
        report["playbook"] = str(args.playbook)
        print(json.dumps(report, indent=2))
        return EXIT_OK if ok else EXIT_FAIL
    rc, _ = _headless(args, ids, False)
    return rc


def _check_steps(pb) -> list[str]:
    return [s.id for s in pb.steps if s.kind in ("connect", "allocate", "check")] or ["connect"]


def _quiet_checks(args: argparse.Namespace, pb, ids: list[str]):
    """Run the check steps with nothing on stdout; (runbook, ok), or (None, False) on Ctrl-C."""
    import io

    from .core.runbook import Runbook
    from .core.transport.factory import make_factory

    buf = Printer(False, 6)
    buf.out = io.StringIO()
    rb = Runbook(pb, buf, _runs_dir(args), make_factory(_ssh_settings(args, pb)))
    try:
        ok = all([rb.run_step(s) for s in ids])
    except KeyboardInterrupt:
        return None, False
    finally:
        rb.close()
        buf.close()
    return rb, ok


def cmd_fix(args: argparse.Namespace) -> int:
    """Run the checks; show each fixable finding's diff; with --apply write one revision of them all."""
    from .core.diagnosis.catalog import CATALOG
    from .core.fixes import NotFixable, propose, write_revision
    from .core.redact import Redactor

    if args.id and args.id not in CATALOG:  # a typo: said before any node is asked anything
        near = difflib.get_close_matches(args.id, list(CATALOG), n=3)
        raise UsageError(f"--id {args.id}: no such diagnosis id" + (f" (did you mean {', '.join(near)}?)" if near
                                                                     else "; README's Diagnosis ids lists them"))
    pb = _load(args.playbook)
    rb, _ = _quiet_checks(args, pb, _check_steps(pb))
    if rb is None:
        return EXIT_INTERRUPTED
    findings = [f for f in rb.findings() if f.active]
    if args.id:
        known = sorted({f.id for f in findings})
        findings = [f for f in findings if f.id == args.id]
        if not findings:
            print(f"{args.playbook}: the checks raised no {args.id}" + (f" (they raised: {', '.join(known)})" if known
                                                                        else " (they raised nothing)"))
            return EXIT_FAIL
    fixable = [f for f in findings if f.fixable]
    for f in findings:
        if not f.fixable:
            print(f"{f.severity.upper():7} {f.id} — {f.summary}\n          manual: "
                  f"{f.fix.explain if f.fix else 'no fix is known'}")
    if not fixable:
        print(f"{args.playbook}: nothing that ddptui can fix by itself")
        return EXIT_FAIL
    try:
        proposal = propose(pb, fixable)
    except NotFixable as e:
        raise UsageError(str(e)) from None
    for f in fixable:
        print(f"{f.severity.upper():7} {f.id} — {f.summary}\n          fix: {f.fix.explain}")
    sys.stdout.write(Redactor.for_playbook(pb).text(proposal.diff, "diff"))  # its context lines may hold secrets
    if not args.apply:
        print(f"(not written: add --apply to save this as {_revision_name(pb.path)})")
        return EXIT_OK
    print(write_revision(proposal))
    return EXIT_OK


def _revision_name(path: Path) -> str:
    from .core.fixes import next_revision_path

    return next_revision_path(Path(path)).name


def cmd_diagnose(args: argparse.Namespace) -> int:
    from .core.bundle.read import is_bundle_path
    from .core.diagnosis.offline import DiagnoseInputError, diagnose_paths
    from .core.redact import strip_escapes

    if any(not p.is_dir() and is_bundle_path(p) for p in args.files):
        return cmd_diagnose_bundle(args)
    try:
        findings = diagnose_paths(args.files, nnodes=args.nnodes)
    except DiagnoseInputError as e:
        raise UsageError(str(e)) from None
    if args.json:
        print(json.dumps({"findings": [f.to_json() for f in findings]}, indent=2))
    else:
        if not findings:
            print("no findings: nothing in these logs matches a known failure")
        for f in findings:
            print(f"{f.severity.upper():7} {f.id} [{f.state}] — {strip_escapes(f.summary)}")
            for e in f.evidence[:6]:
                print(f"          {e.node}:{e.line}: {strip_escapes(e.text[:200])}")  # a log's OSC 52 or title, not the terminal's
            if f.explanation:
                print(f"          why: {f.explanation}")
            if f.fix:
                env = " ".join(f"{k}={v}" for k, v in f.fix.env.items())
                print(f"          fix: {env + ' — ' if env else ''}{f.fix.explain}")
                for alt in f.fix.alternatives:  # as the Findings tab lists them
                    print(f"           or: {alt}")
    active_errors = [f for f in findings if f.severity == "error" and f.state == "active"]
    return EXIT_FAIL if active_errors else EXIT_OK


def _check_slurm_input(path: Path | None) -> None:
    """A slurm playbook's bad input (no Slurm here, unknown partition or job) exits 2 before the TUI."""
    try:
        pb = _load(path) if path is not None else None
    except PlaybookError:
        return  # the TUI shows the playbook's problems itself
    if pb is not None and pb.on_slurm:
        from .core.slurm.alloc import check_request
        check_request(pb)


def cmd_tui(args: argparse.Namespace) -> int:
    settings = _ssh_settings(args)
    runs_dir = _runs_dir(args)
    playbook = getattr(args, "playbook", None)
    if playbook is not None and not playbook.exists():
        raise UsageError(f"{playbook}: no such playbook file")
    _check_slurm_input(playbook)
    from .ui.app import DdptuiApp  # textual is imported only for the TUI

    app = DdptuiApp(playbook=playbook, runs_dir=runs_dir, ssh_settings=settings,
                    start_step=getattr(args, "start_step", None), run_all=getattr(args, "run_all", False))
    app.run()
    for node, d in app.left_running.items():  # the TUI is gone: say where the job went
        print(f"{node}: left running, pgid {d['pgid']}; output in {d['log']} on {node}; "
              f"stop it with: kill -TERM -- -{d['pgid']}")
    return app.return_code or 0
