"""What the cluster benchmarks share: bring up N namespace nodes (or say why not), and tear them down."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.cluster.netns import Cluster, NodeOpts, down, missing_requirements, up

NAMES = [f"node{i:02d}" for i in range(2, 10)]  # 8 nodes


@contextmanager
def namespace_cluster(names: list[str] = NAMES, also_needs: str | None = None) -> Iterator[Cluster | None]:
    """The cluster, or None (after printing why) when this machine cannot run it."""
    why = missing_requirements() or also_needs
    if why:
        print(f"skipped: {why}")
        yield None
        return
    os.environ.pop("SSH_AUTH_SOCK", None)  # only the cluster's key counts
    cl = up([NodeOpts(n) for n in names])
    try:
        yield cl
    finally:
        down(cl)


def on_cluster(names: list[str], measure: Callable[[Cluster, list[str], int], None], reps: int,
               also_needs: str | None = None) -> int:
    """A cluster bench's main: `measure(cluster, names, reps)` on the nodes brought up for it (the
    test suite calls `measure` on its own cluster)."""
    with namespace_cluster(names, also_needs) as cl:
        if cl is not None:
            measure(cl, names, reps)
    return 0
