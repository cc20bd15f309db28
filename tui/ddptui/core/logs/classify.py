"""What a log line is (warning, error, result, ...) and which lines a pane filter keeps.

Pure Python, no UI: the panes colour lines by `line_kind` and filter them with `line_matches`;
anything else that wants to sort lines by severity (a report, the CLI) can use the same rules.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

# The kinds line_kind returns.
KINDS = ("warn", "error", "result", "command", "info", "plain")

# The pane filters, in the order they are cycled through; "rank N" filters follow for each local rank.
# CHATTER hides torchrun's own INFO lines (most of a healthy run's lines): it comes first after "all",
# and `h` goes straight to it. The other filters keep only lines that chatter never is.
CHATTER = "no launcher INFO"
FILTERS = ("all", CHATTER, "NCCL", "warnings+errors")
SEVERE_KINDS = ("warn", "error")  # what warnings+errors keeps


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
        return line_kind(line) in SEVERE_KINDS
    if flt.startswith("rank "):  # torchrun --tee prefixes each line with [default<local_rank>]:
        return line.startswith(f"[default{flt[5:]}]:")
    return True


# Every line `line_kind` calls a warning holds a "W"; an error holds one of these words or begins with
# glog's E or F (after torchrun's "[defaultN]:", if it has it). A pane's lines are joined once and
# those looked for in C, a "W" by memchr: only the lines that hold one reach `line_kind`. Line by line,
# 5,000 lines of NCCL INFO took 4.3 ms a pane, most of the `v` that chose this filter on 4 panes.
_ERROR_WORDS = ("rror", "Traceback", "FAILED", "exitcode", "Connection refused")
_LEVEL_E_F = re.compile(r"\n(?:\[[^\n]{0,13}?\]:)?[EF]")


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
        return _severe(lines if isinstance(lines, list) else list(lines))
    if flt.startswith("rank "):
        prefix = f"[default{flt[5:]}]:"
        return [x for x in lines if x.startswith(prefix)]
    return list(lines)


def _severe(lines: list[str]) -> list[str]:
    """The warnings and errors among `lines`, in order; the lines that may be one found in C."""
    text = "\n" + "\n".join(lines)
    if text.count("\n") != len(lines):  # a line holds a newline: one at a time
        return [x for x in lines if line_kind(x) in SEVERE_KINDS]
    find, rfind = text.find, text.rfind
    starts = {m.start() + 1 for m in _LEVEL_E_F.finditer(text)}
    for word in ("W", *_ERROR_WORDS):
        i = find(word)
        while i >= 0:
            starts.add(rfind("\n", 0, i) + 1)
            i = find("\n", i)
            if i >= 0:
                i = find(word, i)
    out = []
    for start in sorted(starts):
        end = find("\n", start)
        line = text[start:end] if end >= 0 else text[start:]
        if line_kind(line) in SEVERE_KINDS:
            out.append(line)
    return out


def newest_matching(lines: Sequence[str], flt: str, n: int, within: int | None = None) -> list[str]:
    """The newest `n` of `lines` that filter `flt` keeps, in order (a flood's tail: no need to test the
    rest); only among the last `within` lines, if given."""
    recent = reversed(lines) if within is None else itertools.islice(reversed(lines), within)
    if flt == "all":  # from the end: a pane's deque is not copied whole for its last lines
        return list(itertools.islice(recent, n))[::-1]
    if flt == "warnings+errors" or flt.startswith("rank "):  # few lines kept: all looked at in C
        return matching(lines if within is None else list(recent)[::-1], flt)[-n:]
    out = []
    for x in recent:
        if line_matches(x, flt):
            out.append(x)
            if len(out) == n:
                break
    out.reverse()
    return out
