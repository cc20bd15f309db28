"""`unrecognized-failure`: a node that failed for a reason no rule knows is still reported, with the
lines that say it failed. The inputs are made-up logs (tests/data/madeup), not real output."""

from __future__ import annotations

from ddptui.core.diagnosis.engine import Engine
from tests.conftest import DATA
from tests.core.test_diagnosis_corpus import CORPUS, split

MADEUP = DATA / "madeup"


def run(*names: str) -> Engine:
    e = Engine()
    for name in names:
        e.feed(name.split("-")[0], split(MADEUP / name)[1])
    e.finish()
    return e


def test_madeup_logs_give_their_expected_ids() -> None:
    for f in sorted(MADEUP.glob("*.log")):
        header, body = split(f)
        assert header["madeup"].startswith("written for the tests")
        e = Engine()
        e.feed(f.stem, body)
        got = {x.id for x in e.finish() if x.state == "active" and x.severity in ("error", "warning")}
        assert got == set(header["expected-diagnosis"].split()) - {"none"}, (f.name, got)


def test_evidence_is_the_first_warn_the_traceback_exception_and_the_exit_code() -> None:
    (f,) = run("01-madeup-keyerror-torchrun.log").findings
    assert (f.id, f.severity, f.nodes) == ("unrecognized-failure", "error", ["01"])
    texts = [e.text for e in f.evidence]
    assert texts[0] == "[rank0]: KeyError: 'labels'"  # the first traceback's exception, not the agent's later one
    assert "failed (exitcode: 1)" in texts[1] and len(texts) == 2
    assert f.summary == "01 rank 0: KeyError: 'labels'" and f.fix is not None  # torch's [rank0]: said as words

    (f,) = run("02-madeup-nccl-warn-illegal-access-srun.log").findings
    assert [e.line for e in f.evidence] == [3, 5]  # the libibverbs notice is no failure; srun's exit code
    assert "illegal memory access" in f.evidence[0].text and "exit code 1" in f.evidence[1].text

    (f,) = run("04-madeup-assertion-mpirun.log").findings
    assert [e.text for e in f.evidence] == ["[1,0]<stderr>:AssertionError: loss is nan"]


def test_one_finding_covers_every_unexplained_node() -> None:
    (f,) = run("01-madeup-keyerror-torchrun.log", "04-madeup-assertion-mpirun.log",
               "03-madeup-healthy-alarming-lines.log").findings
    assert f.nodes == ["01", "04"] and {e.node for e in f.evidence} == {"01", "04"}


def test_a_node_a_rule_explains_gets_no_unrecognized_failure() -> None:
    e = Engine()
    e.feed("a", split(MADEUP / "01-madeup-keyerror-torchrun.log")[1])
    e.feed("b", split(CORPUS / "53-remote-rank-died-broken-pipe.log")[1])
    assert {(f.id, tuple(f.nodes)) for f in e.finish()} == {("unrecognized-failure", ("a",)), ("remote-rank-died", ("b",))}


def test_never_on_healthy_logs() -> None:
    for f in sorted(CORPUS.glob("*.log")):
        header, body = split(f)
        if header["expected-diagnosis"] == "none":
            e = Engine()
            e.feed(f.stem, body)
            assert all(x.id != "unrecognized-failure" for x in e.finish()), f.name


def test_node_exited_from_the_live_runner() -> None:
    e = Engine()
    e.feed("node02", ["[default0]:epoch 1 loss=0.3"])
    e.node_exited("node02", 0)
    e.node_exited("node03", 3)
    (f,) = e.finish()
    assert (f.id, f.nodes) == ("unrecognized-failure", ["node03"])
    assert [(ev.node, ev.line, ev.text) for ev in f.evidence] == [("node03", 0, "exit code 3")]


def test_node_exited_by_a_known_signal_is_its_cause() -> None:
    e = Engine()
    e.node_exited("node02", -11)
    e.node_exited("node03", 137)  # a shell's 128 + SIGKILL
    assert {(f.id, tuple(f.nodes)) for f in e.finish()} == {("segfault-exit-11", ("node02",)),
                                                            ("host-oom-exit-9", ("node03",))}


def test_a_cause_that_arrives_after_finish_takes_the_node_back() -> None:
    e = Engine()
    e.node_exited("node02", 1)
    assert [f.id for f in e.finish()] == ["unrecognized-failure"]
    e.feed("node02", ["RuntimeError: Address already in use"])
    assert [f.id for f in e.finish()] == ["port-in-use"]


