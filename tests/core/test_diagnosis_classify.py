"""What the evidence means: the classifier the rules use (errno + address, signals, IB events),
and the rules that use it across launcher prefixes and NCCL/c10d/Gloo wordings."""

from __future__ import annotations

import pytest

from ddptui.core.diagnosis import classify as C
from ddptui.core.diagnosis.engine import Engine
from tests.core.test_diagnosis_corpus import CORPUS, split


@pytest.mark.parametrize("addr, kind", [
    ("127.0.0.1", "loopback"), ("127.0.1.1", "loopback"), ("[::1]", "loopback"), ("::ffff:127.0.0.1", "loopback"),
    ("255.255.0.0", "not-a-host"), ("::ffff:255.255.0.0", "not-a-host"), ("0.104.99.143", "not-a-host"),
    ("6841231", "not-a-host"), ("0.0.0.0", "not-a-host"), ("[::]", "not-a-host"), ("224.0.0.1", "not-a-host"),
    ("10.0.0.4", "host"), ("192.168.0.1", "host"), ("fe80::1%eth0", "host"),
    ("169.254.3.1", "link-local"), ("169.254.0.1", "link-local"), ("::ffff:169.254.0.1", "link-local"),
    ("169.253.0.1", "host"), ("169.255.0.1", "host"),
    ("master-0", "name"), ("localhost", "name"), ("gpu_node.cluster", "name"), (None, "name"),
    # text given where a host name belongs: a path (what a shell startup file printed), a shell word, host:port
    ("/root/cuda11.8.bashrc", "not-a-host"), ("$MASTER_ADDR", "not-a-host"), ("node1:29500", "not-a-host"),
])
def test_address_kind(addr, kind) -> None:
    assert C.address_kind(addr) == kind


@pytest.mark.parametrize("text, num", [
    ("110", 110), ("-98", 98), ("Connection timed out", 110), ("SO_ERROR: Connection refused", 111),
    ("No route to host", 113), ("Connection reset by peer", 104), ("Broken pipe", 32),
    ("Software caused connection abort", 103), ("Connect timeout", 110), ("something else", None), (None, None),
])
def test_errno_of(text, num) -> None:
    assert C.errno_of(text) == num


@pytest.mark.parametrize("via, addr, err, fid", [
    # a netmask or an address that is no host's: bad-master-addr, whoever connects, whatever the errno
    ("store", "255.255.0.0", 110, "bad-master-addr"), ("store", "0.104.99.143", 110, "bad-master-addr"),
    ("gloo", "0.0.0.0", 111, "bad-master-addr"),
    # a loopback peer: Gloo resolved the hostname to it; NCCL picked lo; the store on 127.0.0.1 is a 1-node job
    ("gloo", "127.0.1.1", 111, "loopback-hostname"), ("gloo", "127.0.0.1", 110, "loopback-hostname"),
    ("nccl", "127.0.0.1", 111, "wrong-interface"), ("store", "127.0.0.1", 110, None),
    # the errno, to a real host
    ("store", "10.0.0.1", 111, "master-not-started"), ("store", "10.0.0.1", 113, "bad-master-addr"),
    ("store", "10.0.0.1", 110, None), ("nccl", "10.0.0.4", 113, "firewall-or-unreachable"),
    ("nccl", "10.0.0.4", 110, "firewall-or-unreachable"), ("nccl", None, 103, "firewall-or-unreachable"),
    ("gloo", "10.0.0.3", 113, "firewall-or-unreachable"), ("nccl", "10.0.0.4", 104, "remote-rank-died"),
    ("gloo", "10.0.0.3", 32, "remote-rank-died"), ("nccl", "10.0.0.4", 111, None), ("gloo", "10.0.0.3", 111, None),
    # a peer's NCCL advertised a link-local address: refused (uccl-project/uccl#1034), aborted (corpus 334), any errno
    ("nccl", "169.254.3.1", 111, "wrong-interface"), ("nccl", "169.254.0.1", 103, "wrong-interface"),
    ("nccl", "169.254.0.1", 110, "wrong-interface"), ("nccl", "169.254.0.1", None, "wrong-interface"),
    ("gloo", "169.254.0.1", 113, "firewall-or-unreachable"), ("store", "169.254.0.1", 111, "master-not-started"),
])
def test_connect_failure(via, addr, err, fid) -> None:
    assert C.connect_failure(via, addr, err) == fid


