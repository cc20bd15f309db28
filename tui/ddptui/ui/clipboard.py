"""Copying: OSC 52 (Textual's copy_to_clipboard), and the same text in a file, because many
terminals (VTE ones, tmux without set-clipboard, most over SSH) ignore OSC 52 without a word."""

from __future__ import annotations

from pathlib import Path

from textual.app import App

from ..core.paths import clipboard_file, tilde


def copy_out(app: App, text: str, what: str) -> Path | None:
    """Put `text` on the clipboard and in the clipboard file; the notification names the file."""
    app.copy_to_clipboard(text)
    path = clipboard_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    except OSError as e:
        app.notify(f"copied {what} (OSC 52); could not write {path}: {e.strerror}", severity="warning")
        return None
    app.notify(f"copied {what}; also in {tilde(path)}", timeout=6)
    return path
