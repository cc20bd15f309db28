"""What a log line is (warning, error, result, ...) and which lines a pane filter keeps.

Pure Python, no UI: the panes colour lines by `line_kind` and filter them with `line_matches`;
anything else that wants to sort lines by severity (a report, the CLI) can use the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# The kinds line_kind returns.
KINDS = ("warn", "error", "result", "command", "info", "plain")

# The pane filters, in the order they are cycled through; "rank N" filters follow for each local rank.
# CHATTER hides torchrun's own INFO lines (most of a healthy run's lines): it comes first after "all",
# and `h` goes straight to it. The other filters keep only lines that chatter never is.
CHATTER = "no launcher INFO"
FILTERS = ("all", CHATTER, "NCCL", "warnings+errors")


def line_kind(s: str) -> str:
    """warn, error, result, command, info or plain: what a log line is, for colours and filters."""
    if s.startswith("[") and "]:" in s[:16]:  # torchrun's --tee prefix: [default0]:W1201 ...
        s = s[s.index("]:") + 2:]
    level = s[0] if len(s) > 5 and s[0] in "IWEF" and s[1:5].isdigit() else ""  # glog: I1201 (any month: I0101)
    if "NCCL WARN" in s or "Warning" in s or " WARN " in s or level == "W" or "] W" in s[:20]:
        return "warn"
    if ("Error" in s or "Traceback" in s or "FAILED" in s or "exitcode" in s or "error:" in s
            or level in ("E", "F") or "Connection refused" in s):
        return "error"
    if "ddptui-smoke result" in s or "ddptui-smoke bandwidth" in s:
        return "result"
    if s.startswith("$ "):
        return "command"
    if "NCCL INFO" in s or level == "I":
        return "info"
    return "plain"


# glog's prefix on torch's C++ and torchrun's Python log lines:
# I1201 13:37:48.503000 31418 /venv/.../torch/distributed/elastic/agent/server/api.py:254] message
_GLOG = re.compile(r"^(\[\w+\]:)?([IWEF]\d{4}) (\d\d:\d\d:\d\d)\.\d+ +\d+ (?:\S*/)?([^/\s]+/[^/\s]+?)(?:\.py|\.cpp)?:\d+\] ")


def fold(line: str) -> str:
    """A torch/torchrun log line with its prefix folded to level, time and source, for a pane:
    `I1201 13:37:48 server/api] message`. Other lines, and the file on disk, are left as they are."""
    if line[:1] not in "IWEF[" or "] " not in line:
        return line
    m = _GLOG.match(line)
    if m is None:
        return line
    return f"{m.group(1) or ''}{m.group(2)} {m.group(3)} {m.group(4)}] {line[m.end():]}"


# torchrun's agent logging with glog's prefix, from its own modules (not the job's ranks' lines, which
# --tee prefixes with [defaultN]: and torch's C++ writes as [I1201 ... file.cpp:N]).
_LAUNCHER = re.compile(r"^I\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S*torch/distributed/(?:elastic/|run\.py|launcher/)")


def is_launcher_chatter(line: str) -> bool:
    """torchrun's own INFO line (`I1201 13:37:48.503000 31418 .../torch/distributed/elastic/...] ...`):
    rendezvous results, worker group starts. One that reports a failure (FAILED, exitcode) is not chatter."""
    return line[:1] == "I" and _LAUNCHER.match(line) is not None and line_kind(line) == "info"


def filter_cycle(nproc_per_node: int) -> list[str]:
    """Every filter, in cycle order: all, no launcher INFO, NCCL, warnings+errors, then one per local rank."""
    return list(FILTERS) + [f"rank {r}" for r in range(nproc_per_node)]


def line_matches(line: str, flt: str) -> bool:
    """Whether a pane showing filter `flt` keeps this line."""
    if flt == "all":
        return True
    if flt == CHATTER:
        return not is_launcher_chatter(line)
    if flt == "NCCL":
        return "NCCL" in line
    if flt == "warnings+errors":
        return line_kind(line) in ("warn", "error")
    if flt.startswith("rank "):  # torchrun --tee prefixes each line with [default<local_rank>]:
        return line.startswith(f"[default{flt[5:]}]:")
    return True



def matching(lines: Iterable[str], flt: str) -> list[str]:
    """The lines that a pane showing filter `flt` keeps, in order: `line_matches` over many lines (a
    pane's 5,000 when the user changes its filter), the filter chosen once rather than per line."""
    if flt == "all":
        return list(lines)
    if flt == CHATTER:
        return [x for x in lines if x[:1] != "I" or not is_launcher_chatter(x)]
    if flt == "NCCL":
        return [x for x in lines if "NCCL" in x]
    if flt == "warnings+errors":
        return [x for x in lines if line_kind(x) in ("warn", "error")]
    if flt.startswith("rank "):
        prefix = f"[default{flt[5:]}]:"
        return [x for x in lines if x.startswith(prefix)]
    return list(lines)