def test_signals_and_exit_codes() -> None:
    assert C.decide_signal(("11",))[0] == "segfault-exit-11"
    assert C.decide_signal(("-9",))[0] == "host-oom-exit-9"
    assert C.decide_signal(("6",)) is None and C.decide_signal((None,)) is None
    assert [C.signal_of_exit(rc) for rc in (-11, 139, 137, 1, 0, 255)] == [11, 11, 9, None, None, None]


def test_ib_events() -> None:
    assert C.decide_ib_event(("local catastrophic error",))[0] == "ib-async-fatal-event"
    assert C.decide_ib_event(("port error",))[0] == "ib-async-fatal-event"
    assert C.decide_ib_event(("port active",)) is None and C.decide_ib_event(("GID table change",)) is None


def ids(lines: list[str]) -> set[str]:
    e = Engine()
    e.feed("n", lines)
    return {f.id for f in e.finish() if f.state == "active"}


@pytest.mark.parametrize("line, fid", [
    # c10d, inside torchrun's [rankN]: prefix and a DistNetworkError
    ("[rank1]: torch.distributed.DistNetworkError: The client socket has failed to connect to [::ffff:255.255.0.0]:29500 "
     "(errno: 110 - Connection timed out).", "bad-master-addr"),
    ("[W socket.cpp:558] [c10d] The client socket has failed to connect to [10.0.0.1]:29500 (errno: 111 - Connection "
     "refused).", "master-not-started"),
    # NCCL, new wording under Ray's prefix; the old 'Call to connect failed' wording under srun's
    ("(RayWorkerWrapper pid=123, ip=10.0.0.2) h:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
     "127.0.0.1<43210> failed : Connection refused", "wrong-interface"),
    ("0: h:1:2 [0] include/socket.h:360 WARN Call to connect failed : No route to host", "firewall-or-unreachable"),
    # NCCL's error inside a torch exception: the Last error text
    ("socketStartConnect: Connect to 10.1.2.3<41337> failed : No route to host", "firewall-or-unreachable"),
    # Gloo, new and old wordings, under mpirun's and DeepSpeed's prefixes
    ("[1,3]<stderr>:  timed out connecting: SO_ERROR: Connection refused, remote=[127.0.1.1]:4242", "loopback-hostname"),
    ("[2024-05-01 10:00:00,000] [INFO] [launch.py:1] connect [10.0.0.3]:4242: No route to host", "firewall-or-unreachable"),
    # Gloo's connect deadline, with the peer unknown ([none]) or known (a loopback peer is the hostname's fault)
    ("RuntimeError: Gloo connectFullMesh failed with [/x/gloo/transport/tcp/pair.h:311] Connect timeout [none]",
     "firewall-or-unreachable"),
    ("RuntimeError: Gloo connectFullMesh failed with [/x/gloo/transport/tcp/pair.h:311] Connect timeout [127.0.1.1]",
     "loopback-hostname"),
    # Gloo's collective deadline; torchelastic's own rendezvous keys that never came
    ("[rank0]: RuntimeError: [/x/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation "
     "to complete", "watchdog-timeout"),
    ("torch.distributed.DistStoreError: wait timeout after 15000ms, keys: /none/torchelastic/assigned_ranks/1",
     "rendezvous-timeout"),
    # signals and CUDA devices in every launcher's words
    ("[2024-05-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['python'] exits with return code = -11",
     "segfault-exit-11"),
    ("subprocess.CalledProcessError: Command '[...]' died with <Signals.SIGKILL: 9>.", "host-oom-exit-9"),
    ("[default1]:RuntimeError: CUDA error: invalid device ordinal", "gpu-count-short"),
    ("RuntimeError: No CUDA GPUs are available; no CUDA-capable device is detected", "gpu-count-short"),
    ("h:1:2 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : local catastrophic error",
     "ib-async-fatal-event"),
    ("RuntimeError: Address already in use", "port-in-use"),
    # c10d's lookup of a master address that is a path (corpus 179, huggingface/accelerate#2245, pdsh's prefix)
    ("9.91.4.251: [W socket.cpp:601] [c10d] The IPv6 network addresses of (/root/cuda11.8.bashrc, 45458) cannot be "
     "retrieved (gai error: -3 - Temporary failure in name resolution).", "bad-master-addr"),
    ("[W socket.cpp:601] [c10d] The IPv6 network addresses of (master-0, 29500) cannot be retrieved (gai error: -3 - "
     "Temporary failure in name resolution).", "hostname-resolution"),
])
def test_rules_decide_by_meaning_across_formats(line, fid) -> None:
    assert ids([line]) == {fid}


