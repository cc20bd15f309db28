"""The cross rule of the global ranks Lightning's processes claim (facts.CLAIM, a node's `claims`):
a rank claimed twice before the whole world came is a duplicate-rank."""

from __future__ import annotations

Seen = dict  # (node, global rank) -> ((rank, world size, times claimed there), line, text)


def _counts(seen: Seen) -> tuple[dict[int, int], int]:
    """The claims facts of every node: how many processes claimed each global rank, and the world size."""
    counts: dict[int, int] = {}
    world = 0
    for (rank, size, times), *_ in seen.values():
        counts[rank] = counts.get(rank, 0) + times
        world = max(world, size)
    return counts, world


def claimed_twice(seen: Seen) -> bool:
    """A global rank claimed by two processes, while fewer ranks than the world came: every node
    computed the same ranks (Lightning under srun with one task a node starts its own processes on
    each node as if it were the first: Lightning-AI/pytorch-lightning#4389). A job whose whole world
    came and that claims its ranks again ran twice (a second `srun python ...`, a requeue into the
    same output): no duplicate."""
    counts, world = _counts(seen)
    return len(counts) < world and any(c > 1 for c in counts.values())


def summary(seen: Seen) -> str:
    counts, world = _counts(seen)
    twice = sorted(r for r, c in counts.items() if c > 1)
    shown = ", ".join(map(str, twice[:8])) + (", ..." if len(twice) > 8 else "")
    return (f"GLOBAL_RANK {shown} claimed by more than one process; {len(counts)} of {world} ranks came: the "
            "nodes computed the same ranks")


def cited(seen: Seen) -> Seen:
    """The claims of the ranks claimed twice: at most 8 lines."""
    counts, _ = _counts(seen)
    return dict(sorted((k, v) for k, v in seen.items() if counts[v[0][0]] > 1)[:8])
