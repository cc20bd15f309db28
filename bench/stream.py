"""Headless streaming: `ddptui run --headless` of a playbook of N nodes, each running torchrun
with a workload that replays recorded NCCL lines fast (bench/nccl_flood.py); from the workload's
first line to the last line on disk in the run's node logs (torchrun's own start-up is left out,
and shown apart as launch -> exit), and from there to the run's verdict (when the live diagnosis
has read every line: it may fall behind a flood, never the disk or the screen).

Nodes are `transport: local` processes here, or with `--ssh` (root; the namespace cluster of the
tests, brought up and down by the bench) real nodes over ssh. Baselines, run beside it: N
parallel `cat FILE > out` of the same lines (with `--ssh`: `ssh NODE cat FILE > out`, OpenSSH),
and N parallel copies of the workload itself writing to a file (what producing the lines costs);
with `--ssh` also N paramiko clients in one process reading the same `cat` (ddptui's transport
alone: the floor of any paramiko client, whatever it then does with the bytes). Also the CPU
seconds of the ddptui process (sampled from /proc) against those of the `ssh` client processes:
on a shared 2-core machine the steadiest figure, and the one that says what a login node pays.

With `--training 0.95` the workload puts 19 lines of a training loop's output after each NCCL line
(bench/diagnosis.py's "typical" mix): a running job's stream, against the default's worst case.

`--log FILE` replays another recorded log than corpus 90 (a paste of the interesting lines of a
64-rank init, 88% of them holding a rule's literal).

`--rate LPS` paces each node's workload at LPS lines a second (written a hundredth of a second's
worth at a time, as a job's output comes) instead of a flood as fast as the machine goes: then what
is timed is how far behind its nodes ddptui is (a node's last line written -> on disk, the
diagnosis' lag), for 1 node and for 4, against the same job by hand (`ssh NODE WORKLOAD > out`,
paced alike); the `cat` baselines, which cannot be paced, are left out. A flood that saturates the
client says how fast one process can take 4 nodes' bytes; a paced stream says whether 4 nodes are
followed in parallel, as one is (issue 15's "4 nodes vs 1 node").

    .venv/bin/python -m bench.stream [--quick] [--ssh] [--json] [--training SHARE] [--log FILE] [--lines N]
                                     [--nodes 1,4] [--reps R] [--rate LPS]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "bench" / "nccl_flood.py"
DEFAULT_LOG = ROOT / "tests" / "data" / "corpus" / "nccl" / "90-healthy-socket-aws-64ranks.log"  # what the workload replays by default


def playbook(d: Path, nodes: int, lines: int, port: int, names: list[str] | None = None,
             training: float = 0.0, log: Path = DEFAULT_LOG, rate: float = 0.0) -> Path:
    pb = d / f"stream{nodes}.yaml"
    listed = ", ".join(names[:nodes] if names else [f"n{i}" for i in range(nodes)])
    pb.write_text(f"""\
name: stream{nodes}
{"" if names else "transport: local"}
nodes: [{listed}]
job:
  script: {WORKLOAD}
  args: ["{lines}", "{training}", "{log}", "{rate}"]
  nproc_per_node: 1
  master_port: {port}
  tee: false
  rdzv_timeout: 120
  python: {sys.executable}
