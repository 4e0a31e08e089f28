"""What the runner tells a person while it works, and SIGTERM delivered as Ctrl-C."""

from __future__ import annotations

from typing import Protocol

from cloudbench.core.interrupts import Interrupted, signals_as_interrupts
from cloudbench.workloads.base import Trial, TrialOutcome

__all__ = ["Interrupted", "QuietUI", "RunUI", "signals_as_interrupts"]  # the first and last from core


class RunUI(Protocol):
    """What the runner tells a person while it works (the CLI draws it with rich)."""

    def phase(self, text: str) -> None: ...
    def trial_started(self, trial: Trial, number: int, total: int) -> None: ...
    def trial_tick(self, text: str) -> None: ...
    def trial_done(self, trial: Trial, outcome: TrialOutcome) -> None: ...
    def warn(self, text: str) -> None: ...


class QuietUI:
    """A :class:`RunUI` that shows nothing (library use, tests)."""

    def phase(self, text: str) -> None:
        pass

    def trial_started(self, trial: Trial, number: int, total: int) -> None:
        pass

    def trial_tick(self, text: str) -> None:
        pass

    def trial_done(self, trial: Trial, outcome: TrialOutcome) -> None:
        pass

    def warn(self, text: str) -> None:
        pass
