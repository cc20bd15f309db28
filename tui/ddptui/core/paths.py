"""Where ddptui keeps things on this machine (XDG folders through platformdirs)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import platformdirs

APP = "ddptui"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


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


def safe_name(s: str) -> str:
    """`s` as one file name: anything but letters, digits and `._-` made `_`, never empty."""
    return _SAFE.sub("_", s).strip("._") or "node"


def private_dir(path: Path) -> Path:
    """mkdir -p with each folder it creates 0700 (an existing one is left as it is)."""
    path = Path(path).expanduser()
    if not path.is_dir():
        private_dir(path.parent)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(path, 0o700)  # mkdir's mode passes through the umask
    return path