def test_a_benign_ib_event_and_a_retry_say_nothing() -> None:
    assert ids(["h:1:2 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port active"]) == {"unrecognized-failure"}
    assert ids(["h:1:2 [0] NCCL INFO Call to connect returned Connection timed out, retrying"]) == set()


def test_nccls_last_connect_retry_is_a_failed_connect_and_the_errno_decides() -> None:
    """NCCL 2.19+ says each retry of a connect (corpus 282, hiyouga/LlamaFactory#8045): a retry is no
    finding, the last one (34/34) is a connect that failed, judged by its errno as a WARN's would be."""
    retry = "zgiot:1183664:1184669 [0] NCCL INFO socketPollConnect: connect returned {}, retrying ({}/34) after sleep for 3400 msec"
    assert ids([retry.format("No route to host", n) for n in range(26, 34)]) == set()
    assert ids([retry.format("No route to host", 34)]) == {"firewall-or-unreachable"}
    assert ids([retry.format("Connection timed out", 34)]) == {"firewall-or-unreachable"}
    assert ids([retry.format("Connection refused", 34)]) == set()  # nothing listens there yet, or any more: no cause


def test_every_pattern_keeps_a_literal_anchor_for_the_gate() -> None:
    """No rule, requirement or failure sign may see every line: the engine is on every line's path."""
    e = Engine()
    assert [p.pattern for p, _, _ in e._always] == []


def test_the_store_barrier_is_a_missing_rank_only_when_fewer_ranks_came() -> None:
    """c10d's store-based barrier prints (world_size, worker_count). Fewer workers than the world:
    ranks are missing. More (yolov5#4409: 16 for a world of 4; submitit#1613, corpus 176: 16 of 8,
    after a preemption): the barrier's key was counted by more processes than the job has, which is
    no missing rank; the engine said "16 of 8 ranks reached the barrier"."""
    fewer = ("INFO:root:Waiting in store based barrier to initialize process group for rank: 5, key: "
             "store_based_barrier_key:1 (world_size=8, worker_count=7, timeout=0:30:00)")
    more = ("Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 "
            "(world_size=4, worker_count=16, timeout=0:01:00)")
    timed_out = ("RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: "
                 "store_based_barrier_key:1 (world_size=8, worker_count=16, timeout=0:30:00)")
    e = Engine()
    e.feed("n", [fewer])
    (f,) = e.finish()
    assert (f.id, f.summary) == ("missing-rank", "n: 7 of 8 ranks reached the barrier")
    assert ids([more]) == set()
    e = Engine()
    e.feed("n", [more, timed_out])
    (f,) = e.finish()
    assert f.id == "unrecognized-failure" and "worker_count=16" in f.evidence[0].text