steps: [launch-master, wait-master, launch-workers, watch]
""")
    return pb


def start_of(log: Path) -> float:
    with open(log) as f:
        for line in f:
            if "nccl_flood start " in line:
                return float(line.split("nccl_flood start ")[1].split()[0])
    raise RuntimeError(f"{log}: no start line")


def end_of(log: Path) -> float:
    """When the workload's last line (`nccl_flood done`) reached a node's log: the time of its batch
    in the run's index beside the log (NODE.times: `FIRST COUNT TIME` per batch). Not the log's
    last write: torchrun's agent says its goodbyes after the workload, and on one node in three
    or so they came seconds later (it waits for the other agents), which the stream is not."""
    data = log.read_bytes()
    at = data.find(b"\nnccl_flood done ")
    if at < 0:
        raise RuntimeError(f"{log}: no done line")
    line = data.count(b"\n", 0, at) + 2  # 1-based, the line after that newline
    for row in log.with_suffix(".times").read_text().splitlines():
        first, count, t = row.split()
        if int(first) <= line < int(first) + int(count):
            return float(t)
    raise RuntimeError(f"{log}: line {line} is in no batch of its index")


def tail_of(p: Path, n: int = 8192) -> bytes:
    """The last `n` bytes of a file."""
    with open(p, "rb") as f:
        f.seek(max(0, p.stat().st_size - n))
        return f.read()


def written_at(out: Path) -> float:
    """When the workload wrote its last line (before its `done` line), by its own clock. The done line
    is near the end (only torchrun's goodbyes follow it): read from there, not the whole 80 MB."""
    data = tail_of(out, 1 << 16)
    at = data.rfind(b"nccl_flood done lines ")
    if at < 0:
        data = out.read_bytes()
        at = data.rfind(b"nccl_flood done lines ")
    if at < 0:
        raise RuntimeError(f"{out}: no done line")
    return float(data[at:].split(b" at ")[1].split()[0])


def verdict_time(run: Path) -> float:
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    return max(e["t"] for e in events if e.get("event") == "step" and e.get("step") == "watch")


def cpu_seconds(pid: int) -> float | None:
    """user + system CPU of a live process (Linux /proc), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int, module: bytes) -> list[int]:
    """The processes `pid` started whose command line names `module`."""
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):  # a child is listed under the thread that started it
        try:
            kids += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    out = []
    for c in kids:
        try:
            with open(f"/proc/{c}/cmdline", "rb") as f:
                if module in f.read():
                    out.append(c)
        except OSError:
            continue
    return out


def diagnosis_pids(pid: int) -> list[int]:
    """The diagnosis processes that ddptui process `pid` runs now: core/diagnosis/child.py, and
    the sieves it started (sieve.py)."""
    top = children(pid, b"ddptui.core.diagnosis.child")
    return top + [s for c in top for s in children(c, b"ddptui.core.diagnosis.sieve")]


class Streamed(NamedTuple):
    """One `ddptui run --headless`, in seconds."""

    disk: float  # the workloads' first line -> the last line on disk
    verdict: float  # the last line on disk -> the verdict (the diagnosis done and torchrun gone)
    wall: float  # launch -> exit
    cpu: float  # the ddptui process, launch -> exit
    cpu_stream: float  # the ddptui process from the first line to the last on disk
    diag_cpu: float  # its diagnosis process
    diag_stream: float  # its diagnosis process from the first line to the last on disk
    behind: float  # the last line on disk -> the diagnosis' last busy 0.1 s (0: it kept up)
    lag: float  # a node's last line written by its workload -> on disk, the slowest node's


def median_of(runs: list[Streamed], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


def cpu_at(samples: list[tuple[float, float]], t: float) -> float:
    """The CPU seconds a process had used at time `t`, between its (time, CPU) samples."""
    for (t1, c1), (t2, c2) in zip(samples, samples[1:]):
        if t1 <= t <= t2:
            return c1 + (c2 - c1) * (t - t1) / max(t2 - t1, 1e-9)
    return samples[-1][1] if t > samples[-1][0] else 0.0


def ddptui_stream(d: Path, nodes: int, lines: int, port: int, names: list[str] | None = None,
                  ssh_config: Path | None = None, attempts: int = 2,
                  as_json: bool = False, training: float = 0.0, log: Path = DEFAULT_LOG,
                  rate: float = 0.0) -> Streamed:
    """The run's times and CPU seconds; the CPU sampled every 0.1 s until the processes end (what
    either does in its last 0.1 s is not counted). A failed run is tried
    once more (torch 2.13's torchrun can abort at exit after a good run, as tests/test_local_run.py
    allows)."""
    for attempt in range(attempts):
        runs = d / f"runs{port}-{attempt}"
        printed = d / f"printed{port}.txt"  # what --headless prints (every line): to a file, not into memory
        extra = (["--ssh-config", str(ssh_config)] if ssh_config else []) + (["--json"] if as_json else [])
        settle()
        t0 = time.time()
        with open(printed, "w") as out:
            p = subprocess.Popen([sys.executable, "-m", "ddptui", "run", str(playbook(d, nodes, lines, port, names, training, log, rate)),
                                  "--headless", "--runs-dir", str(runs), *extra], stdout=out, stderr=subprocess.STDOUT)
            cpu, diag, busy, samples, diag_samples = 0.0, {}, 0.0, [(t0, 0.0)], [(t0, 0.0)]
            while p.poll() is None:
                cpu = cpu_seconds(p.pid) or cpu
                now = time.time()
                samples.append((now, cpu))
                for c in diagnosis_pids(p.pid):
                    was, diag[c] = diag.get(c, 0.0), cpu_seconds(c) or diag.get(c, 0.0)
                    if diag[c] > was + 0.02:  # working (more than its idle wake-ups) in the last 0.1 s
                        busy = now
                diag_samples.append((now, sum(diag.values())))
                time.sleep(0.1)
        wall = time.time() - t0
        logs = [p for p in runs.glob("*/*.log") if p.stem.startswith("n")]
        if p.returncode == 0 and len(logs) == nodes:
            printed.unlink()
            ends = {p: end_of(p) for p in logs}  # each reads its log whole: once
            first, last = min(start_of(p) for p in logs), max(ends.values())
            verdict = verdict_time(logs[0].parent) - last
            lag = max(0.0, *(ends[p] - written_at(p) for p in logs))
            shutil.rmtree(runs)  # read: gone, as each baseline's output is overwritten by the next
            return Streamed(last - first, verdict, wall, cpu, cpu_at(samples, last) - cpu_at(samples, first),
                            sum(diag.values()), cpu_at(diag_samples, last) - cpu_at(diag_samples, first),
                            max(0.0, busy - last), lag)
    tail = "\n".join(x for x in printed.read_text().splitlines() if " NCCL " not in x)[-3000:]
    raise RuntimeError(f"ddptui run failed (rc {p.returncode}): {tail}")


def settle() -> None:
    """Before each timed command: what earlier ones wrote goes to disk first, so that its writeback
    (about 2 GB a repetition of 4 x 1M lines: ddptui's logs and printout, each baseline's output)
    does not run during the next. Three 4-node runs in a row on one cluster, 2026-12-04: 1.8 / 2.5 /
    2.7 s without it, 1.7 / 1.6 / 2.3 s with it; the spread it leaves is the VM's (bench/README.md)."""
    os.sync()


