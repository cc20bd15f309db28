"""The ddptui Textual app: a thin layer over core.runbook and its events."""

from __future__ import annotations

import sys
import threading
from concurrent.futures import CancelledError
from functools import partial
from pathlib import Path
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.driver import Driver
from textual.message import Message
from textual.screen import ModalScreen, Screen

from ..core.paths import examples_dir, user_playbooks_dir
from ..core.transport.settings import SSHSettings
from .input_first import InputFirst
from .screens.picker import PickerScreen

# Start-up: only what the first screen (the picker) needs is imported here; the playbook screen
# (the runbook, the diagnosis, the checks), the bundle reader, the dialogs and the playbook loader
# (ruamel, yaml) are imported where they are first used (bench/startup.py measures it).
if TYPE_CHECKING:
    from ..core.bundle.read import Bundle
    from ..core.slurm.attach import Attachment
    from .screens.playbook import PlaybookScreen

T = TypeVar("T")


def _playbook_screens(screens: Iterable[Screen]) -> list[PlaybookScreen]:
    """The playbook screens among `screens` (none while their module was never imported)."""
    mod = sys.modules.get("ddptui.ui.screens.playbook")
    return [s for s in screens if mod is not None and isinstance(s, mod.PlaybookScreen)]


class DdptuiApp(App):
    CSS_PATH = "ddptui.tcss"
    # the screen gets -narrow below 120 columns (the step list becomes a rail), -wide from there;
    # -cramped below 80: what -narrow does, with a rail of icons and names (the state column is the icon's word)
    HORIZONTAL_BREAKPOINTS = [(0, "-cramped"), (80, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-tiny"), (26, "-short"), (40, "-tall")]  # dialogs scroll their body sooner
    TITLE = "ddptui"
    BINDINGS = [Binding("question_mark", "help", "Keys", tooltip="Keys: every key of this screen, and what it does")]

    def __init__(self, playbook: Path | None = None, runs_dir: Path | None = None,
                 ssh_settings: SSHSettings | None = None, start_step: str | None = None,
                 search_dirs: list[tuple[str, Path]] | None = None, run_all: bool = False,
                 bundle: Bundle | None = None, attach: tuple[Attachment, list[str]] | None = None) -> None:
        super().__init__()
        self.playbook_path = playbook
        self.runs_dir = runs_dir or Path("runs")
        self.ssh_settings = ssh_settings or SSHSettings()
        self.ssh_settings.confirm_host_key = self._confirm_host_key
        self.ssh_settings.ask_passphrase = self._ask_passphrase
        self.start_step = start_step
        self.search_dirs = search_dirs
        self.run_all = run_all
        self.bundle = bundle  # a recorded run to show read-only (`ddptui open`), instead of a playbook
        self.attach = attach  # a Slurm job to follow read-only (`ddptui attach`): its attachment and nodes
        self.left_running: dict[str, dict] = {}  # node -> {pid, pgid, log}, printed after the TUI closes
        self.input_first = InputFirst()  # the nodes' readers wait while a key is answered (bridge.py)

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this terminal, which also holds the readers as soon as its input
        thread has read a key (bridge.InputFirst): before the key waits its turn on the UI thread."""
        base = super().get_driver_class()

        class InputFirstDriver(base):  # type: ignore[valid-type,misc]
            def process_message(self, message: Message) -> None:  # Textual's input thread
                if type(message) is events.Key:
                    self._app.input_first.hold()
                super().process_message(message)

        return InputFirstDriver

    def post_message(self, message: Message) -> bool:
        """A key that did not come through that driver (a test's Pilot) holds the readers as it
        enters the app's queue (a key that did holds them again, which changes nothing)."""
        if type(message) is events.Key:
            self.input_first.hold()
        return super().post_message(message)

    async def on_event(self, event: events.Event) -> None:
        """A key as it comes in: Textual hands it to the focused widget. One that a widget keeps (a
        character typed into an input) never reaches `on_key`: the readers go on once the screen
        shows it. One the widgets pass on comes back to the app for its bindings (`post_message`
        holds the readers again on the way, `on_key` releases them)."""
        arriving = type(event) is events.Key and not event.is_forwarded  # forwarding marks it
        await super().on_event(event)
        if arriving:
            self.call_after_refresh(self._key_kept, event)

    def _key_kept(self, event: events.Key) -> None:
        # Message.stop() sets it (Textual 8.2.8, pinned; test_input_first types into the find box)
        if event._stop_propagation:
            self.input_first.release()

    def on_key(self, event: events.Key) -> None:
        """The key has come through the focused widgets; App._on_key (its bindings, the action)
        runs next: the readers go on once what it changed is drawn."""
        self.call_after_refresh(self.input_first.release)

    def on_mount(self) -> None:
        self.input_first.ui_thread = threading.get_ident()
        if self.bundle is not None:
            self.open_bundle(self.bundle)
        elif self.attach is not None:
            from .screens.attach import AttachScreen

            self.push_screen(AttachScreen(*self.attach, self.runs_dir))

    def get_default_screen(self) -> Screen:
        """The first screen itself: the playbook's (or its problems) when one is given, else the
        picker (pushed over Textual's blank default screen, the first frame cost a screen more)."""
        if self.bundle is not None or self.attach is not None:
            return super().get_default_screen()
        if self.playbook_path is not None:
            return self.playbook_screen(self.playbook_path, start_step=self.start_step, run_all=self.run_all)
        dirs = self.search_dirs or [("here", Path.cwd() / "playbooks"), ("config", user_playbooks_dir()),
                                    ("examples", examples_dir())]
        from ..core.playbook.loader import discover_playbooks

        return PickerScreen(discover_playbooks(dirs))

    def open_playbook(self, path: Path, start_step: str | None = None, run_all: bool = False) -> None:
        self.push_screen(self.playbook_screen(path, start_step, run_all))

    def playbook_screen(self, path: Path, start_step: str | None = None, run_all: bool = False) -> Screen:
        """The playbook's screen, or the problems screen that says why it cannot be read."""
        from ..core.errors import PlaybookError
        from ..core.playbook.loader import load_playbook
        from ..core.transport.factory import make_factory
        from .screens.playbook import PlaybookScreen
        from .screens.problems import ProblemsScreen

        try:
            pb = load_playbook(path)
        except PlaybookError as e:
            return ProblemsScreen(e)
        if start_step and start_step not in [s.id for s in pb.steps]:
            self.call_later(self.notify, f"no step {start_step!r} in {pb.name}", severity="error")
            start_step = None
        return PlaybookScreen(pb, self.runs_dir, make_factory(self.ssh_settings), start_step, run_all)

    def open_bundle(self, b: Bundle, folder: Path | None = None) -> None:
        """A recorded run, read-only; its playbook is parsed for viewing only (nothing of it runs)."""
        from ..core.bundle.view import viewing_playbook
        from .screens.bundle import BundleScreen

        folder = folder or Path.cwd()
        pb, note = viewing_playbook(b, folder)
        self.push_screen(BundleScreen(b, pb, note, folder))

    # ---- `?` and the command palette: both made from the screen's bindings -------------------
    def action_help(self) -> None:
        from .dialogs.help import HelpDialog
        from .keys import screen_keys

        if isinstance(self.screen, HelpDialog):
            self.screen.dismiss(None)
            return
        self.push_screen(HelpDialog(self.sub_title or self.title, screen_keys(self.screen)))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from .keys import node_keys

        yield from super().get_system_commands(screen)
        for k in node_keys(screen, only_shown=False):  # every action the screen has a key for
            if k.owner is screen and k.advertised:
                title, _, more = k.description.partition(": ")
                yield SystemCommand(title, f"{more} · key {k.key}" if more else f"key {k.key}",
                                    partial(screen.run_action, k.action))

    # ---- quitting with a job running asks first ---------------------------------------------
    def _running_screen(self) -> PlaybookScreen | None:
        for s in _playbook_screens(self.screen_stack):
            if s.job_running:
                return s
        return None

    async def action_quit(self) -> None:
        screen = self._running_screen()
        if screen is None:
            self._close_runbooks()
            self.exit()
            return
        from .dialogs.quit import QuitChoice, QuitDialog

        running = screen.runbook.running_nodes

        def chosen(answer: QuitChoice | None) -> None:
            if answer is QuitChoice.STOP:
                self.notify("stopping the job on every node…")
                self._stop_and_exit(screen)
            elif answer is QuitChoice.LEAVE_RUNNING:
                self._stop_and_exit(screen, leave_running=True)

        self.push_screen(QuitDialog(running), chosen)

    def _stop_and_exit(self, screen: PlaybookScreen, leave_running: bool = False) -> None:
        def work() -> None:
            if leave_running:
                self.left_running = screen.runbook.detach_job()
            screen.runbook.close()
            if not self.is_running:
                return  # the app is already gone: nothing left to exit
            try:
                self.call_from_thread(self.exit)
            except (RuntimeError, CancelledError):
                pass  # the app is already gone: nothing left to exit

        threading.Thread(target=work, daemon=True).start()

    def _close_runbooks(self) -> None:
        for s in _playbook_screens(self.screen_stack):
            if (rb := s.made_runbook) is not None:  # a screen that never made one has nothing to close
                rb.close()

    def on_unmount(self) -> None:
        self._close_runbooks()  # nothing is left running on a node, whatever the way out

    # ---- asked from worker threads ----------------------------------------------------------
    def _ask(self, dialog: ModalScreen[T]) -> T | None:
        """Show a dialog from a worker thread and wait for the user's answer there."""
        done = threading.Event()
        answer: list[T | None] = [None]

        def set_answer(value: T | None) -> None:
            answer[0] = value
            done.set()

        self.call_from_thread(self.push_screen, dialog, set_answer)
        while not done.wait(0.2):  # the app may go away unanswered: then the answer is no
            if not self.is_running:
                return None
        return answer[0]

    # one dialog at a time, even when several nodes ask at once
    _dialog_lock = threading.Lock()

    def _confirm_host_key(self, node: str, hostname: str, key_type: str, fingerprint: str) -> bool:
        from .dialogs.host_key import HostKeyDialog

        with self._dialog_lock:
            return bool(self._ask(HostKeyDialog(node, hostname, key_type, fingerprint)))

    def _ask_passphrase(self, node: str, path: str) -> str | None:
        from .dialogs.passphrase import PassphraseDialog

        with self._dialog_lock:
            return self._ask(PassphraseDialog(node, path))
