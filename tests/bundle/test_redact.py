"""The Redactor on its own: names, the playbook's redact: list, token shapes, learned values, escapes."""

from __future__ import annotations

import pytest

from ddptui.core.errors import PlaybookError
from ddptui.core.playbook.loader import parse_playbook
from ddptui.core.redact import Redactor, looks_secret

BASE = "name: x\nnodes: a\njob: {script: builtin:smoke}\n"


@pytest.mark.parametrize("name", ["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "passwd", "API_KEY",
                                  "GITHUB_TOKEN", "SESSION_ID", "MY_COOKIE", "AUTH_HEADER", "GCP_CREDENTIALS"])
def test_secret_names(name: str) -> None:
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["NCCL_IB_PKEY", "MASTER_ADDR", "PATH", "HOME", "PWD", "SSH_AUTH_SOCK",
                                  "KEYBOARD", "BYPASS", "NCCL_DEBUG", "SSL_CERT_DIR"])
def test_setting_names_stay_visible(name: str) -> None:
    assert not looks_secret(name)


def test_values_are_hidden_everywhere_shapes_too_and_escapes_go() -> None:
    r = Redactor.from_playbook_text(BASE.replace("{script: builtin:smoke}", "{script: s.py, env: "
                                                 "{HF_TOKEN: hf_abcdefghijklmnopqrst, MY_VAR: blue-7, X: 1}}")
                                    + "redact: [MY_VAR]\n")
    text = ("\x1b[31mred\x1b[0m \x1b]0;title\x07 my var is blue-7 and hf_abcdefghijklmnopqrst; "
            "x AKIAIOSFODNN7EXAMPLE ghp_aaaaaaaaaaaaaaaaaaaaaaaa sk-abcdefghijklmnopqrstu "
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl https://bob:pw1234@host/x")
    out = r.text(text, "log")
    for secret in ("blue-7", "hf_abc", "AKIA", "ghp_", "sk-abc", "eyJ", "pw1234", "\x1b"):
        assert secret not in out, (secret, out)
    assert out.startswith("red  my var is ***REDACTED:MY_VAR*** and ***REDACTED:HF_TOKEN***")
    s = r.summary()
    assert s["by_place"]["log"]["MY_VAR"] == 1 and s["by_place"]["log"]["aws-access-key"] == 1
    assert "blue-7" not in repr(s) and "hf_abc" not in repr(s)


def test_a_value_seen_beside_a_secret_name_is_learned_and_hidden_elsewhere() -> None:
    r = Redactor()
    env_dump = "PATH=/usr/bin\nMY_SERVICE_TOKEN=s3cr3t-v4lue-x\nNCCL_IB_PKEY=0x8001\n"
    r.learn(env_dump)
    assert r.text("connecting with s3cr3t-v4lue-x now") == "connecting with ***REDACTED:MY_SERVICE_TOKEN*** now"
    assert "NCCL_IB_PKEY=0x8001" in r.text(env_dump) and "PATH=/usr/bin" in r.text(env_dump)
    r.learn("auth: failed")  # prose does not teach it words
    assert r.text("the job failed") == "the job failed"


def test_short_values_are_hidden_beside_their_name_only() -> None:
    r = Redactor({"API_KEY": "abc"})
    assert r.text("API_KEY=abc and abc") == "API_KEY=***REDACTED:API_KEY*** and abc"
    assert r.summary()["too_short_to_search"] == ["API_KEY"]


def test_obj_hides_secret_keys_and_strings() -> None:
    r = Redactor({"HF_TOKEN": "hf_abcdefghijklmnopqrst"})
    out = r.obj({"env": {"HF_TOKEN": "x1", "NCCL_DEBUG": "INFO"}, "lines": ["got hf_abcdefghijklmnopqrst"]})
    assert out == {"env": {"HF_TOKEN": "***REDACTED:HF_TOKEN***", "NCCL_DEBUG": "INFO"},
                   "lines": ["got ***REDACTED:HF_TOKEN***"]}


def test_leaks_finds_known_values_and_shapes() -> None:
    r = Redactor({"HF_TOKEN": "hf_abcdefghijklmnopqrst"})
    assert r.leaks(b"nothing here") == []
    assert r.leaks(b"a hf_abcdefghijklmnopqrst") == ["HF_TOKEN", "hf-token"]
    assert r.leaks(b"key AKIAIOSFODNN7EXAMPLE") == ["aws-access-key"]
    assert r.leaks(r.text("a hf_abcdefghijklmnopqrst AKIAIOSFODNN7EXAMPLE").encode()) == []


def test_playbook_redact_key_is_a_list_of_env_names() -> None:
    assert parse_playbook(BASE + "redact: [MY_VAR, OTHER]\n").redact == ("MY_VAR", "OTHER")
    assert parse_playbook(BASE).redact == ()
    with pytest.raises(PlaybookError) as e:
        parse_playbook(BASE + "redact: MY_VAR\n")
    assert e.value.problems[0].render().startswith("<playbook>:4:9: redact must be a list")
    with pytest.raises(PlaybookError) as e:
        parse_playbook(BASE + "redact: [1bad, ok]\n")
    assert e.value.problems[0].location() == "<playbook>:4:10"
    assert "'1bad' in redact is not an environment variable name" in e.value.problems[0].message


def test_bundle_modules_stay_out_of_the_tui_and_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, ddptui.core.bundle.pack, ddptui.core.bundle.report, ddptui.core.bundle.diff, "
            "ddptui.core.bundle.rediagnose, ddptui.core.bundle.scrub, ddptui.cli_bundle\n"
            "print(' '.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert not {m for m in loaded if m.split(".")[0] in ("textual", "rich", "torch")}