def test_a_cross_rule_over_the_hosts_of_one_log_explains_that_log() -> None:
    e = Engine()
    e.feed("mpirun", ["[1,0]<stdout>:hostA:1:1 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
                      "[1,1]<stdout>:hostB:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
                      "[1,1]<stderr>:hostB:1:1 [0] misc/socket.cc:50 NCCL WARN Net : Connection closed by remote peer",
                      "[1,1]<stderr>:RuntimeError: NCCL communicator was aborted"])
    assert [(f.id, f.nodes) for f in e.finish()] == [("nccl-version-mismatch", ["hostA", "hostB"])]


def assert_a_teardown_is_no_failure_but_a_real_warn_before_it_is(node: str, teardown: list[str]) -> None:
    e = Engine()
    e.feed(node, teardown)
    assert e.finish() == []
    warn = next(x for x in split(CORPUS / "158-rccl-two-node-mi250x-socket-connect-closed-amd-iommu-warns.log")[1]
                if "NCCL WARN socketProgress: Connection closed by remote peer" in x)
    e = Engine()
    e.feed(node, [warn] + teardown)
    (f,) = e.finish()
    assert f.id == "unrecognized-failure" and [x.text for x in f.evidence] == [warn.strip()]


def test_nccls_return_code_chain_at_teardown_is_no_failure() -> None:
    """A healthy job whose communicators are aborted at exit prints NCCL's return-code chain at INFO,
    then `Abort COMPLETE`: rank 28's teardown in a passing 4-node EFA BERT run under mpirun
    (https://github.com/aws/aws-k8s-tester/pull/524, its "Testing" log, recorded lines). A real error
    prints its WARN at the same level: that is the sign, and the chain after it adds nothing (the WARN
    here is corpus 158's, recorded from ROCm/rccl#1026)."""
    assert_a_teardown_is_no_failure_but_a_real_warn_before_it_is("worker-3", [
        "[1,28]<stdout>:bert-training-worker-3:25:584 [4] NCCL INFO proxy.cc:996 -> 3",
        "[1,28]<stdout>:bert-training-worker-3:25:668 [0] NCCL INFO comm 0x55f18f7772c0 rank 28 nranks 32 "
        "cudaDev 4 busId 97000 - Abort COMPLETE",
    ])


def test_aws_ofi_nccls_close_with_requests_in_flight_at_teardown_is_no_failure() -> None:
    """aws-ofi-nccl before 1.16 WARNs when NCCL's abort at exit closes a communicator with requests in
    flight, and NCCL's proxy goes on to `Abort COMPLETE`: rank 16's teardown in the same passing run
    (https://github.com/aws/aws-k8s-tester/pull/524, recorded lines). A real WARN in the same log
    is still the failure's sign (corpus 158's, as above)."""
    assert_a_teardown_is_no_failure_but_a_real_warn_before_it_is("worker-2", [
        "[1,16]<stdout>:bert-training-worker-2:21:585 [0] recv_close:3201 NCCL WARN NET/OFI Attempt to call "
        "recv_close with outstanding requests!",
        "[1,16]<stdout>:bert-training-worker-2:21:585 [0] NCCL INFO transport/net.cc:1015 -> 3",
        "[1,16]<stdout>:bert-training-worker-2:21:585 [0] NCCL INFO proxy.cc:984 -> 3",
        "[1,16]<stdout>:bert-training-worker-2:21:585 [0] NCCL INFO proxy.cc:996 -> 3",
        "[1,16]<stdout>:bert-training-worker-2:21:666 [0] NCCL INFO comm 0x5585418196c0 rank 16 nranks 32 "
        "cudaDev 0 busId 53000 - Abort COMPLETE",
    ])


