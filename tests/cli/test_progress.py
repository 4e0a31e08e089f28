"""The progress display of `cloudbench run`: no source links, no unknown totals."""

from __future__ import annotations

from rich.console import Console

from cloudbench import Trial, TrialOutcome
from cloudbench.cli.progress import RichUI


def test_log_lines_carry_no_source_path_and_phases_no_none() -> None:
    console = Console(width=80, record=True, color_system=None, force_terminal=False,
                      file=open("/dev/null", "w"))  # noqa: SIM115
    trial = Trial("r000-t000-echo", 0, 0, "echo", "echo", ("a", "b"), (("a", "b"),), 1.0, ())
    with RichUI(console, total_trials=1) as ui:
        ui.phase("provisioning")
        ui.trial_started(trial, 1, 1)
        ui.trial_done(trial, TrialOutcome(rows=1234))
        ui.warn("a warning")
        ui.phase("teardown")
    text = console.export_text()
    assert "r000-t000-echo: 1,234 rows, ok" in text
    assert "warning: a warning" in text
    assert ".py:" not in text, text  # Console.log's link to progress.py:59
    assert "None" not in text, text  # the teardown phase showed 0/None
    assert "1/1" in text