def test_a_master_addr_of_localhost_is_bad_only_where_the_node_rendezvoused_with_another_host() -> None:
    """torchrun's rendezvous result tells each node the master's address. A node that rendezvoused
    with another host and is told `master_addr=localhost` will look for the master on itself: the
    master's agent was started with master_addr localhost (pytorch/pytorch#76367, corpus 208). Agents
    that all rendezvous on the one host (a 127.0.0.1 endpoint: ddptui's local nodes) are fine, and
    neither side is judged before both lines are there, whichever comes first."""
    head = "I1204 08:56:10.134000 7525 torch/distributed/elastic/agent/server/api.py:553]   "
    config = "I1204 08:56:10.129000 7525 torch/distributed/launcher/api.py:254]   rdzv_endpoint            : "
    for endpoint, addr, fid in [("pytorch-dist-nlp-master-0:23456", "localhost", {"bad-master-addr"}),
                                ("10.0.0.2:29500", "127.0.0.1", {"bad-master-addr"}),
                                ("127.0.0.1:29571", "127.0.0.1", set()), ("localhost:29400", "localhost", set()),
                                ("10.0.0.2:29500", "10.0.0.2", set()), ("node02:29500", "node02", set())]:
        lines = [config + endpoint, head + "master_addr=" + addr, head + "group_rank=1"]
        assert ids(lines) == fid, (endpoint, addr)
        assert ids(lines[1:] + lines[:1]) == fid, (endpoint, addr)  # the result read before the config


def test_a_global_rank_claimed_twice_is_a_duplicate_rank_until_the_whole_world_came() -> None:
    """Lightning prints `initializing ddp: GLOBAL_RANK: r, MEMBER: r+1/W` once per process. Under srun
    with one task a node, each node's Lightning started ranks 0-3 of 8 itself
    (Lightning-AI/pytorch-lightning#4389, corpus 221): the same ranks on both nodes, or twice in one
    Slurm output, and the job hangs. A job whose every rank came and that claims them again ran twice
    (fit, then a second `srun python test.py` into the same output): no duplicate. Only half the world
    and no repeat (Lightning-AI/pytorch-lightning#8707: python run without srun) is no duplicate either."""
    def claim(r: int, world: int = 8, head: str = "initializing ddp") -> str:
        return f"{head}: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{world}"

    e = Engine()
    e.feed("node1", [claim(r) for r in range(4)])
    e.feed("node2", [claim(r) for r in range(4)])
    (f,) = [f for f in e.finish() if f.state == "active"]
    assert (f.id, f.nodes) == ("duplicate-rank", ["node1", "node2"])
    assert "GLOBAL_RANK 0, 1, 2, 3 claimed by more than one process; 4 of 8 ranks came" in f.summary
    assert len(f.evidence) == 8 and {ev.node for ev in f.evidence} == {"node1", "node2"}
    assert ids([claim(r, head="Initializing distributed") for r in (1, 1, 0, 0)]) == {"duplicate-rank"}  # Lightning 2.x
    assert ids([claim(r) for r in range(8)] * 2) == set()
    assert ids([claim(r) for r in (1, 2, 0, 3)]) == set()


def test_no_route_to_a_peer_says_how_to_pin_the_interface_that_routes() -> None:
    """Corpus 283: a connect that got no route to the address a peer gave, fixed by the reporter with
    NCCL_SOCKET_IFNAME=em4. The log cannot tell a firewall from an interface on the wrong network, so
    firewall-or-unreachable's fix says both: open the ports, or pin the interface that routes."""
    e = Engine()
    e.feed("n", split(next(CORPUS.glob("283-*.log")))[1])
    (f,) = [f for f in e.finish() if f.state == "active"]
    assert f.id == "firewall-or-unreachable" and "192.168.19.14" in f.summary
    assert "NCCL_SOCKET_IFNAME" in f.fix.explain and "nc -l PORT" in f.fix.explain


