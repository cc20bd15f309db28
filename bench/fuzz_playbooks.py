"""Fuzz `ddptui validate` with generated playbooks and count how each one ended.

    .venv/bin/python -m bench.fuzz_playbooks                    # 12,000 examples, a few minutes
    .venv/bin/python -m bench.fuzz_playbooks --examples 500 --strict --mem-mb 1024

The grammar is tests/core/playbook_grammar.py. Every example must end in exit 0 or in exit 2 with
`path:line:col: message`; anything else (an exception out of main, exit 1, a refusal with no
position) is a failure: counted, and its playbook saved under --keep. With --strict the first failure
stops the run, hypothesis shrinks it and prints the smallest playbook that still fails (this is what
tests/core/test_playbook_fuzz.py runs). --mem-mb caps the address space (RLIMIT_AS): a playbook that
makes the loader allocate without bound dies as a MemoryError, which counts as a failure.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOOD = ("ok", "refused")


def run(examples: int, strict: bool, seed: int | None, keep: Path | None) -> tuple[Counter, list[tuple[str, str, str]]]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seed_of

    from tests.core.playbook_grammar import playbooks, tally, validate

    counts: Counter = Counter()
    bad: list[tuple[str, str, str]] = []
    tmp = Path(tempfile.mkdtemp(prefix="ddptui-fuzz-"))

    @settings(max_examples=examples, deadline=None, database=None, print_blob=True,
              phases=[Phase.generate, Phase.shrink] if strict else [Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(playbooks())
    def one(text: str) -> None:
        outcome, detail = validate(tmp / "pb.yaml", text)
        tally(counts, outcome, detail)
        if outcome not in GOOD:
            bad.append((outcome, text, detail))
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                (keep / f"{len(bad):05d}-{outcome}.yaml").write_bytes(text.encode("utf-8", "surrogatepass"))
            assert not strict, f"{outcome}: {detail}"

    (seed_of(seed)(one) if seed is not None else one)()
    return counts, bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=12_000)
    ap.add_argument("--strict", action="store_true", help="stop at the first failure and shrink it")
    ap.add_argument("--seed", type=int, help="hypothesis seed (default: random)")
    ap.add_argument("--mem-mb", type=int, default=2048, help="address-space cap in MiB (0: none)")
    ap.add_argument("--keep", type=Path, help="save each failing playbook here")
    args = ap.parse_args()
    if args.mem_mb:
        limit = args.mem_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.setrecursionlimit(1000)  # the interpreter's default: what a user's ddptui runs with
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    t0 = time.monotonic()
    counts, bad = run(args.examples, args.strict, args.seed, args.keep)
    took = time.monotonic() - t0
    total = sum(v for k, v in counts.items() if not k.startswith(" "))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{total} playbooks in {took:.1f} s ({total / max(took, 1e-9):.0f}/s), peak RSS {peak:.0f} MiB")
    for k, v in sorted(counts.items(), key=lambda kv: (kv[0].startswith(" "), -kv[1])):
        print(f"{v:7d}  {k}")
    for outcome, text, detail in bad[:5]:
        print(f"--- {outcome}\n{text[:500]!r}\n{detail[-1500:]}")
    print(f"failures: {len(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
