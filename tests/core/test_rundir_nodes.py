"""A run's folder takes each node's batches under that node's own lock: one node's write (a slow
disk, a full pipe of a big batch) never holds up another node's reader, and every node's log and
times stay in its own order when all of them write at once."""

from __future__ import annotations

import threading

from ddptui.core.logs.lines import Chunk
from ddptui.core.logs.rundir import RunDir


class _Stuck:
    """A node's log file whose next write waits until the test lets it go."""

    def __init__(self, f) -> None:
        self.f, self.entered, self.go = f, threading.Event(), threading.Event()

    def write(self, b) -> int:
        self.entered.set()
        self.go.wait(30)
        return self.f.write(b)

    def __getattr__(self, name):
        return getattr(self.f, name)


def test_a_node_whose_write_is_stuck_does_not_hold_up_the_others(tmp_path) -> None:
    rd = RunDir(tmp_path, "nodes", "name: nodes\n")
    rd.append_chunk("a", Chunk.of_lines(["a1"]))
    stuck = rd._logs["a"] = _Stuck(rd._logs["a"])
    slow = threading.Thread(target=rd.append_chunk, args=("a", Chunk.of_lines(["a2"])))
    slow.start()
    assert stuck.entered.wait(10)
    other = threading.Thread(target=rd.append_chunk, args=("b", Chunk.of_lines(["b1", "b2"])))
    other.start()
    other.join(10)
    done_while_stuck = not other.is_alive()
    stuck.go.set()
    slow.join(10)
    other.join(10)
    assert done_while_stuck  # b's lines reached its log while a's write was still waiting
    rd.close(["a", "b"])
    assert rd.log_path("a").read_text() == "a1\na2\n" and rd.log_path("b").read_text() == "b1\nb2\n"


def test_nodes_writing_at_once_keep_their_own_order(tmp_path) -> None:
    rd = RunDir(tmp_path, "nodes", "name: nodes\n")
    batches, size = 50, 20

    def node(name: str) -> None:
        for b in range(batches):
            first = rd.append_chunk(name, Chunk.of_lines([f"{name} {b * size + k + 1}" for k in range(size)]))
            assert first == b * size + 1

    threads = [threading.Thread(target=node, args=(f"n{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rd.close([f"n{i}" for i in range(4)])
    for i in range(4):
        assert rd.log_path(f"n{i}").read_text().splitlines() == [f"n{i} {k}" for k in range(1, batches * size + 1)]
        times = [line.split()[:2] for line in rd.times_path(f"n{i}").read_text().splitlines()]
        assert times == [[str(b * size + 1), str(size)] for b in range(batches)]
