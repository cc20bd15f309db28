"""What a log line is (warning, error, result, ...) and which lines a pane filter keeps.

Pure Python, no UI: the panes colour lines by `line_kind` and filter them with `line_matches`;
anything else that wants to sort lines by severity (a report, the CLI) can use the same rules.
"""

from __future__ import annotations

# The kinds line_kind returns.
KINDS = ("warn", "error", "result", "command", "info", "plain")

# The pane filters, in the order they are cycled through; "rank N" filters follow for each local rank.
FILTERS = ("all", "NCCL", "warnings+errors")


def line_kind(s: str) -> str:
    """warn, error, result, command, info or plain: what a log line is, for colours and filters."""
    if "NCCL WARN" in s or "Warning" in s or " WARN " in s or s.startswith("W1") or "] W" in s[:20]:
        return "warn"
    if ("Error" in s or "Traceback" in s or "FAILED" in s or "exitcode" in s or "error:" in s
            or s.startswith("E1") or "Connection refused" in s):
        return "error"
    if "ddptui-smoke result" in s:
        return "result"
    if s.startswith("$ "):
        return "command"
    if "NCCL INFO" in s or s.startswith("I1"):
        return "info"
    return "plain"


def filter_cycle(nproc_per_node: int) -> list[str]:
    """Every filter, in cycle order: all, NCCL, warnings+errors, then one per local rank."""
    return list(FILTERS) + [f"rank {r}" for r in range(nproc_per_node)]


def line_matches(line: str, flt: str) -> bool:
    """Whether a pane showing filter `flt` keeps this line."""
    if flt == "all":
        return True
    if flt == "NCCL":
        return "NCCL" in line
    if flt == "warnings+errors":
        return line_kind(line) in ("warn", "error")
    if flt.startswith("rank "):  # torchrun --tee prefixes each line with [default<local_rank>]:
        return line.startswith(f"[default{flt[5:]}]:")
    return True