def test_a_virtual_interface_listed_second_is_the_cause_only_where_the_node_failed() -> None:
    """NCCL lists a real interface, then a container's (corpus 284: bond0, then a docker veth): healthy
    jobs print the same (pytorch/pytorch#68893's working run, corpus 304) and run, since NCCL puts
    channels on it only sometimes. Where the node failed and nothing else explains it, it is the
    cause, an error; elsewhere a word on it (information, which is no alarm). One listed first is the
    cause at once."""
    body = split(next(CORPUS.glob("284-*.log")))[1]
    quiet, failed = Engine(), Engine()
    for e in (quiet, failed):
        e.feed("n", body)
    failed.node_exited("n", 1)
    (q,), (f,) = quiet.finish(), failed.finish()
    assert (q.id, q.severity) == ("wrong-interface", "info") and "veth8739016" in q.summary
    assert (f.id, f.severity, f.summary) == ("wrong-interface", "error", q.summary)
    assert f.evidence[0].text.endswith("[1]veth8739016:fe80::5804:edff:fe5b:6570%veth8739016<0>")
    other = Engine()  # a failure another finding explains: the interface is a word beside it, not a second cause
    other.feed("n", body + ["RuntimeError: Address already in use"])
    other.node_exited("n", 1)
    assert sorted((x.id, x.severity) for x in other.finish()) == [("port-in-use", "error"), ("wrong-interface", "info")]
    first = Engine()
    first.feed("n", ["h:1:1 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0> [1]eth0:10.0.0.2<0>"])
    assert [(x.id, x.severity) for x in first.finish()] == [("wrong-interface", "error")]


def test_a_link_local_peer_or_interface_is_the_wrong_interface_with_a_fix_that_names_no_prefix() -> None:
    """169.254.x.x is reached only on its own link (RFC 3927): a peer's NCCL that advertised it took
    an interface no other host reaches (corpus 334: verl on a Ray cluster, `Connect to 169.254.0.1<40815>
    failed : Software caused connection abort`; uccl-project/uccl#1034, a GH200 pair whose bootstrap
    took the BMC's 169.254.3.1 NIC, fixed by NCCL_SOCKET_IFNAME). The catalog's fix (^docker,veth,lo)
    would not exclude such an interface: its own fix is to name the interface that routes."""
    e = Engine()
    e.feed("n", split(next(CORPUS.glob("334-*.log")))[1])
    e.node_exited("n", 1)
    (f,) = [f for f in e.finish() if f.state == "active"]
    assert (f.id, f.severity) == ("wrong-interface", "error")
    assert "169.254.0.1" in f.summary and "link-local" in f.summary
    assert f.fix is C.LINK_LOCAL_FIX and not f.fixable and "NCCL_SOCKET_IFNAME" in f.fix.explain
    assert f.evidence[0].text.startswith("socketStartConnect: Connect to 169.254.0.1<40815>")
    # the interface NCCL takes first holds the link-local address: the cause where the node failed, else a word
    listed = ["gh1:100:100 [0] NCCL INFO Bootstrap : Using usb0:169.254.3.1<0>",
              "gh1:100:100 [0] NCCL INFO NET/Socket : Using [0]usb0:169.254.3.1<0> [1]enP5p1s0f0:10.1.0.5<0>"]
    quiet, failed = Engine(), Engine()
    for x in (quiet, failed):
        x.feed("n", listed)
    failed.node_exited("n", 1)
    (q,), (g,) = quiet.finish(), failed.finish()
    assert (q.id, q.severity, g.id, g.severity) == ("wrong-interface", "info", "wrong-interface", "error")
    assert "usb0" in g.summary and g.fix is C.LINK_LOCAL_FIX
    # listed after a routable one, or a link-local IPv6 (Azure's VF, healthy): nothing
    other = Engine()
    other.feed("n", ["h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.51.1.14<0> [1]usb0:169.254.3.1<0>",
                     "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.51.1.14<0> [1]enP20593s1:fe80::7e1e%enP20593s1<0>"])
    assert other.finish() == []


