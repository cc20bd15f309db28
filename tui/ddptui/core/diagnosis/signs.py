"""Failure signs: lines that say a node failed without saying why (an exception, an exit code or a
signal, an NCCL WARN). The engine keeps them (failures.py) so that a failed node no rule explains
is still reported, as `unrecognized-failure`, with these lines as its evidence."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .rules import NCCL_RAS, RCCL_ADVICE


@dataclass(frozen=True)
class Sign:
    """A line that says the node failed, not why. kind: traceback | exception | warn | exit."""

    kind: str
    pattern: str
    benign: tuple[str, ...] = ()  # matches of these are no failure (NCCL's notice that IB is not installed)
    ok_values: tuple[str, ...] = ()  # a first group with one of these values is no failure (exitcode: 0)
    compiled: tuple[re.Pattern, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", tuple(re.compile(p) for p in self.benign))


# aws-ofi-nccl before 1.16 (src/nccl_ofi_rdma.c, recv_close / send_close) refuses to close a
# communicator that still has requests in flight, which NCCL's abort does at a job's exit: the WARN,
# then NCCL's return-code chain, then `Abort COMPLETE` (rank 16 of a passing 32-rank EFA run,
# https://github.com/aws/aws-k8s-tester/pull/524). NCCL's proxy ignores the error; the plugin's
# maintainers call it a leak on close (aws/aws-ofi-nccl#868), and 1.16 closes such a communicator
# without the WARN (aws/aws-ofi-nccl#881). No failure: a failed job says why elsewhere.
OFI_CLOSE = r"WARN NET/OFI Attempt to call (?:recv|send)_close(?:_deferred)? with outstanding requests!"

# NCCL's proxy service thread when a process ends with its communicators still open: the other
# ranks' connections are gone, so it fails to accept, to read the next request's type, and to run
# their Close (a healthy GKE A3 all_reduce sweep's teardown, elideng-sg/hypercomputer-internode-
# deepdive lab-06; the same three lines after a timeout in NVIDIA/nccl#1610, which says why elsewhere).
# A failed Connect is no teardown: it stays a sign.
PROXY_TEARDOWN = (r"WARN \[Service thread\] (?:Accept failed Resource temporarily unavailable|Could not receive type "
                  r"from localRank \d+, res=3, closed=0)|WARN \[Proxy Service \d+\] Failed to execute operation Close ")
# Google's NCCL shim (GPUDirect-TCPXO) compares the environment with the settings it recommends and
# says where they differ: advice, the job runs on (a passing 16-GPU all_reduce sweep, ibid. lab-23)
SHIM_ADVICE = r"WARN NCCL/NET \(shim\) mismatch recommended: "

# A Python exception line: the class right after a launcher prefix ([rank3]:, 0: , [1,0]<stdout>:,
# (Worker pid=1, ip=...) , a timestamp) or at the line start, then ':' or the line's end.
_EXC_HEAD = r"(?:^|[\]>:)]|\d )\s*(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*"
# The errors a rank raises because another failed first: its link to a peer broke (remote-rank-died's
# own lines), torch's wrappers of that (a backend, network or store error), torchrun reporting its
# children's end. A node's first exception that is none of these is an error of its own (a Python
# exception in the training script): remote-rank-died does not explain that node (engine._unrecognized).
CONSEQUENCE = re.compile(
    r"Connection (?:closed|reset) by peer|Broken pipe|ncclRemoteError|remote process exited|network error|"
    r"Dist(?:Backend|Network|Store)Error|ChildFailedError|SignalException|NCCL communicator was aborted")

FAILURE_SIGNS: tuple[Sign, ...] = (
    Sign("traceback", r"Traceback \(most recent call last\)"),
    # `Error:` but not C++'s `c10::DistError::DistError(...)` in a frame of a warning's backtrace; Ray
    # names the exception it wraps: `ray.exceptions.RayTaskError(RuntimeError): ...` (ray-project/ray#37461)
    Sign("exception", _EXC_HEAD + r"Error(?:\(\w+\))?(?::(?!:)|$)"),
    # torchrun's agent told to stop (SIGHUP, SIGINT, SIGTERM: by the runner, the user, the scheduler)
    Sign("exception", _EXC_HEAD + r"Exception(?::(?!:)|$)", benign=(r"SignalException: Process \d+ got signal: (?:1|2|15)$",)),
    Sign("exception", r"Test (?:NCCL|CUDA) failure "),  # nccl-tests: an NCCL or CUDA call returned an error
    Sign("warn", r"(?:NCCL WARN|\.cc?u?:\d+ WARN) ", benign=(r"WARN Failed to open lib\w+", NCCL_RAS, RCCL_ADVICE, OFI_CLOSE,
                                                              PROXY_TEARDOWN, SHIM_ADVICE)),
    # (NCCL's return-code chain, `misc/socket.cc:47 -> 3`, is no sign: it is INFO, an error's origin
    # prints a WARN at the same level, and a healthy job's teardown prints the chain too when its
    # communicators are aborted at exit, before `Abort COMPLETE`)
    Sign("exit", r"exitcode\s*:?\s*(-?\d+)", ok_values=("0",)),
    Sign("exit", r"returned non-zero exit status (\d+)"),
    Sign("exit", r"^\s*Exit code:\s+(-?\d+)\s*$", ok_values=("0",)),  # mpirun: "  Exit code:    2"
    Sign("exit", r"(?:[Ee]xited with exit code|exits with return code =) (-?\d+)", ok_values=("0",)),  # srun, DeepSpeed
    Sign("exit", r"died with <Signals\.SIG\w+: \d+>"),
    Sign("exit", r"(?:Segmentation fault|Aborted \(core dumped\)|Bus error)"),
    # Open MPI's handler of a fatal signal (mpirun, nccl-tests): `[host:pid] *** Process received
    # signal ***`, then `[host:pid] Signal: Aborted (6)` (NVIDIA/nccl#1611: glibc's heap check aborted)
    Sign("exit", r"\] Signal: [A-Z][A-Za-z ]* \(\d+\)|\] \*\*\* Process received signal \*\*\*"),
    # ProcessGroupNCCL's watchdog tearing the process down after a failed or timed-out collective; it
    # says neither which nor why (karpathy/nanoGPT#55: the job's NCCL took an unusable IB path)
    Sign("exit", r"Some NCCL operations have failed or timed out\."),
    # its heartbeat monitor ending a process whose watchdog hung in an NCCL or CUDA call (hiyouga/
    # LlamaFactory#6953 at 145 ranks; NVIDIA/Fuser#3055: NCCL 2.23.4 at teardown): it says where, not why
    Sign("exit", r"Heartbeat monitor timed out!|ProcessGroupNCCL's watchdog got stuck for \d+ seconds"),
    # a C++ exception nobody caught: the process aborts (its `what():` line says why), e.g. Gloo's
    # `gloo::IoException` (horovod/horovod#2015, #2907); and the failure handler of absl, TensorFlow
    # and Horovod: `*** Received signal 6 ***`
    Sign("exit", r"terminate called after throwing an instance of '"),
    Sign("exit", r"\*\*\* Received signal \d+ \*\*\*"),
    # errors their libraries print without a Python exception: MPI's (olcf-user-docs: Cray MPICH's NIC
    # policy at init; of kind exit: a collective's also fails so when a peer died, which explains it),
    # MIOpen's (LUMI: its database on Lustre), a verbs call NCCL made (the WARN cut off)
    Sign("exit", r"Fatal error in P?MPI_\w+|\*\*\* An error occurred in MPI_\w+"),  # MPICH's; Open MPI's (nccl-tests#180)
    Sign("exception", r"MIOpen Error: "),
    # NVSHMEM's own fatal error at init (DeepEP's internode kernels; its ERROR_EXIT): before the broken
    # sockets of the peers it leaves (deepseek-ai/DeepEP#223: nvidia-peermem was not loaded on the hosts)
    Sign("exception", r"nvshmem initialization failed|\] Peer GPU \d+ is not accessible, exiting"),
    Sign("warn", r"Call to ibv_\w+ failed with error "),
    # Slurm lost a node of the job and cancelled the step (huggingface/m4-logs, Jean Zay: a node crashed)
    Sign("exit", r"srun: error: Node failure on \S+|CANCELLED AT \S+ DUE TO NODE FAILURE"),
    # Pyxis could not start the job's container: its enroot log follows (NVIDIA/pyxis; nvidia-container-cli)
    Sign("exception", r"pyxis: (?:container start failed|couldn't start container)"),
)
