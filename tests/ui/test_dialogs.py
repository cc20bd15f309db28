"""Each dialog dismisses with its typed answer: an enum member, a bool, or the passphrase."""

from __future__ import annotations

from textual.app import App

from ddptui.core.diagnosis.model import Evidence, Finding, Fix
from ddptui.ui.dialogs.fix import FixChoice, FixDialog
from ddptui.ui.dialogs.host_key import HostKeyDialog
from ddptui.ui.dialogs.passphrase import PassphraseDialog
from ddptui.ui.dialogs.quit import QuitChoice, QuitDialog

FINDING = Finding("ib-socket-mismatch", "error", ["a", "b"], "IB on one node, sockets on the other",
                  [Evidence("a", 3, "NET/IB"), Evidence("b", 0, "NET/Socket")],
                  fix=Fix(env={"NCCL_IB_DISABLE": "1"}, scope="all-nodes", explain="use sockets everywhere"))


async def answer(make, *keys: str, click: str | None = None):
    got: list = []
    app = App()
    async with app.run_test(size=(140, 40)) as pilot:
        app.push_screen(make(), got.append)
        await pilot.pause()
        if click:
            await pilot.click(click)
        await pilot.press(*keys)
        await pilot.pause()
    return got


async def test_quit_dialog_answers_with_quit_choice() -> None:
    assert await answer(lambda: QuitDialog(["a"]), "escape") == [QuitChoice.CANCEL]
    assert await answer(lambda: QuitDialog(["a"]), click="#stop") == [QuitChoice.STOP]
    assert await answer(lambda: QuitDialog(["a"]), click="#leave") == [QuitChoice.LEAVE_RUNNING]


async def test_fix_dialog_answers_with_fix_choice(tmp_path) -> None:
    path = tmp_path / "pb.yaml"
    patch = "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n"
    assert await answer(lambda: FixDialog(FINDING, patch, path), "escape") == [FixChoice.DISMISS]
    assert await answer(lambda: FixDialog(FINDING, patch, path), click="#apply") == [FixChoice.APPLY_AND_RELAUNCH]
    assert await answer(lambda: FixDialog(FINDING, patch, path), click="#save") == [FixChoice.SAVE_ONLY]
    assert FixDialog(FINDING, patch, path).copy_text() == "export NCCL_IB_DISABLE=1"


async def test_host_key_and_passphrase_dialogs() -> None:
    assert await answer(lambda: HostKeyDialog("a", "a.example", "ssh-ed25519", "SHA256:x"), click="#yes") == [True]
    assert await answer(lambda: HostKeyDialog("a", "a.example", "ssh-ed25519", "SHA256:x"), click="#no") == [False]
    assert await answer(lambda: PassphraseDialog("a", "~/.ssh/id"), *"secret", "enter") == ["secret"]
    assert await answer(lambda: PassphraseDialog("a", "~/.ssh/id"), "escape") == [None]
