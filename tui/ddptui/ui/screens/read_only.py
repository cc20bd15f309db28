"""Screens that show a run without running anything (a bundle, an attached Slurm job): the keys
that would run, skip or stop a step are answered with words instead."""

from __future__ import annotations

import time


class ReadOnlyActions:
    """Mixed in before PlaybookScreen; the screen gives `refusal`, what the user is told."""

    REFUSED = {"run_step", "next_step", "skip_step", "run_all", "stop_job"}  # answered with the refusal
    SHOWN_FOR = 8.0  # seconds the refusal's toast stays
    refusal: str
    _refused_at = -SHOWN_FOR

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The refused keys stay live (they answer in words); the rest as the run screen decides."""
        return True if action in self.REFUSED else super().check_action(action, parameters)

    def _refuse(self) -> None:
        """Said once while its toast is up: five keys pressed were five toasts stacked over the logs."""
        now = time.monotonic()
        if now - self._refused_at >= self.SHOWN_FOR:
            self.notify(self.refusal, severity="warning", timeout=self.SHOWN_FOR)
            self._refused_at = now

    def action_run_step(self) -> None:
        self._refuse()

    def action_next_step(self) -> None:
        self._refuse()

    def action_skip_step(self) -> None:
        self._refuse()

    def action_run_all(self) -> None:
        self._refuse()

    def action_stop_job(self) -> None:
        self._refuse()
