"""The node-side guard that every launch runs under (sent inline as `python3 -c SOURCE`).

It reads one JSON line from stdin: {"argv": [...], "env": {...}, "cwd": "...", "grace": 10,
"silence": 45}, so the job's env (secrets included) never appears on a command line. It then:

- becomes a child subreaper, so workers that torchrun starts in their own sessions
  (start_new_session=True) are re-parented to it if torchrun dies, and can still be found;
- starts the job in a new session and process group, with stderr merged into stdout;
- reports `pid`/`pgid` and, at the end, the exit code on its own stderr (control lines);
- relays the job's output to its stdout (ddptui's stream);
- stops the job when stdin says `stop` or closes (ddptui quit or the SSH connection dropped):
  SIGTERM to the group and every descendant, then SIGKILL after the grace period;
- stops the job the same way when no line at all came on stdin for `silence` seconds: ddptui
  sends a heartbeat line every few seconds, so silence means ddptui is gone or the link to it is
  cut (a cut link closes nothing: without this the job would run on until the link returns);
- on `detach` (the user chose to leave the job running) relays the output to `detach_log` on the
  node instead and no longer stops the job when stdin closes or falls silent. That file gets what
  the run's logs get: the values of the env variables named in "mask" (the run's secrets, which
  the guard already has in its env) are replaced, line by line, by ***REDACTED:NAME***.

Words on stdin it does not know (the heartbeat, a later ddptui's words) are ignored.

This file must stay self-contained, standard-library-only Python 3.6+: it runs on the nodes.
"""

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

CTL = "\x1eddptui-guard"


def ctl(msg):
    # After a dropped connection stderr is a broken pipe: that must never stop the cleanup.
    try:
        sys.stderr.write("%s %s\n" % (CTL, msg))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def write_all(fd, data):
    """All of `data` to `fd`: a write to a pipe that a signal interrupts midway returns what it had
    written (Python retries only a write that wrote nothing), and the rest would be lost."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def descendants(root):
    """Every live descendant pid of root, found through /proc."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] == "Z":
                continue
            children.setdefault(int(fields[1]), []).append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def signal_all(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def masker(env, names):
    """bytes -> bytes with the values of the named variables hidden (as ddptui's Redactor does in
    the run's logs: values of 4 characters or more), or None when there is none to hide."""
    hide = {}
    for name in names or ():
        value = (env.get(name) or "").strip()
        if len(value) >= 4:
            hide[value.encode()] = ("***REDACTED:%s***" % name).encode()
    if not hide:
        return None
    rx = re.compile(b"|".join(re.escape(v) for v in sorted(hide, key=len, reverse=True)))
    return lambda data: rx.sub(lambda m: hide[m.group(0)], data)


def main():
    spec = json.loads(sys.stdin.readline())
    try:  # PR_SET_CHILD_SUBREAPER = 36
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
    except Exception:
        pass
    env = dict(os.environ)
    env.update(spec.get("env") or {})
    try:
        child = subprocess.Popen(
            spec["argv"], cwd=spec.get("cwd") or None, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
    except OSError as e:
        print("ddptui: cannot start %s: %s" % (spec["argv"][0], e), flush=True)
        ctl("exit rc=127")
        return 127
    pgid = child.pid
    step = ""  # under Slurm: the job step we run in, which ddptui cancels if anything outlives us
    if os.environ.get("SLURM_JOB_ID") and os.environ.get("SLURM_STEP_ID"):
        step = " step=%s.%s" % (os.environ["SLURM_JOB_ID"], os.environ["SLURM_STEP_ID"])
    ctl("started pid=%d pgid=%d%s" % (child.pid, pgid, step))
    grace = float(spec.get("grace", 10))
    stopping = threading.Event()
    detached = threading.Event()
    out = sys.stdout.fileno()
    sink = {"fd": out}
    mask = masker(env, spec.get("mask"))

    def relay():
        src = child.stdout.fileno()
        held = b""  # in the detach log: the unfinished last line, masked once whole
        while True:
            chunk = data = os.read(src, 65536)
            if mask is not None and sink["fd"] != out:
                data, held = held + chunk, b""
                keep = len(data) - data.rfind(b"\n") - 1  # bytes after the last newline
                if chunk and keep <= 65536:  # a line longer than that is masked in pieces
                    data, held = data[:len(data) - keep], data[len(data) - keep:]
                data = mask(data)
            try:
                if data:
                    write_all(sink["fd"], data)
            except OSError:
                pass  # ddptui is gone; if the user detached, the log file takes over
            if not chunk:
                return

    relay_thread = threading.Thread(target=relay, daemon=True)
    relay_thread.start()

    def detach():
        path = os.path.expanduser(spec.get("detach_log") or "~/.cache/ddptui/detached.log")
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            sink["fd"] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as e:
            ctl("detach-failed %s" % e)
            return
        detached.set()
        ctl("detached log=%s" % path)

    def stop(reason):
        if stopping.is_set():
            return
        stopping.set()
        ctl("stopping reason=%s" % reason)  # said first: once the job is gone the guard exits at once
        signal_all(pgid, signal.SIGTERM)
        deadline = time.time() + grace
        while time.time() < deadline:
            if child.poll() is not None and not descendants(os.getpid()):
                return
            time.sleep(0.1)
        signal_all(pgid, signal.SIGKILL)

    heard = [time.monotonic()]  # when the last line came from ddptui

    def watch_stdin():
        for line in sys.stdin:
            heard[0] = time.monotonic()
            word = line.strip()
            if word == "stop":
                stop("requested")
                return
            if word == "detach":
                detach()
        if not detached.is_set():
            stop("stdin-closed")

    def watch_silence(limit):
        while not stopping.is_set() and not detached.is_set():
            if time.monotonic() - heard[0] > limit:
                stop("silence")
                return
            time.sleep(min(1.0, limit / 10.0))

    threading.Thread(target=watch_stdin, daemon=True).start()
    silence = spec.get("silence")
    if silence:
        threading.Thread(target=watch_silence, args=(float(silence),), daemon=True).start()

    def on_signal(signum, _frame):
        if signum == signal.SIGHUP and detached.is_set():
            return  # the session went away: that is what detaching means
        threading.Thread(target=stop, args=("signal",)).start()

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    rc = child.wait()
    relay_thread.join(5)  # the last lines before the exit line
    # Leave nothing behind: orphans re-parented to us (workers of a killed agent) go too.
    if descendants(os.getpid()):
        signal_all(pgid, signal.SIGTERM)
        deadline = time.time() + min(grace, 5.0)
        while descendants(os.getpid()) and time.time() < deadline:
            time.sleep(0.1)
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
        signal_all(pgid, signal.SIGKILL)
    rc = 128 - rc if rc < 0 else rc
    ctl("exit rc=%d" % rc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