def free_port() -> int:
    """A port free now, below the ephemeral range (an ephemeral one can be taken by any outgoing
    connection before torchrun binds it); others may run torchrun here too: never a fixed one."""
    while True:
        port = random.randrange(20000, 30000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


def by_hand(cmds: list[list[str]], outs: list[Path]) -> tuple[float, float, float]:
    """The workload's commands run at once, each writing to its file: from the first line any of
    them wrote (its start stamp) to the last line on disk, measured as `ddptui_stream` measures
    ddptui (start-up left out), the CPU seconds of the processes this one started, and the slowest
    output's last line written -> on disk (its file's last write)."""
    _, cpu = parallel(cmds, outs)
    lag = max(0.0, *(o.stat().st_mtime - written_at(o) for o in outs))  # a file's time is a clock tick's (4 ms)
    return max(o.stat().st_mtime for o in outs) - min(start_of(o) for o in outs), cpu, lag


def parallel(cmds: list[list[str]], outs: list[Path]) -> tuple[float, float]:
    """Wall seconds for the commands run at once, and the CPU seconds they used (user + system)."""
    settle()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=open(o, "w")) for c, o in zip(cmds, outs)]
    for p in procs:
        p.wait()
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return dt, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def paramiko_cat(cl, nodes: list[str], src: Path, outs: list[Path]) -> tuple[float, float]:
    """N paramiko clients in threads of one process, each reading `cat FILE` into a file: the floor
    of any paramiko client (ddptui's transport), whatever it does with the bytes. Wall seconds, and
    the CPU seconds of this process meanwhile (it does nothing else). Connected
    beforehand, as ddptui is before its first line; strict host keys and the cipher ddptui
    negotiates, as ddptui's."""
    import paramiko

    from ddptui.core.transport.ssh_config import CIPHERS

    others = [x for x in paramiko.Transport._preferred_ciphers if x != CIPHERS[0]]

    clients = []
    for n in nodes:
        c = paramiko.SSHClient()
        c.load_host_keys(str(cl.known_hosts))
        c.connect(cl.nodes[n].ip, username="root", key_filename=str(cl.client_key), look_for_keys=False,
                  allow_agent=False, disabled_algorithms={"ciphers": others})
        clients.append(c)

    def read(c: paramiko.SSHClient, out: Path) -> None:
        ch = c.get_transport().open_session()
        ch.exec_command(f"cat {src}")
        with open(out, "wb") as f:
            while data := ch.recv(1 << 23):
                f.write(data)

    settle()
    t0, cpu0 = time.perf_counter(), time.process_time()
    threads = [threading.Thread(target=read, args=(c, o)) for c, o in zip(clients, outs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    for c in clients:
        c.close()
    return dt, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.stream")
    ap.add_argument("--quick", action="store_true", help="20k lines, 1 and 2 nodes, one repetition")
    ap.add_argument("--ssh", action="store_true", help="real nodes over ssh: the namespace cluster (root)")
    ap.add_argument("--lines", type=int, default=None)
    ap.add_argument("--nodes", default=None, help="comma-separated node counts (default 1,4)")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--json", action="store_true", help="ddptui run --headless --json (an event per line)")
    ap.add_argument("--training", type=float, default=0.0,
                    help="the share of the lines that are a training loop's output (0.95: a job that logs each "
                         "step); default 0, all NCCL init chatter: the diagnosis' worst case")
    ap.add_argument("--log", type=Path, default=DEFAULT_LOG,
                    help="the recorded NCCL log the workload replays (default: corpus 90, a paste of a 64-rank "
                         "job's init lines)")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="lines a second a node: each node's workload paced at that rate, not a flood (default 0: "
                         "as fast as it goes)")
    args = ap.parse_args(argv)
    if args.rate < 0:
        ap.error(f"--rate: lines a second, more than 0, not {args.rate:g}")
    lines = args.lines or (20_000 if args.quick else 1_000_000)
    counts = [int(x) for x in (args.nodes or ("1,2" if args.quick else "1,4")).split(",")]
    reps = args.reps or (1 if args.quick else 3)
    names = [f"node{i:02d}" for i in range(2, 2 + max(counts))] if args.ssh else None
    if args.ssh:
        from bench.common import namespace_cluster
    with tempfile.TemporaryDirectory() as tmp, (namespace_cluster(names) if args.ssh else nullcontext()) as cl:
        if args.ssh and cl is None:
            return 0
        d = Path(tmp)
        os.chmod(d, 0o755)  # the nodes' users read the lines file (root here, but say so)
        cfg = cl.ssh_config if cl else None
        if cl:  # a HOME with no ~/.ssh: only the cluster's ssh_config counts
            (d / "home" / ".ssh").mkdir(parents=True)
            os.environ["HOME"] = str(d / "home")
        if args.rate:
            paced(d, cl, names, counts, reps, lines, args)
            return 0
        src = d / "lines.txt"
        work = [str(lines), str(args.training), str(args.log.resolve())]
        subprocess.run([sys.executable, str(WORKLOAD), *work], stdout=open(src, "w"), check=True)
        how = "ssh NODE cat FILE" if cl else "cat FILE"
        for n in counts:
            runs_: list[Streamed] = []
            cats, prods, floors, cat_cpus, floor_cpus, hands, hand_cpus = [], [], [], [], [], [], []
            for _ in range(reps):  # interleaved: ddptui, then the baselines, each repetition
                runs_.append(ddptui_stream(d, n, lines, free_port(), names, cfg, as_json=args.json,
                                           training=args.training, log=args.log.resolve()))
                outs = [d / f"out{i}" for i in range(n)]
                cat = [["ssh", "-F", str(cfg), node, "cat", str(src)] for node in names[:n]] if cl else [["cat", str(src)]] * n
                wall_cat, cpu_cat = parallel(cat, outs)
                cats.append(wall_cat)
                cat_cpus.append(cpu_cat)
                if cl:
                    f_wall, f_cpu = paramiko_cat(cl, names[:n], src, outs)
                    floors.append(f_wall)
                    floor_cpus.append(f_cpu)
                job = [sys.executable, str(WORKLOAD), *work]
                prods.append(by_hand([job] * n, outs)[0])
                if cl:  # the same job by hand: each node's workload over OpenSSH, its lines made live
                    hand_wall, hand_cpu, _ = by_hand([["ssh", "-F", str(cfg), node, *job] for node in names[:n]], outs)
                    hands.append(hand_wall)
                    hand_cpus.append(hand_cpu)
            med = functools.partial(median_of, runs_)
            t, c, p = med("disk"), statistics.median(cats), statistics.median(prods)
            where = "over ssh (namespace cluster)" if cl else "local"
            what = f"lines ({args.training:.0%} training output)" if args.training else "NCCL lines"
            if args.log.resolve() != DEFAULT_LOG:
                what += f" of {args.log.name}"
            print(f"{n} node(s) x {lines:,} {what}, {where}, median of {reps}:")
            print(f"  ddptui --headless{' --json' if args.json else ''}   first line -> last on disk {t:6.2f} s  {n * lines / t / 1e6:5.2f} M lines/s"
                  f"  (launch -> exit {med('wall'):.2f} s)")
            print(f"  {n} x {how} > out{' ' * (38 - len(how))}{c:6.2f} s   ratio {t / c:.1f}x")
            if floors:
                f = statistics.median(floors)
                print(f"  {n} x paramiko reading the same cat > out          {f:6.2f} s   ratio {t / f:.1f}x"
                      f"  (paramiko / ssh: {f / c:.1f}x, the floor of a paramiko client)")
            if hands:
                h = statistics.median(hands)
                print(f"  {n} x ssh NODE WORKLOAD > out (the job by hand)     {h:6.2f} s   ratio {t / h:.1f}x"
                      f"  (its lines made live on the nodes, as ddptui's are; CPU of ssh and the workloads "
                      f"{statistics.median(hand_cpus):.2f} s)")
            print(f"  {n} x the workload > out (the producer alone)     {p:6.2f} s   ratio {t / p:.1f}x")
            print(f"  a node's last line written -> on disk {med('lag') * 1e3:6.0f} ms (the slowest node: how far behind ddptui fell)")
            print(f"  last line on disk -> verdict (diagnosis done, torchrun gone) {med('verdict'):5.2f} s"
                  f"   -> the diagnosis' last busy 0.1 s {med('behind'):5.2f} s (its lag behind the disk)")
            cc = statistics.median(cat_cpus)
            what = "the ssh clients" if cl else "the cats"
            print(f"  CPU: the ddptui process, launch -> exit {med('cpu'):5.2f} s, first line -> last on disk "
                  f"{med('cpu_stream'):5.2f} s   {what} {cc:5.2f} s   ratio {med('cpu_stream') / max(cc, 1e-3):.1f}x"
                  f"   (the diagnosis processes: {med('diag_cpu'):.2f} s, {med('diag_stream'):.2f} s of it first line -> "
                  f"last on disk)")
            if floor_cpus:
                fc = statistics.median(floor_cpus)
                print(f"  CPU: paramiko alone reading the same cat {fc:5.2f} s   ddptui's, first line -> last on disk, "
                      f"/ paramiko's {med('cpu_stream') / max(fc, 1e-3):.1f}x (what ddptui adds to its SSH library)")
    return 0


def paced(d: Path, cl, names: list[str] | None, counts: list[int], reps: int, lines: int, args) -> None:
    """`--rate`: each node's workload paced; how far behind its nodes ddptui is, for each node count,
    against the same job by hand (over OpenSSH with `--ssh`, else the workloads writing to files)."""
    cfg = cl.ssh_config if cl else None
    log = args.log.resolve()
    job = [sys.executable, str(WORKLOAD), str(lines), str(args.training), str(log), str(args.rate)]
    seen: dict[int, tuple[float, float]] = {}
    for n in counts:
        runs_: list[Streamed] = []
        hands, hand_lags = [], []
        for _ in range(reps):  # interleaved: ddptui, then the job by hand
            runs_.append(ddptui_stream(d, n, lines, free_port(), names, cfg, as_json=args.json,
                                       training=args.training, log=log, rate=args.rate))
            cmds = [["ssh", "-F", str(cfg), node, *job] for node in names[:n]] if cl else [job] * n
            wall, _, lag = by_hand(cmds, [d / f"out{i}" for i in range(n)])
            hands.append(wall)
            hand_lags.append(lag)
        med = functools.partial(median_of, runs_)
        own = lines / args.rate
        how = "ssh NODE WORKLOAD > out (the job by hand)" if cl else "WORKLOAD > out (the job by hand)"
        what = f"lines ({args.training:.0%} training output)" if args.training else "NCCL lines"
        print(f"{n} node(s) x {lines:,} {what} at {args.rate:,.0f} lines/s a node ({own:.2f} s of output), "
              f"{'over ssh (namespace cluster)' if cl else 'local'}, median of {reps}:")
        print(f"  ddptui --headless{' --json' if args.json else ''}   first line -> last on disk {med('disk'):6.2f} s"
              f"   a node's last line written -> on disk {med('lag') * 1e3:5.0f} ms (the slowest node's)")
        print(f"  {n} x {how}{' ' * max(1, 44 - len(how))}{statistics.median(hands):6.2f} s"
              f"   its last line written -> on disk {statistics.median(hand_lags) * 1e3:5.0f} ms")
        print(f"  the diagnosis' last busy 0.1 s after the last line on disk {med('behind'):5.2f} s (its lag)"
              f"   CPU: the ddptui process {med('cpu_stream'):.2f} s, its diagnosis processes {med('diag_cpu'):.2f} s")
        seen[n] = (med("disk"), med("lag"))
    if len(seen) > 1:
        lo, hi = min(seen), max(seen)
        print(f"{hi} nodes vs {lo}: first line -> last on disk {seen[hi][0] / seen[lo][0]:.2f}x; "
              f"a node's last line -> on disk {seen[hi][1] * 1e3:.0f} ms vs {seen[lo][1] * 1e3:.0f} ms")


if __name__ == "__main__":
    sys.exit(main())
