"""The installed `ddptui`, in a real terminal (tmux): read the screen as a person would."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, ddptui_exe, needs_torch

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    def __init__(self, cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.name = f"ddptui-test-{uuid.uuid4().hex[:8]}"
        self.tmux = ["tmux", "-L", self.name]  # a server of its own: no other tmux user can end it under us
        envs = [f"{k}={v}" for k, v in env.items()]
        subprocess.run([*self.tmux, "new-session", "-d", "-s", self.name, "-x", "160", "-y", "45", "-c", str(cwd),
                        "env", *envs, *cmd], check=True)

    def screen(self) -> str:
        r = subprocess.run([*self.tmux, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True)
        return r.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def wait_for(self, pred, timeout: float, what: str) -> str:
        deadline = time.time() + timeout
        text = ""
        while time.time() < deadline:
            text = self.screen()
            if pred(text):
                return text
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n{text}")

    def alive(self) -> bool:
        return subprocess.run([*self.tmux, "has-session", "-t", self.name], capture_output=True).returncode == 0

    def kill(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


@pytest.fixture
def term_env(tmp_path: Path) -> dict[str, str]:
    return {"TERM": "xterm-256color", "DDPTUI_CONFIG_DIR": str(tmp_path / "cfg"),
            "DDPTUI_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "160", "LINES": "45"}


def test_picker_in_a_real_terminal(term_env: dict[str, str]) -> None:
    t = Tmux([ddptui_exe()], ROOT, term_env)
    try:
        text = t.wait_for(lambda s: "Pick a playbook" in s and "local-smoke" in s, 30, "the picker")
        assert "three-nodes" in text
        t.keys("q")
        t.wait_for(lambda s: not t.alive() or "Pick a playbook" not in s, 15, "ddptui to quit")
    finally:
        t.kill()


def test_keys_typed_ahead_in_the_picker_act_in_their_order(term_env: dict[str, str]) -> None:
    """down and enter in one write (typed ahead, or bundled by a slow ssh link) open the second
    playbook, not the one the cursor was on before the down."""
    t = Tmux([ddptui_exe()], ROOT, term_env)
    try:
        t.wait_for(lambda s: "Pick a playbook" in s and "three-nodes" in s, 30, "the picker")
        t.keys("Down", "Enter")
        text = t.wait_for(lambda s: "Pick a playbook" not in s and "launch-master" in s, 30, "a playbook screen")
        assert "ddptui — three-nodes" in text, text
    finally:
        t.kill()


@needs_torch
def test_local_playbook_runs_in_a_real_terminal(term_env: dict[str, str], tmp_path: Path) -> None:
    t = Tmux([ddptui_exe(), "playbooks/local-smoke.yaml", "--runs-dir", str(tmp_path / "runs")], ROOT, term_env)
    try:
        text = t.wait_for(lambda s: "launch-master" in s and "r Run" in s, 30, "the playbook screen")
        assert "local-smoke" in text and "pending" in text
        t.keys("a")
        text = t.wait_for(lambda s: s.count("all_reduce=ok") >= 2 or "failed" in s, 180, "both ranks' results")
        assert text.count("all_reduce=ok") >= 2, text
        t.wait_for(lambda s: "exited" in s, 60, "the node to exit")
        t.keys("q")
        deadline = time.time() + 15
        while t.alive() and time.time() < deadline:
            time.sleep(0.2)
        assert not t.alive()
    finally:
        t.kill()
