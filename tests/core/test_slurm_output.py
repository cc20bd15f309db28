"""A Slurm batch job's labeled output split back into per-node streams (core/slurm/output.py)."""

from __future__ import annotations

from pathlib import Path

from ddptui.core.slurm.output import CHUNK, Header, OutputSplitter, looks_labeled, split_file

HEAD = "ddptui: slurm job 12 nodes node02,node03,node04 master node02\n"


def merged(batches) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for b in batches:
        for node, lines in b.items():
            out.setdefault(node, []).extend(lines)
    return out


def test_header_names_the_tasks_and_is_routed_nowhere() -> None:
    sp = OutputSplitter()
    got = sp.feed((HEAD + "0: master up\n1: worker a\n2: worker b\n0: done\n").encode())
    assert got == {"node02": ["master up", "done"], "node03": ["worker a"], "node04": ["worker b"]}
    assert sp.header == Header("12", ("node02", "node03", "node04"), "node02")
    assert sp.nodes == ("node02", "node03", "node04")


def test_header_may_be_a_hostlist_expression() -> None:
    assert Header.parse("ddptui: slurm job 7 nodes node[02-04] master node02").nodes == ("node02", "node03", "node04")
    assert Header.parse("ddptui: slurm job 7 nodes node02 master") is None


def test_padded_labels_of_ten_tasks_or_more() -> None:
    names = [f"n{i:02d}" for i in range(12)]
    sp = OutputSplitter(names)
    got = sp.feed(b" 0: zero\n 9: nine\n10: ten\n11:\n 3:  two spaces kept\n")
    assert got == {"n00": ["zero"], "n09": ["nine"], "n10": ["ten"], "n11": [""], "n03": [" two spaces kept"]}


def test_no_header_and_no_names_gives_task_streams() -> None:
    sp = OutputSplitter()
    got = sp.feed(b"0: a\n1: b\n12:34:56 not a label\n")
    assert got == {"task0": ["a", "12:34:56 not a label"], "task1": ["b"]}
    assert sp.nodes == ("task0", "task1")


def test_a_given_node_list_names_the_tasks_the_header_wins() -> None:
    assert OutputSplitter(["a", "b"]).feed(b"1: x\n") == {"b": ["x"]}
    sp = OutputSplitter(["a", "b"])
    assert sp.feed(b"ddptui: slurm job 1 nodes c,d master c\n1: x\n2: beyond\n") == {"d": ["x"], "task2": ["beyond"]}


def test_srun_and_slurmstepd_lines_go_to_the_node_they_name() -> None:
    sp = OutputSplitter()
    text = (HEAD + "0: hello\n"
            "srun: error: node03: task 1: Exited with exit code 1\n"
            "slurmstepd: error: *** STEP 12.0 ON node04 CANCELLED AT 2024-01-01T10:00:00 ***\n"
            "slurmstepd-node02: error: *** JOB 12 ON node02 CANCELLED AT 2024-01-01T10:00:00 ***\n"
            "srun: error: task 2 launch failed: Unspecified error\n"
            "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n")
    got = sp.feed(text.encode())
    assert got["node03"] == ["srun: error: node03: task 1: Exited with exit code 1"]
    assert got["node04"] == ["slurmstepd: error: *** STEP 12.0 ON node04 CANCELLED AT 2024-01-01T10:00:00 ***",
                             "srun: error: task 2 launch failed: Unspecified error"]
    assert got["node02"][1].startswith("slurmstepd-node02:")
    assert got["slurm"] == ["srun: Job step aborted: Waiting up to 32 seconds for job step to finish."]


def test_srun_lines_without_names_go_to_the_slurm_stream() -> None:
    assert OutputSplitter().feed(b"srun: error: node03: task 1: Exited with exit code 1\n") == {
        "slurm": ["srun: error: node03: task 1: Exited with exit code 1"]}


def test_the_batch_shells_own_lines_go_to_the_first_node() -> None:
    sp = OutputSplitter(["a", "b"])
    assert sp.feed(b"starting on a\n0: x\n1: y\nall done\n") == {"a": ["starting on a", "x", "all done"], "b": ["y"]}
    # the header comes first in ddptui's scripts: what the shell says before it is still the first node's
    sp = OutputSplitter()
    assert sp.feed(("module load x\n" + HEAD + "1: y\n").encode()) == {"task0": ["module load x"], "node03": ["y"]}


def test_chunks_cut_anywhere_give_the_same_streams() -> None:
    text = (HEAD + "".join(f"{i % 3}: line {i} ünïcode\r\n" for i in range(200))
            + "srun: error: node03: task 1: Exited with exit code 1\n0: no newline at the end").encode()
    sp = OutputSplitter()
    whole = merged([sp.feed(text), sp.flush()])
    for size in (1, 2, 3, 7, 64, 1000):
        sp = OutputSplitter()
        parts = [sp.feed(text[i:i + size]) for i in range(0, len(text), size)] + [sp.flush()]
        assert merged(parts) == whole, size
    assert whole["node02"][-1] == "no newline at the end"
    assert whole["node02"][0] == "line 0 ünïcode"


def test_an_endless_line_is_cut_not_held(monkeypatch) -> None:
    import ddptui.core.slurm.output as out

    monkeypatch.setattr(out, "MAX_LINE", 100)
    sp = OutputSplitter()
    assert sp.feed(b"0: " + b"x" * 50) == {}
    assert sp.feed(b"x" * 100) == {"task0": ["x" * 150]}
    assert len(sp._tail) == 0


def test_sniffing(tmp_path: Path) -> None:
    a = tmp_path / "a.out"
    a.write_text(HEAD + "just the shell\n")
    b = tmp_path / "b.out"
    b.write_text("0: x\n1: y\nsrun: error: z\n")
    c = tmp_path / "c.log"
    c.write_text("I1201 10:22:24.832000 28323 api.py:912] x\n12:00: lunch\n0: one labeled line\n")
    assert looks_labeled(a) and looks_labeled(b)
    assert not looks_labeled(c) and not looks_labeled(tmp_path / "missing")


def test_a_million_lines_are_split_a_chunk_at_a_time(tmp_path: Path) -> None:
    """A batch output of hundreds of MB is read in chunks: no batch holds more than a chunk's lines,
    and every line reaches its node (how fast: bench, not here)."""
    p = tmp_path / "big.out"
    line = "I1201 10:22:24.832000 28323 torch/distributed/elastic/agent/server/api.py:912] some line\n"
    with open(p, "w") as f:
        f.write(HEAD)
        for _ in range(1000):
            f.write("".join(f"{i % 3}: {line}" for i in range(1000)))
    counts: dict[str, int] = {}
    biggest = 0
    for batch in split_file(p):
        biggest = max(biggest, sum(map(len, batch.values())))
        for node, lines in batch.items():
            counts[node] = counts.get(node, 0) + len(lines)
    assert counts == {"node02": 334000, "node03": 333000, "node04": 333000}
    assert biggest <= CHUNK // len(f"0: {line}") + 1 < 1_000_000  # never the whole file at once
