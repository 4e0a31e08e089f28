"""What the runner tells a person while it works, and SIGTERM delivered as Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType
from typing import Protocol

from cloudbench.workloads.base import Trial, TrialOutcome


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


class Interrupted(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so that the same cleanup runs."""


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Interrupted` (a KeyboardInterrupt): the same cleanup runs."""
    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(f"signal {signal.Signals(signum).name}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