def test_nvshmem_without_the_peermem_module_and_nvshmems_own_init_failure() -> None:
    """NVSHMEM says it finds no GPUDirect RDMA module and skips its IB transport (corpus 336,
    deepseek-ai/DeepEP#223, fixed by `modprobe nvidia-peermem`): the cause where the node failed; a
    job that needs no IB (one node) runs on, and it is a word beside it. Another part of the same
    paste holds only NVSHMEM's init failure and the peers' broken sockets: NVSHMEM's own error comes
    first, so the broken pipe is no peer's death to blame but a failure ddptui cannot name."""
    e = Engine()
    e.feed("n", split(next(CORPUS.glob("336-*.log")))[1])
    (f,) = e.finish()
    assert (f.id, f.severity) == ("gpudirect-rdma-missing", "error") and "modprobe nvidia-peermem" in f.fix.explain
    assert "nvidia_peermem detected" in f.evidence[0].text
    quiet = Engine()
    quiet.feed("n", ["/nvshmem/src/modules/transport/ibrc/ibrc.cpp:nvshmemt_init:1851: neither nv_peer_mem, or "
                     "nvidia_peermem detected. Skipping transport.", "iter 10 loss 2.31"])
    assert [(x.id, x.severity) for x in quiet.finish()] == [("gpudirect-rdma-missing", "info")]
    # deepseek-ai/DeepEP#223's paste, another part (two ranks interleaved), verbatim
    other = Engine()
    other.feed("n", [
        "/sgl-workspace/nvshmem/src/host/init/init.cu:998: non-zero status: 7 building transport map failed",
        "/sgl-workspace/nvshmem/src/host/init/init.cu:nvshmemi_check_state_and_init:1080: nvshmem initialization "
        "failed, exiting",
        "/sgl-workspace/nvshmem/src/modules/bootstrap/uid/ncclSocket/ncclsocket_socket.cpp:socketProgressOpt:39: "
        "socketProgressOpt: Call to recv from 10.179.114.196<38229> failed : Broken pipe"])
    (u,) = other.finish()
    assert u.id == "unrecognized-failure" and "nvshmem initialization failed" in u.summary


def test_a_low_locked_memory_limit_where_ucx_or_libibverbs_says_it() -> None:
    """UCX (1.14+) adds the limit to an ENOMEM, libibverbs warns at load at 32 KiB or less. Both also
    print where the job needs no RDMA and runs on (openucx/ucx#8746, verbatim: a node without InfiniBand,
    osu_bcast's results follow): information there; where the node failed, the cause (ucx#8229: 64 KiB
    was). NCCL's own ENOMEM from ibv_* is left to other rules: it has other causes too."""
    ucx = ("[1668693503.473099] [ampere:1188443:0]          ib_log.c:246  UCX  ERROR mlx5_0: ibv_create_cq() failed: "
           "Cannot allocate memory. Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)")
    ran = Engine()
    ran.feed("n", [ucx, "", "# OSU MPI Broadcast Latency Test v5.8", "# Size       Avg Latency(us)", "1                       0.23"])
    (f,) = ran.finish()
    assert (f.id, f.severity) == ("memlock-too-low", "info")
    assert f.summary.endswith("UCX could not register memory: the locked-memory limit is 64 KiB")
    failed = Engine()
    failed.feed("n", [ucx])
    failed.node_exited("n", 1)
    (g,) = failed.finish()
    assert (g.id, g.severity) == ("memlock-too-low", "error") and "--ulimit memlock=-1" in g.fix.explain
    verbs = Engine()  # libibverbs' own words (rdma-core libibverbs/init.c, check_memlock_limit), as MPI users saw them
    verbs.feed("n", ["libibverbs: Warning: RLIMIT_MEMLOCK is 32768 bytes.", "    This will severely limit memory registrations."])
    verbs.node_exited("n", 1)
    assert [(x.id, x.severity) for x in verbs.finish()] == [("memlock-too-low", "error")]
    live = Engine()  # a live run judges at every flush: the word said while the node ran becomes the cause when it fails
    live.feed("n", [ucx])
    assert [(x.id, x.severity) for x in live.finish()] == [("memlock-too-low", "info")]
    live.node_exited("n", 1)
    assert [(x.id, x.severity) for x in live.finish()] == [("memlock-too-low", "error")]
    nccl = Engine()  # NCCL's ENOMEM alone: not read as the limit
    nccl.feed("n", ["h:1:2 [0] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"])
    assert "memlock-too-low" not in {x.id for x in nccl.finish()}


