"""`ddptui sbatch --check`: the classic mistakes of a hand-written torchrun batch script, by line.

The script is read the way bash and sbatch read it (shell.py): logical lines, commands, their words,
a `bash -c '...'` string (or a variable the script set to one) as the command it runs. #SBATCH lines
count only before the first command, as sbatch reads them.

A script may silence a check with a comment line `# ddptui-check: ignore=ID[,ID]` (ddptui's own
script does, for a CPU-only job's missing GPU request).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import asdict, dataclass

from .shell import (
    OPAQUE,
    Command,
    Line,
    expand,
    program_words,
    read_commands,
    read_lines,
    read_options,
    scan_code,
    split_words,
)

_IGNORE = re.compile(r"^\s*#\s*ddptui-check:\s*ignore=([\w,-]+)")
_GPU_OPTS = ("--gres", "--gpus", "--gpus-per-node", "--gpus-per-task", "--gpus-per-socket", "-G")
_TORCHRUN = re.compile(r"(?:^|/)torchrun$|^torch\.distributed\.(?:run|launch)$")
CHECK_IDS = ("no-gpu-request", "hard-coded-nodelist", "nccl-ib-disabled", "literal-master-addr",
             "srun-per-node-loop", "srun-no-kill-on-bad-exit", "unlabeled-output", "task-var-in-batch-shell",
             "ntasks-per-node-with-torchrun", "export-all-with-values", "late-sbatch-directive",
             "torchrun-without-srun", "torchrun-nnodes", "literal-node-rank", "nproc-over-gpus")


@dataclass(frozen=True)
class Mistake:
    id: str
    line: int  # 1-based
    message: str
    fix: str
    col: int | None = None  # 1-based, when the mistake sits on one physical line
    cause: str | None = None  # the diagnosis catalog id this mistake leads to, when there is one

    def to_json(self) -> dict:
        return asdict(self)


def _runs_torchrun(words: list[str]) -> bool:
    return any(_TORCHRUN.search(w) for w in words)


def _col(ln: Line, needle: str) -> int | None:
    at = ln.raw.find(needle)
    return at + 1 if at >= 0 else None


def _is_ip(v: str) -> bool:
    host = v.rsplit(":", 1)[0] if v.count(":") == 1 else v
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


def check_script(text: str, path: str = "<script>") -> list[Mistake]:
    """Every mistake found, in line order."""
    lines = read_lines(text)
    ignored = {i for raw in text.splitlines() if (m := _IGNORE.match(raw)) for i in m.group(1).split(",")}
    found: list[Mistake] = []

    def add(id: str, ln: Line, message: str, fix: str, needle: str | None = None, cause: str | None = None):
        if id not in ignored:
            found.append(Mistake(id, ln.start, message, fix, _col(ln, needle) if needle else None, cause))

    directives: list[tuple[Line, str, str | None]] = []  # (line, option, value) of the #SBATCH lines
    seen_command = False
    for ln in lines:
        stripped = ln.raw.lstrip()
        if stripped.startswith("#SBATCH"):
            opts, _ = read_options(split_words(scan_code(stripped[len("#SBATCH"):])[0]))
            if seen_command:
                add("late-sbatch-directive", ln, "#SBATCH after the first command: sbatch ignores it",
                    "move every #SBATCH line above the script's first command")
            else:
                directives += [(ln, o, v) for o, v in opts]
        elif ln.code.strip() and not stripped.startswith("#!"):
            seen_command = True
    cmds = read_commands(lines)
    held = {n: v for c in cmds if not c.words for n, _, v in (a.partition("=") for a in c.assigns)}  # CMD="..."
    for c in cmds:  # `srun $SRUN_ARGS ...`: its options are read from what the script set
        c.words = c.words[:1] + expand(c.words[1:], held)
    sruns = [c for c in cmds if c.words[:1] == ["srun"]]
    parsed = {id(c): read_options(c.words[1:]) for c in sruns}  # an srun's (options, the command it runs), read once
    program = {id(c): program_words(parsed[id(c)][1], held) if id(c) in parsed else c.words for c in cmds}
    torch_cmds = [c for c in cmds if c.words[:1] not in (["echo"], ["printf"]) and _runs_torchrun(program[id(c)])]
    torch_sruns = [c for c in sruns if c in torch_cmds]

    for ln, opt, val in directives:
        if opt in ("--nodelist", "-w"):
            add("hard-coded-nodelist", ln, f"#SBATCH {opt}{'=' if opt.startswith('--') else ' '}{val} pins the job to these nodes: it waits while "
                "one of them is busy or drained, and fails if one is down",
                "drop it and ask for a count (#SBATCH --nodes=N); take the names inside the job from "
                "scontrol show hostnames \"$SLURM_JOB_NODELIST\"", needle=opt)
        if opt == "--ntasks-per-node" and torch_cmds and (val or "").isdigit() and int(val or 0) > 1:
            add("ntasks-per-node-with-torchrun", ln, f"--ntasks-per-node={val} with torchrun: an srun step "
                f"starts {val} torchruns per node, each starting its own workers on the same GPUs",
                "#SBATCH --ntasks-per-node=1: torchrun starts the per-GPU processes itself (--nproc-per-node)",
                needle=opt, cause="duplicate-gpu")
        if opt == "--export" and (val or "").upper().startswith("ALL,"):
            _export_all(add, ln, val or "")
    all_opts = [(o, v) for _, o, v in directives] + [o for c in sruns for o in parsed[id(c)][0]]
    if torch_cmds and not any(o in _GPU_OPTS and (o != "--gres" or "gpu" in (v or "")) for o, v in all_opts):
        at = next((ln for ln, o, _ in directives if o in ("-N", "--nodes")), torch_cmds[0].line)
        add("no-gpu-request", at, "the script runs torchrun but asks Slurm for no GPUs (no --gpus-per-node, "
            "--gres=gpu:N or --gpus): where Slurm constrains devices the job sees none",
            "add #SBATCH --gpus-per-node=N (N = torchrun's --nproc-per-node)")
    _env_mistakes(add, cmds)
    for ln in lines:
        for name, _ in ln.batch_vars:
            if re.search(r"--rdzv[-_]backend[= ]+[\"']?(?:c10d|etcd)", ln.code) and re.search(
                    r"--(?:node[-_]rank|machine[-_]rank)[= ]+[\"']?\$\{?" + name, ln.code):
                continue  # c10d (or etcd) rendezvous assigns the ranks: torchrun ignores --node_rank
            add("task-var-in-batch-shell", ln, f"${name} is expanded by the batch shell, which runs once, on "
                "the first node: there it is always 0, so every node gets the same rank",
                f"write it inside the srun step's single-quoted command (srun ... bash -c '... ${name} ...') "
                f"or escape it (\\${name}) inside double quotes", needle=name, cause="duplicate-rank")
    for c in torch_cmds:
        for w in program[id(c)]:
            name, eq, val = w.partition("=")
            if name in ("--master_addr", "--master-addr", "--rdzv_endpoint", "--rdzv-endpoint") and eq and _is_ip(val):
                add("literal-master-addr", c.line, f"{name}={val} is a fixed address, but Slurm may give the job "
                    "other nodes, in another order: the workers then wait for a master that is not there",
                    "take the first node of the allocation: master=$(scontrol show hostnames "
                    "\"$SLURM_JOB_NODELIST\" | head -n 1), then --master-addr=\"$master\"", needle=name,
                    cause="bad-master-addr")
    loop = [c for c in torch_sruns if c.in_loop and c.background
            and any(o in ("-w", "--nodelist") for o, _ in parsed[id(c)][0])]
    if loop:
        where = ", ".join(str(c.line.start) for c in loop)
        add("srun-per-node-loop", loop[0].line, f"a loop of backgrounded `srun -w $NODE ... &` (line {where}): "
            "one step per node, so launch order matters, one failing node leaves the others hanging, and since "
            "Slurm 20.11 another step on a busy node waits (`step creation temporarily disabled`) unless --overlap",
            "one step for all nodes: #SBATCH --ntasks-per-node=1, then srun --kill-on-bad-exit=1 --label "
            "torchrun ... with the rank from $SLURM_NODEID expanded on each node; `ddptui sbatch PLAYBOOK` "
            "writes such a script", needle="srun", cause="master-not-started")
    job_nodes = _nodes([(o, v) for _, o, v in directives])
    if job_nodes is None and any(o in ("-n", "--ntasks") and v == "1" for _, o, v in directives):
        job_nodes = 1  # one task: one node
    _launch_mistakes(add, torch_cmds, program, parsed, job_nodes, [a for c in cmds for a in c.assigns], _gpus_per_node(all_opts))
    for c in torch_sruns:
        opts = dict(parsed[id(c)][0])
        words = program[id(c)]
        if job_nodes == 1 or "--standalone" in words or _flag(words, "--nnodes") == "1":
            continue  # one node: no other node to stop, no node's lines to tell apart
        # torchrun's own --tee with a --role naming the host prefixes each line with its node (stas00's launcher)
        labelled = _flag(words, "--tee") is not None and "hostname" in " ".join(words[words.index("--role"):][:4]) \
            if "--role" in words else False
        kill = opts.get("--kill-on-bad-exit", "") if "--kill-on-bad-exit" in opts else opts.get("-K", "0")
        if kill not in (None, "", "1"):
            add("srun-no-kill-on-bad-exit", c.line, "srun without --kill-on-bad-exit=1: when one node's torchrun "
                "fails, the others keep running (hanging in a collective or the rendezvous until a timeout)",
                "srun --kill-on-bad-exit=1 (or -K1) --wait=60 ...", needle="srun")
        out = opts.get("-o") or opts.get("--output") or ""
        if "-l" not in opts and "--label" not in opts and not re.search(r"%[Nnt]", out) and not labelled:
            add("unlabeled-output", c.line, "srun without --label: every node's lines interleave in one file "
                "and nothing says which node printed which", "srun --label ... (each line starts with its "
                "task id), or --output=name-%N.out for one file per node", needle="srun")
        for o, v in opts.items():
            if o == "--export" and (v or "").upper().startswith("ALL,"):
                _export_all(add, c.line, v or "")
    return sorted(found, key=lambda m: (m.line, CHECK_IDS.index(m.id)))


def _export_all(add, ln: Line, val: str) -> None:
    names = ", ".join(kv.split("=", 1)[0] for kv in val.split(",")[1:] if "=" in kv) or "the variables"
    add("export-all-with-values", ln, f"--export={val}: with ALL, the caller's environment wins over the values "
        f"given here (srun(1)), so a stale {names} in your shell overrides the fix", "export the values in the "
        "batch script before srun (export K=V) and pass --export=ALL, or use --export=NONE,K=V", needle="--export")


def _env_mistakes(add, cmds: list[Command]) -> None:
    # on AWS EFA, NCCL's network is the aws-ofi-nccl plugin over libfabric, not IB verbs: IB off is no fallback
    efa = any(a.partition("=")[2].strip("'\"") == "efa" for c in cmds for a in c.assigns if a.startswith("FI_PROVIDER="))
    for c in cmds:
        for a in c.assigns:
            name, _, val = a.partition("=")
            if name == "NCCL_IB_DISABLE" and val.strip() == "1" and not efa:
                add("nccl-ib-disabled", c.line, "NCCL_IB_DISABLE=1: InfiniBand is off, NCCL falls back to TCP "
                    "sockets (many times slower). It is usually a workaround left in from debugging a hang "
                    "where some nodes used IB and others sockets (cause ib-socket-mismatch)",
                    "remove it; if the job then hangs, `ddptui diagnose` the logs to find the node whose IB "
                    "fails (NCCL_DEBUG=INFO shows NET/IB or NET/Socket per node)", needle="NCCL_IB_DISABLE",
                    cause="ib-socket-mismatch")
            if name == "MASTER_ADDR" and _is_ip(val):
                add("literal-master-addr", c.line, f"MASTER_ADDR={val} is a fixed address, but Slurm may give "
                    "the job other nodes: the workers then wait for a master that is not there",
                    "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)",
                    needle="MASTER_ADDR", cause="bad-master-addr")


def _option(words: list[str], name: str) -> tuple[str, str, str] | None:
    """torchrun's option `name` (--nnodes=2, --nnodes 2; _ and - alike): its name and its value, and
    the two as written, the last one given as argparse takes it; None when it is not given."""
    found = None
    for i, w in enumerate(words):
        key, eq, val = w.partition("=")
        if key.replace("_", "-") == name.replace("_", "-"):
            val = val if eq else (words[i + 1] if i + 1 < len(words) else "")
            found = key, val, w if eq else f"{w} {val}"
    return found


def _flag(words: list[str], name: str) -> str | None:
    """The value of torchrun's option `name` (see `_option`)."""
    found = _option(words, name)
    return None if found is None else found[1]


