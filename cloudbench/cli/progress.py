"""The progress display of `cloudbench run` (rich), kept out of the runner."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

if TYPE_CHECKING:  # annotations only: the workloads (pandas, scipy) load when a run needs them
    from cloudbench import Trial, TrialOutcome


class CountColumn(ProgressColumn):
    """``3/12`` for a task with a total; nothing for one without (a phase such as teardown)."""

    def render(self, task: Task) -> Text:
        return Text("" if task.total is None else f"{task.completed:g}/{task.total:g}")


class RichUI:
    """The runner's :class:`~cloudbench.RunUI` drawn with rich: overall bar, current trial, a log line per trial."""

    def __init__(self, console: Console, total_trials: int) -> None:
        self.console = console
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            CountColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.overall = self.progress.add_task("trials", total=total_trials)
        self.current = self.progress.add_task("starting", total=None)
        self._trial = ""

    def __enter__(self) -> RichUI:
        # The display starts with the first thing the runner reports, so an error found
        # before anything starts (not root, over budget) is not printed under a bar.
        return self

    def _start(self) -> None:
        if not self.progress.live.is_started:
            self.progress.start()

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def phase(self, text: str) -> None:
        self._start()
        self.progress.update(self.current, description=text)

    def trial_started(self, trial: Trial, number: int, total: int) -> None:
        self._start()
        self._trial = f"repetition {trial.repetition + 1}: trial {number}/{total} {trial.workload}"
        self.progress.update(self.current, description=self._trial)

    def trial_tick(self, text: str) -> None:
        self._start()
        self.progress.update(self.current, description=f"{self._trial} {text}")

    def trial_done(self, trial: Trial, outcome: TrialOutcome) -> None:
        self._start()
        self.progress.advance(self.overall)
        mark = "[green]ok[/]" if not outcome.failures else f"[yellow]{len(outcome.failures)} failure(s)[/]"
        self._log(f"{trial.id}: {outcome.rows:,} rows, {mark}")

    def warn(self, text: str) -> None:
        self._start()
        self._log(f"[yellow]warning:[/] {escape(text)}")

    def _log(self, markup: str) -> None:
        # a time and the line, as Console.log, without its link to this source file (progress.py:59)
        self.console.print(f"[log.time]\\[{datetime.now():%H:%M:%S}][/] {markup}", highlight=False)
