"""The progress display of `cloudbench run` (rich), kept out of the runner."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from cloudbench.plan import Trial
from cloudbench.workloads.base import TrialOutcome


class RichUI:
    def __init__(self, console: Console, total_trials: int) -> None:
        self.console = console
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.overall = self.progress.add_task("trials", total=total_trials)
        self.current = self.progress.add_task("starting", total=None)
        self._trial = ""

    def __enter__(self) -> RichUI:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def phase(self, text: str) -> None:
        self.progress.update(self.current, description=text)

    def trial_started(self, trial: Trial, number: int, total: int) -> None:
        self._trial = f"repetition {trial.repetition + 1}: trial {number}/{total} {trial.workload}"
        self.progress.update(self.current, description=self._trial)

    def trial_tick(self, text: str) -> None:
        self.progress.update(self.current, description=f"{self._trial} {text}")

    def trial_done(self, trial: Trial, outcome: TrialOutcome) -> None:
        self.progress.advance(self.overall)
        mark = "[green]ok[/]" if not outcome.failures else f"[yellow]{len(outcome.failures)} failure(s)[/]"
        self.console.log(f"{trial.id}: {outcome.rows:,} rows, {mark}")

    def warn(self, text: str) -> None:
        self.console.log(f"[yellow]warning:[/] {escape(text)}")


def titled_table(title: str, columns: Iterable[str] = (), left: Collection[str] = (),
                 no_wrap: bool = False) -> Table:
    """A report table: title on the left, a rule under the header, no outer padding;
    ``columns`` right-aligned except those in ``left``."""
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for c in columns:
        t.add_column(c, justify="left" if c in left else "right", no_wrap=no_wrap)
    return t