def _gpus_per_node(opts: list[tuple[str, str | None]]) -> int | None:
    """GPUs asked for per node: --gpus-per-node=[type:]N or --gres=gpu[:type]:N (the last one given)."""
    n = None
    for o, v in opts:
        m = re.search(r"(?:^|,)gpu(?::\w+)?:(\d+)(?:,|$)", v or "") if o == "--gres" else (
            re.match(r"(?:\w+:)?(\d+)$", v or "") if o == "--gpus-per-node" else None)
        n = int(m.group(1)) if m else n
    return n


def _nodes(opts: list[tuple[str, str | None]]) -> int | None:
    """The node count the last -N/--nodes gives (its minimum, for a range N-M); None when none does."""
    counts = [int(m.group(1)) for o, v in opts if o in ("-N", "--nodes") and (m := re.match(r"(\d+)(?:-\d+)?$", v or ""))]
    return counts[-1] if counts else None


def _launch_mistakes(add, torch_cmds: list[Command], program: dict, parsed: dict, job_nodes: int | None,
                     assigns: list[str], gpus: int | None) -> None:
    """torchrun across the job's nodes: started on every node (by srun), told how many there are, with
    no more workers per node than the GPUs asked for."""
    for c in torch_cmds:
        words = program[id(c)]
        nproc = _flag(words, "--nproc_per_node") or ""
        if gpus and nproc.isdigit() and int(nproc) > gpus:
            add("nproc-over-gpus", c.line, f"torchrun --nproc_per_node={nproc} on nodes that get {gpus} GPU(s) "
                f"each: workers {gpus} to {int(nproc) - 1} find no GPU of their own", f"--nproc_per_node={gpus}, "
                f"or ask for {nproc} GPUs per node (#SBATCH --gpus-per-node={nproc})", needle="nproc",
                cause="gpu-count-short")
        step = (_nodes(parsed[id(c)][0]) if id(c) in parsed else None) or job_nodes
        direct = bool(words) and (bool(_TORCHRUN.search(words[0])) or (
            words[0].rsplit("/", 1)[-1].startswith("python") and words[1:3] in (["-m", "torch.distributed.run"],
                                                                                ["-m", "torch.distributed.launch"])))
        if c.words[:1] != ["srun"] and direct and (job_nodes or 0) > 1:
            add("torchrun-without-srun", c.line, f"torchrun runs in the batch shell, which is on the first node "
                f"only: the job's {job_nodes - 1} other node(s) start nothing, and the rendezvous waits for them "
                "until it times out", "start it on every node in one step: srun --ntasks-per-node=1 "
                "--kill-on-bad-exit=1 --label torchrun --nnodes=$SLURM_NNODES ...", needle=words[0], cause="missing-rank")
            continue
        if not step or step < 2:
            continue
        static = (_flag(words, "--rdzv_backend") or "static") == "static"  # c10d, etcd: they assign the ranks
        for o in (_option(words, n) for n in ("--node_rank", "--machine_rank")):  # torchrun's; accelerate's
            if static and o is not None and o[1].isdigit():
                add("literal-node-rank", c.line, f"{o[2]} on a {step}-node step: every node of it gets node "
                    f"rank {o[1]}, and the job waits for the ranks no node has", "one step for all nodes, the rank "
                    "from each node's own $SLURM_NODEID (escaped, or in single quotes: srun ... bash -c 'torchrun "
                    "--node-rank=$SLURM_NODEID ...'), or c10d rendezvous, which needs no rank", needle=o[0],
                    cause="duplicate-rank")
        # an argument list held in a variable ("${ARGS[@]}"; not an option's value) may hold --nnodes
        if any(OPAQUE.match(w) and not (i and words[i - 1].startswith("-") and "=" not in words[i - 1])
               for i, w in enumerate(words)) or any(a.startswith("PET_NNODES=") for a in assigns):
            continue
        given = _flag(words, "--nnodes")
        least = (given or "").partition(":")[0]  # MIN:MAX: its minimum
        if given is None:
            add("torchrun-nnodes", c.line, f"torchrun without --nnodes on a {step}-node step: it defaults to 1, so "
                "each node's torchrun starts a job of its own and the ranks never meet",
                "torchrun --nnodes=$SLURM_NNODES ... (the job's node count)", needle="torchrun", cause="ranks-not-joined")
        elif least.isdigit() and int(least) != step:
            add("torchrun-nnodes", c.line, f"torchrun --nnodes={least} on a {step}-node step: the rendezvous "
                f"waits for {least} node(s) while {step} start", "--nnodes=$SLURM_NNODES (the job's node count)",
                needle="--nnodes", cause="ranks-not-joined")
