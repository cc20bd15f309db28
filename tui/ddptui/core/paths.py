"""Where ddptui keeps things on this machine (XDG folders through platformdirs)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "ddptui"


def config_dir() -> Path:
    return Path(os.environ.get("DDPTUI_CONFIG_DIR") or platformdirs.user_config_dir(APP))


def data_dir() -> Path:
    return Path(os.environ.get("DDPTUI_DATA_DIR") or platformdirs.user_data_dir(APP))


def default_runs_dir() -> Path:
    return data_dir() / "runs"


def user_playbooks_dir() -> Path:
    return config_dir() / "playbooks"


def examples_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "playbooks"


def cache_dir() -> Path:
    return Path(os.environ.get("DDPTUI_CACHE_DIR") or platformdirs.user_cache_dir(APP))


def clipboard_file() -> Path:
    """Where a copy is also written: many terminals ignore OSC 52, the file is always there."""
    return cache_dir() / "clipboard.txt"