def test_nccls_proxy_service_at_an_open_communicators_exit_is_no_failure() -> None:
    """A process that ends with its communicators open leaves NCCL's proxy service thread without
    its peers: it fails to accept, to read a request's type, and to run a Close (the teardown of a
    passing GKE A3 all_reduce sweep, corpus 263). A failed Connect is no teardown: corpus 17's
    (a firewall) stays a failure's sign, as does a real WARN before the teardown."""
    body = split(CORPUS / "263-healthy-gke-a3-socket-allreduce-proxy-teardown-warns.log")[1]
    teardown = [x for x in body if "[Service thread]" in x or "[Proxy Service" in x]
    assert len(teardown) == 3
    assert_a_teardown_is_no_failure_but_a_real_warn_before_it_is("rank0", teardown)
    connect = next(x for x in split(CORPUS / "17-firewall-connection-abort-proxy.log")[1]
                   if "Failed to execute operation Connect" in x)
    e = Engine()
    e.feed("n", [connect])
    (f,) = e.finish()
    assert f.id == "unrecognized-failure" and [x.text for x in f.evidence] == [connect.strip()]


def test_slurm_says_why_a_step_ended_where_nothing_else_does() -> None:
    """A step whose container never started (Pyxis: its enroot hook failed, corpus 277) is quoted by
    Pyxis' own line, before srun's exit code; a step Slurm cancelled because a node failed (corpus
    276, Jean Zay) is a failed job although no rank printed an error."""
    e = Engine()
    e.feed("n", split(CORPUS / "277-unrecognized-pyxis-nvidia-hook-container-start-failed.log")[1])
    (f,) = e.finish()
    assert f.id == "unrecognized-failure"
    assert [x.text for x in f.evidence][:1] == ["slurmstepd: error: pyxis: container start failed with error code: 1"]
    e = Engine()
    e.feed("n", split(CORPUS / "276-unrecognized-slurm-node-failure-step-cancelled.log")[1])
    (f,) = e.finish()
    assert f.id == "unrecognized-failure" and "Node failure on jean-zay-iam37" in f.evidence[0].text


def test_a_process_that_aborts_says_it_failed_whatever_prints_it() -> None:
    """Ways a process reports its own abort that name no cause: an uncaught C++ exception
    (`terminate called ...`, here Gloo's, horovod/horovod#2015), the failure handler of absl,
    TensorFlow and Horovod (`*** Received signal 6 ***`), Open MPI's (`Signal: Aborted (6)`,
    NVIDIA/nccl#1611; `*** An error occurred in MPI_Allgather`), and ProcessGroupNCCL's watchdog teardown (karpathy/nanoGPT#55). Each alone,
    as real logs print them, is a failed node: an unrecognized-failure that quotes it."""
    for line in ["Tue Jun  9 20:10:40 2020[1]<stderr>:terminate called after throwing an instance of 'gloo::IoException'",
                 "Tue Jun  9 20:10:40 2020[1]<stderr>:*** Received signal 6 ***",
                 "[rack1-93-slot7:186363] Signal: Aborted (6)",
                 "[10-192-80-132:07356] *** An error occurred in MPI_Allgather",  # Open MPI's (NVIDIA/nccl-tests#180)
                 "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the asynchronous "
                 "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."]:
        e = Engine()
        e.feed("n1", ["training step 10", line])
        (f,) = e.finish()
        assert (f.id, f.nodes, f.evidence[0].text) == ("unrecognized-failure", ["n1"], line.strip()), line


def test_mpis_fatal_error_after_a_peer_died_leaves_the_peer_as_the_cause() -> None:
    """MPI says `Fatal error in PMPI_...` at init (its own failure, corpus 252) and in a collective
    when a peer died first. It says the process failed, not why: where remote-rank-died explains
    the node (corpus 53, real), the MPI line adds no unrecognized-failure of the node's own."""
    body = split(CORPUS / next(f.name for f in CORPUS.glob("53-*.log")))[1]
    e = Engine()
    e.feed("n1", body + ["Abort(405911311) on node 1 (rank 1 in comm 0): Fatal error in PMPI_Allreduce: "
                         "Other MPI error, error stack:"])
    assert [f.id for f in e.finish() if f.state == "active"] == ["remote-rank-died"]


def test_a_traceback_cut_before_its_exception_is_quoted() -> None:
    """A paste or a log that ends inside a traceback (corpus 294: DeepSpeed's runner found no hostfile,
    and init_process_group's traceback is all that follows) still failed: its first line is the
    evidence, and the summary says what is missing, not just "failed"."""
    e = Engine()
    e.feed("294", split(next(CORPUS.glob("294-*.log")))[1])
    (f,) = e.finish()
    assert f.id == "unrecognized-failure" and f.summary == "294: a traceback, cut before its exception"
    assert [e.text for e in f.evidence] == ["Traceback (most recent call last):"]
