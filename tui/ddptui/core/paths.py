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


def tilde(p: str | Path) -> str:
    """A path as one types it: under the home folder as ~/..., else whole."""
    try:
        return "~/" + str(Path(p).relative_to(Path.home()))
    except ValueError:
        return str(p)


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


def refuse_to_write(out: Path, *, inputs: tuple[Path, ...] = (), inside: Path | None = None) -> str | None:
    """Why writing `out` would lose something (None: it would not): what is there is not a regular
    file (a device, a pipe, a folder: `-o /dev/null` as root replaced the device), it is one of the
    command's own `inputs`, or it is inside the folder `inside` that the command reads."""
    out = Path(out)
    try:
        st = out.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:
        return f"{out}: cannot look at it: {e.strerror or e}"
    if st is not None and not os.path.isfile(out):
        return f"{out}: is not a regular file (a folder, a device or a pipe); give a file name"
    real = out.resolve()
    for p in inputs:
        if real == Path(p).resolve():
            return f"{out}: is the input {p} itself; give another file name"
    if inside is not None and Path(inside).resolve() in real.parents:
        return f"{out}: is inside {inside}, which this command reads; give a file name elsewhere"
    return None


def write_private(out: Path, data: bytes) -> None:
    """`data` as `out`, readable by its owner only, all or nothing: written whole to a file beside
    it, then renamed over it (a full disk or a file-size limit leaves `out` as it was)."""
    import tempfile

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}-", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
