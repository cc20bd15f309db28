"""The Redactor: hides secret values everywhere a run is handed on (bundles, reports, diffs).

It knows secrets three ways:
- by name: env values whose name looks secret (TOKEN, SECRET, PASSWORD, KEY, AUTH, ...) or is listed
  in the playbook's `redact:`; once known, a value is replaced wherever it appears, not only beside
  its name;
- by shape: AWS access keys, Hugging Face, GitHub, OpenAI/Slack tokens, JWTs, private-key blocks;
- by context: `NAME=value`, `NAME: value`, `--token VALUE` where NAME looks secret. Those values are
  learned too (`learn()` over every text first, then `text()`), so an `env` dump that reveals a
  token hides it in every other file as well.

Terminal escape sequences are stripped. `counts` says what was hidden where, never the value.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from typing import Any

import yaml

from .logs.lines import Chunk

SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "KEY", "CREDENTIAL", "AUTH",
                "COOKIE", "SESSION", "PRIVATE", "JWT", "SIGNATURE", "BEARER")
_SECRET_NAME = re.compile(r"(?:^|_|-)(?:" + "|".join(SECRET_WORDS) + r")S?(?:$|_|-)|APIKEY|ACCESSKEY|PASSWORD|TOKEN|SECRET",
                          re.I)
# Names the diagnosis needs to see, whose values are settings, not secrets (NCCL_IB_PKEY, ...).
SAFE_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "CUDA_", "DDPTUI_", "OMP_", "PYTORCH_")
SAFE_NAMES = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "XDG_SESSION_ID", "XDG_SESSION_TYPE",
                        "XDG_SESSION_CLASS", "DBUS_SESSION_BUS_ADDRESS", "SESSION_MANAGER", "KEYTIMEOUT",
                        "ACCEPT_NEW_HOST_KEYS"})  # ddptui's own flag, named in its messages
MIN_LEN = 4  # shorter values ("1", "on") are hidden beside their name only, never searched for
LEARN_MIN_LEN = 8  # a value found beside a secret-looking name in a text is searched for when this long

SHAPES: tuple[tuple[str, re.Pattern], ...] = (
    ("private-key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S)),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("hf-token", re.compile(r"\bhf_[A-Za-z0-9]{16,}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("api-key", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}")),
    ("ssh-key", re.compile(r"\b(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-nistp\d+) AAAA[A-Za-z0-9+/=]{20,}")),
    ("url-password", re.compile(r"(?<=://)[^/\s:@*]+:[^/\s@*]+(?=@)")),
)
# NAME=value, NAME: value, "NAME": "value", --name value / --name=value (NAME looks secret)
_ASSIGN = re.compile(r"""(?P<name>\b[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>["']?\s*[=:]\s*["']?)(?P<val>[^\s"',;}\]]+)""")
_ENV_ASSIGN = re.compile(r"(?P<name>\b[A-Za-z_][A-Za-z0-9_]*)(?P<sep>=[\"']?)(?P<val>[^\s\"']+)")
_FLAG = re.compile(r"(?P<name>--?[A-Za-z][A-Za-z0-9_-]*)(?P<sep>[= ])(?P<val>[^\s\"'-][^\s\"']*)")
_ANSI = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
PLACEHOLDER = "***REDACTED:{}***"


_BARE_PLACEHOLDER = re.compile(r"(?P<pre>(?:^|[:-])[ \t]+|[\[{,][ \t]*|^)(?P<ph>\*\*\*REDACTED:[^*\s]*\*\*\*)(?=[ \t]*(?:$|[,\]}#]))",
                               re.M)


def shape_of(value: str) -> str | None:
    """The kind of token a value looks like (aws-access-key, hf-token...), or None."""
    return next((what for what, rx in SHAPES if rx.search(value)), None)


def looks_secret(name: str) -> bool:
    n = name.strip("-").upper().replace("-", "_")
    if n in SAFE_NAMES or n.startswith(SAFE_PREFIXES):
        return False
    return bool(_SECRET_NAME.search(n))


def strip_escapes(s: str) -> str:
    return _ANSI.sub("", s) if ("\x1b" in s or any(ord(c) < 32 and c not in "\t\n" for c in s)) else s


class Redactor:
    def __init__(self, values: dict[str, str] | None = None, names: tuple[str, ...] | list[str] = ()) -> None:
        self.names = {n.upper() for n in names}  # always hidden, however innocent they look
        self.values: dict[str, str] = {}  # value -> the name it was known by
        self.short: set[str] = set()  # names whose value is too short to search for
        self.counts: Counter[tuple[str, str]] = Counter()  # (place, what) -> how many replaced
        self._rx: re.Pattern | None = None
        self._brx: re.Pattern | None = None  # the same, on bytes
        for k, v in (values or {}).items():
            if self.is_secret(k):
                self.hide(k, v)

    # ---- building ---------------------------------------------------------------------------
    @classmethod
    def from_playbook_text(cls, text: str, extra_names: tuple[str, ...] | list[str] = ()) -> Redactor:
        """From the YAML of a playbook (safe loader, tolerant of a playbook that no longer loads)."""
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            data = {}
        data = data if isinstance(data, dict) else {}
        names = [str(n) for n in (data.get("redact") or []) if isinstance(n, str)] if isinstance(
            data.get("redact"), list) else []
        r = cls(names=[*names, *extra_names])
        job = data.get("job") if isinstance(data.get("job"), dict) else {}
        envs = [job.get("env")] + [n.get("env") for n in (data.get("nodes") or []) if isinstance(n, dict)] \
            if isinstance(data.get("nodes"), list) else [job.get("env")]
        for env in envs:
            if isinstance(env, dict):
                for k, v in env.items():
                    if r.is_secret(str(k)) and v is not None:
                        r.hide(str(k), str(v))
        return r

    @classmethod
    def for_playbook(cls, pb: Any, login_env: dict[str, str] | None = None) -> Redactor:
        """What a run must never write or print in clear: the env values (job's and nodes') that are
        secret by name, by the playbook's `redact:` list, or by their shape (`MY_VAR=AKIA...`); and,
        when a node runs on this machine (the job inherits ddptui's environment), the login
        environment's secrets too; and any token-shaped text in the playbook (a shell step's line)."""
        r = cls(names=list(pb.redact))
        envs = [pb.job.env_dict(), *(dict(n.env) for n in pb.nodes)]
        if any(n.transport == "local" for n in pb.nodes):
            envs.append(dict(os.environ) if login_env is None else login_env)
        for env in envs:
            for k, v in env.items():
                if v is not None and (r.is_secret(str(k)) or shape_of(str(v))):
                    r.hide(str(k), str(v))
        source = getattr(pb, "source", "") or ""
        r.learn(source)  # `export API_TOKEN=...` on a shell step's command line
        for what, rx in SHAPES:  # a token written anywhere in the playbook is a value the run knows
            for m in rx.finditer(source):
                r.hide(what, m.group(0))
        return r

    def is_secret(self, name: str) -> bool:
        return name.upper() in self.names or looks_secret(name)

    def hide(self, name: str, value: str) -> None:
        value = value.strip()
        if not value or value.startswith("***"):
            return
        if len(value) < MIN_LEN:
            self.short.add(name)
            return
        if value not in self.values:
            self.values[value] = name
            self._rx = self._brx = None

    def learn(self, s: str) -> None:
        """Find `SECRET_NAME=value` pairs in a text, so that their values are hidden everywhere."""
        for rx in (_ENV_ASSIGN, _FLAG):  # not `name: value`: prose ("auth: failed") would teach it words
            for m in rx.finditer(s):
                if len(m["val"]) >= LEARN_MIN_LEN and not m["val"].startswith("/") and self.is_secret(m["name"]):
                    self.hide(m["name"].lstrip("-"), m["val"])

    def learn_obj(self, o: Any) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                if isinstance(v, (str, int, float)) and not isinstance(v, bool) and self.is_secret(str(k)):
                    if len(str(v)) >= LEARN_MIN_LEN:
                        self.hide(str(k), str(v))
                else:
                    self.learn_obj(v)
        elif isinstance(o, list):
            for v in o:
                self.learn_obj(v)
        elif isinstance(o, str):
            self.learn(o)

    # ---- redacting --------------------------------------------------------------------------
    def _values_rx(self) -> re.Pattern:
        rx = self._rx
        if rx is None:
            alts = sorted(self.values, key=len, reverse=True)
            rx = self._rx = re.compile("|".join(re.escape(v) for v in alts))
        return rx

    def _by_values(self, s: str, place: str) -> str:
        def by_value(m: re.Match) -> str:
            name = self.values[m.group(0)]
            self.counts[(place, name)] += 1
            return PLACEHOLDER.format(name)

        return self._values_rx().sub(by_value, s)

    def lines(self, lines: list[str], place: str = "log") -> list[str]:
        """The hot path (a node's output, batch by batch): the known values only, one search over
        the whole batch, and the very same list back when nothing is known or nothing matched."""
        if not self.values or not self._values_rx().search("\n".join(lines)):
            return lines
        return [self._by_values(line, place) for line in lines]

    def chunk(self, c: Chunk, place: str = "log") -> Chunk:
        """`lines` for a reader's batch as bytes: one search of its bytes, the same Chunk back when
        nothing is known or nothing matched (nearly always)."""
        if not self.values:
            return c
        rx = self._brx
        if rx is None:
            rx = self._brx = re.compile(self._values_rx().pattern.encode())
        if not rx.search(c.data):
            return c
        return Chunk.of_lines(self._by_values(line, place) for line in c)

    def yaml_text(self, s: str, place: str = "playbook") -> str:
        """A playbook with its secret values hidden that still loads: bare placeholders are quoted
        (a bare `*...` would be a YAML alias)."""
        return _BARE_PLACEHOLDER.sub(lambda m: f"{m['pre']}'{m['ph']}'", self.text(s, place))

    def text(self, s: str, place: str = "text") -> str:
        s = strip_escapes(s)
        if self.values:
            s = self._by_values(s, place)
        for what, rx in SHAPES:
            def by_shape(m: re.Match, what: str = what) -> str:
                self.counts[(place, what)] += 1
                return PLACEHOLDER.format(what)

            s = rx.sub(by_shape, s)
        for rx in (_ASSIGN, _FLAG):
            s = rx.sub(lambda m: self._by_name(m, place), s)
        return s

    def _by_name(self, m: re.Match, place: str) -> str:
        name = m["name"].lstrip("-")
        if not self.is_secret(name) or m["val"].startswith("***"):
            return m.group(0)
        self.counts[(place, name)] += 1
        return f"{m['name']}{m['sep']}{PLACEHOLDER.format(name)}"

    def obj(self, o: Any, place: str = "json") -> Any:
        """A copy of a JSON value with every string redacted, and secret-named keys' values hidden."""
        if isinstance(o, dict):
            out = {}
            for k, v in o.items():
                if self.is_secret(str(k)) and isinstance(v, (str, int, float)) and not isinstance(v, bool):
                    self.counts[(place, str(k))] += 1
                    out[k] = PLACEHOLDER.format(k)
                else:
                    out[k] = self.obj(v, place)
            return out
        if isinstance(o, list):
            return [self.obj(v, place) for v in o]
        if isinstance(o, str):
            return self.text(o, place)
        return o

    # ---- checking ---------------------------------------------------------------------------
    def leaks(self, data: bytes) -> list[str]:
        """What is still there that must not be: the names of known values, the kinds of shapes."""
        found = []
        for value, name in self.values.items():
            forms = {value.encode(), json.dumps(value)[1:-1].encode()}
            if any(f in data for f in forms):
                found.append(name)
        text = data.decode("utf-8", "replace")
        for what, rx in SHAPES:
            if rx.search(text):
                found.append(what)
        return sorted(set(found))

    def summary(self) -> dict[str, Any]:
        """For the manifest: how many values were hidden, where and under which name; never a value."""
        places: dict[str, dict[str, int]] = {}
        for (place, what), n in sorted(self.counts.items()):
            places.setdefault(place, {})[what] = n
        return {"known_values": len(self.values), "names": sorted(set(self.values.values()) | self.short),
                "too_short_to_search": sorted(self.short), "replaced": sum(self.counts.values()),
                "by_place": places, "placeholder": PLACEHOLDER.format("NAME"),
                "escape_sequences": "stripped"}
