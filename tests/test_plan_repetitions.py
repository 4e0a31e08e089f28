"""`validate` and `plan` warn when the repetitions are too few for an exact median CI, and count
a scheduled spec's slots in its measurement time."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from cloudbench.cli import app
from cloudbench.plan import repetitions_warning
from tests.paths import EXPERIMENTS


@pytest.mark.parametrize(("reps", "slots", "more"), [(1, 1, 5), (2, 1, 4), (5, 1, 1), (1, 3, 3), (2, 2, 2)])
def test_too_few_repetitions_are_named_with_how_many_more(reps: int, slots: int, more: int) -> None:
    text = repetitions_warning(reps, slots)
    assert text is not None
    assert "needs 6 for an exact 95 % CI of the median" in text
    assert f"{more} more repetition(s)" in text


@pytest.mark.parametrize(("reps", "slots"), [(6, 1), (30, 1), (1, 6), (3, 2), (1, 20)])
def test_enough_repetitions_give_no_warning(reps: int, slots: int) -> None:
    assert repetitions_warning(reps, slots) is None


def _invoke(*args: str) -> str:
    r = CliRunner(env={"COLUMNS": "80"}).invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return " ".join(r.output.split())


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_two_repetitions_are_warned_about(command: str) -> None:
    text = _invoke(command, str(EXPERIMENTS / "warm-vs-cold.yaml"))
    assert "repetitions: 2 give 2 value(s) per series" in text and "4 more repetition(s)" in text


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_a_scheduled_spec_counts_its_slots(command: str) -> None:
    """diurnal-testbed: 1 trial of about 4.5 s in each of 20 slots (before: "1 trials, about 4.5s")."""
    text = _invoke(command, str(EXPERIMENTS / "diurnal-testbed.yaml"))
    m = re.search(r"20 slots of 1 trial \(about ([0-9.]+)s each\): about ([0-9.]+)s of measurement", text)
    assert m is not None, text
    assert float(m.group(2)) == pytest.approx(20 * float(m.group(1)), rel=0.05)
    assert "value(s) per series" not in text  # 1 repetition × 20 slots = 20 values: no warning


@pytest.mark.parametrize("width", [80, 200])
def test_plan_rows_never_wrap(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """payload-sweep at 80 columns: a row per trial (the swept value went to a second line)."""
    from rich.console import Console

    from cloudbench.cli import spec as spec_cli

    console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(spec_cli, "out", console)
    spec_cli.plan(EXPERIMENTS / "payload-sweep.yaml")
    lines = console.export_text().splitlines()
    rows = [line for line in lines if re.search(r"r\d{3}-t\d{3}-payload", line)]
    assert len(rows) == 24 and all(re.search(r"payload=\d+", line) for line in rows), lines
    assert all(len(line) <= width for line in rows)
    first = rows[0].split()
    assert first[:2] == ["1", "1"]  # repetitions counted from 1 in print; the id keeps r000