def test_open_mpis_signal_handler_first_line_is_a_failure_sign_alone() -> None:
    """Open MPI's handler prints `[host:pid] *** Process received signal ***`, then the signal (corpus
    of NVIDIA/nccl#1611); a paste cut after the first line (hunt 17: NVIDIA/nccl#1669, NCCL 2.26.2's RAS
    service crashing a process at init) still says the node failed: never a failed job without a word."""
    e = Engine()
    e.feed("n", ["rtptest1621:405884:407462 [0] NCCL INFO RAS client listening socket at ::1<28028>",
                 "[rtptest1621:405884] *** Process received signal ***"])
    (f,) = e.finish()
    assert f.id == "unrecognized-failure" and "Process received signal" in f.summary


def test_error_802_names_the_nvls_way_out_where_only_nccls_call_fails() -> None:
    """Error 802 is the Fabric Manager's (corpus 159, 171: CUDA's first call); on a GB200 whose CUDA ran
    and whose first all_reduce failed so in NCCL (NVIDIA/nccl#1769, verbatim below), the reporter's job
    ran with NCCL_NVLS_ENABLE=0: the fix says that too, as the way to run while the fabric is mended."""
    e = Engine()
    e.feed("n", ["[rank2]: ncclUnhandledCudaError: Call to CUDA function failed.", "[rank2]: Last error:",
                 "[rank2]: Cuda failure 802 'system not yet initialized'"])
    (f,) = e.finish()
    assert f.id == "fabric-manager-down" and "nvidia-fabricmanager" in f.fix.explain
    assert any("NCCL_NVLS_ENABLE=0" in a and "nccl#1769" in a for a in f.fix.alternatives)


def test_nccl_without_gpudirect_rdma_is_a_word_and_nvshmem_failing_for_it_the_cause() -> None:
    """NCCL's InfiniBand transport without GPUDirect RDMA runs, copying through host memory: its line
    (2.14's, NVIDIA/nccl#899, corpus 92; 2.22's without "(no module)", NVIDIA/nccl#1676) is information.
    NET/Socket says it of every NIC (corpus 263): no word. Where NVSHMEM then fails for want of it
    (deepseek-ai/DeepEP#223, corpus 336's lines), the same finding becomes the error, in NVSHMEM's words."""
    old = "6a5a91752e39:74352:74370 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)"
    new = "learn01:2228637:2230195 [3] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"  # nccl#1676
    for line in (old, new):
        e = Engine()
        e.feed("n", [line])
        (f,) = e.finish()
        assert (f.id, f.severity) == ("gpudirect-rdma-missing", "info")
        assert f.summary == "n: NCCL has no GPUDirect RDMA to mlx5_0: its InfiniBand/RoCE traffic is copied through host memory"
    sock = Engine()
    sock.feed("n", ["gke-hypercomputer-a3-a3-h100-dws-pool-16664d9c-hv7m:1596:2150 [0] NCCL INFO NET/Socket : GPU Direct "
                    "RDMA Disabled for HCA 0 'eth0'"])
    assert sock.finish() == []
    both = Engine()
    both.feed("n", [old, "/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:nvshmemt_init:1851: neither "
                         "nv_peer_mem, or nvidia_peermem detected. Skipping transport.",
                    "/sgl-workspace/nvshmem/src/host/init/init.cu:998: non-zero status: 3 building transport map failed"])
    both.node_exited("n", 1)
    (g,) = both.finish()
    assert (g.id, g.severity, g.state) == ("gpudirect-rdma-missing", "error", "active")
    assert g.summary == "n: NVSHMEM finds no nvidia_peermem module and skips its InfiniBand transport"
    assert [ev.text for ev in g.evidence] == [old, "/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:"
                                               "nvshmemt_init:1851: neither nv_peer_mem, or nvidia_peermem detected. "
                                               "Skipping transport."]  # NCCL's word first, then NVSHMEM's
