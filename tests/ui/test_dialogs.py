"""Each dialog dismisses with its typed answer: an enum member, a bool, or the passphrase."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("size", [(100, 30), (80, 24), (60, 20)])
async def test_every_button_and_the_whole_text_fit(tmp_path, size) -> None:
    """The real app's CSS at its smallest size: the fix dialog scrolls its body, never its buttons;
    the quit dialog's words wrap instead of being cut; the host key is shown whole."""
    from ddptui.ui.app import DdptuiApp
    from ddptui.ui.dialogs.host_key import HostKeyDialog

    long_diff = "--- a/x.yaml\n+++ b/x.yaml\n@@ -1,3 +1,4 @@\n" + "".join(f"     K{i}: v\n" for i in range(60))
    fp = "SHA256:ZS/REswhmD6SA98/i7K7lmItat0Pu16ZrzqoHxJIN8g"
    app = DdptuiApp(search_dirs=[("none", tmp_path)], runs_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        screen = app.screen.region
        for dialog, buttons in ((FixDialog(FINDING, long_diff, tmp_path / "x.yaml"), ("#apply", "#save", "#copy", "#cancel")),
                                (QuitDialog(["node02", "node03", "node04"]), ("#stop", "#leave", "#cancel")),
                                (HostKeyDialog("node04", "10.213.0.4", "ssh-ed25519", fp), ("#yes", "#no"))):
            app.push_screen(dialog)
            await pilot.pause(0.2)
            for b in buttons:
                region = app.screen.query_one(b).region
                assert region.area and screen.contains_region(region), (type(dialog).__name__, b, region)
            if isinstance(dialog, QuitDialog):  # the long sentence wraps onto more lines instead of being cut
                (words,) = [w for w in app.screen.query("Static") if "leave it running" in str(w.render())]
                assert words.region.height >= 2 and screen.contains_region(words.region)
            app.pop_screen()
            await pilot.pause()
        app.push_screen(HostKeyDialog("node04", "10.213.0.4", "ssh-ed25519", fp))
        await pilot.pause(0.2)
        assert str(app.screen.query_one("#fingerprint").render()) == fp


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_the_fix_dialog_shows_the_change_first_and_enter_applies(tmp_path, size) -> None:
    """At 80x24 the body showed the explanation and the evidence, and the diff's changed lines were
    30 presses of Down below; no button had the focus, so Enter did nothing."""
    from ddptui.ui.app import DdptuiApp

    patch = ("--- a/x.yaml\n+++ b/x.yaml\n@@ -8,6 +8,7 @@\n   env:\n     OMP_NUM_THREADS: 1\n"
             "-    GLOO_SOCKET_IFNAME: nosuch0\n+    GLOO_SOCKET_IFNAME: lo\n")
    finding = Finding("bad-socket-ifname", "error", ["a"], "GLOO_SOCKET_IFNAME=nosuch0 names no usable interface",
                      [Evidence("a", 0, "env: GLOO_SOCKET_IFNAME=nosuch0 (the playbook sets it)")] * 4,
                      explanation="gloo binds its sockets to the interface the variable names. " * 6,
                      fix=Fix(env={"GLOO_SOCKET_IFNAME": "lo"}, scope="all-nodes", explain="name one that exists"))
    got: list = []
    app = DdptuiApp(search_dirs=[("none", tmp_path)], runs_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        app.push_screen(FixDialog(finding, patch, tmp_path / "x.yaml"), got.append)
        await pilot.pause(0.2)
        body = app.screen.query_one("#dialog-body")
        diff = app.screen.query_one("#diff")
        assert body.region.contains_region(diff.region.intersection(body.region))
        assert diff.region.y + 7 <= body.region.bottom  # the whole diff, its removed and added lines, in view
        assert app.screen.focused is app.screen.query_one("#apply")
        await pilot.press("enter")
        await pilot.pause()
    assert got == [FixChoice.APPLY_AND_RELAUNCH]
