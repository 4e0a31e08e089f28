"""The echo report's event table: intervals as the detector gives them (never NaN), and
the note when the step test cannot reach its alpha."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console

from cloudbench.analysis.events import Event
from cloudbench.workloads.echo.report import render, size_ci


def section(events: list[dict[str, Any]], windows: int) -> dict[str, Any]:
    return {"groups": [], "quorums": [], "windows": [], "pairs": [], "level_shifts": [], "events": events,
            "step_windows": {"windows": windows, "needs": 15}}


def test_size_ci_shows_coverage_under_95_and_na_without_an_interval() -> None:
    short = Event("spike", 1.0, 0.05, 900.0, 60.0, 60.0, 5, 1e-5, "t", 20.0, size_low=850.0,
                  size_high=990.0, size_level=0.914).to_row()
    assert size_ci(short) == "850..990 (91%)"
    full = Event("spike", 1.0, 0.05, 900.0, 60.0, 60.0, 50, 1e-5, "t", 20.0, size_low=850.0,
                 size_high=990.0, size_level=0.95).to_row()
    assert size_ci(full) == "850..990"
    none = Event("spike", 1.0, 0.05, 900.0, 60.0, 60.0, 1, 1e-5, "t", 20.0).to_row()
    assert size_ci(none) == "n/a" and none["size_ci_low"] is None
    assert size_ci({"size_ci_low": math.nan, "size_ci_high": math.nan}) == "n/a"  # an old report


def test_the_report_says_when_steps_are_not_testable() -> None:
    row = Event("spike", 1.0, 0.05, 900.0, 60.0, 60.0, 1, 1e-5, "t", 20.0).to_row(
        repetition=0, trial="t0", series="a>b")
    console = Console(record=True, width=200)
    render("echo", section([row], 10), console, {})
    text = console.export_text()
    assert "steps not testable: 10 windows, needs 15" in text and "nan" not in text.lower()
    console = Console(record=True, width=200)
    render("echo", section([], 20), console, {})
    assert "not testable" not in console.export_text()


def test_a_coverage_under_95_beside_an_interval_is_explained_once() -> None:
    """A short spike's interval prints its own coverage, "(91%)": a note under the events table says
    what that share is; no note when every interval is a full 95 % one."""
    short = Event("spike", 1.0, 0.05, 900.0, 60.0, 60.0, 5, 1e-5, "t", 20.0, size_low=850.0, size_high=990.0,
                  size_level=0.914).to_row(repetition=0, trial="t0", series="a>b")
    full = Event("spike", 2.0, 0.05, 900.0, 60.0, 60.0, 50, 1e-5, "t", 20.0, size_low=850.0, size_high=990.0,
                 size_level=0.95).to_row(repetition=0, trial="t0", series="a>c")
    console = Console(record=True, width=200)
    render("echo", section([short, full, short], 20), console, {})
    lines = [line for line in console.export_text().splitlines() if "covers only that share" in line]
    assert len(lines) == 1 and lines[0].startswith("note: echo:") and "(91%)" in lines[0]
    assert "fewer than" not in lines[0] and "min..max" in lines[0]
    console = Console(record=True, width=200)
    render("echo", section([full], 20), console, {})
    assert "covers only that share" not in console.export_text()
