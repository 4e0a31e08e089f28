"""`cloudbench diurnal` and confirm's time-of-day guard on result directories written by the fakes."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from cloudbench.errors import AnalysisError, UsageError
from cloudbench.report.confirm import confirm
from cloudbench.report.diurnal import diurnal, repetition_hours
from cloudbench.testing.fake_results import FakeRun, make_campaign

SCHEDULE = {"every": 3600.0, "count": 48, "timezone": "UTC", "day": 86400.0}
KEY = ("rtt_p50_us", "same_zone")


def campaign(tmp_path: Path, amplitude: float, seed: int = 1) -> Path:
    """48 hourly runs (first at 10:15 UTC), one repetition each, a daily sine of ``amplitude``."""
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(48):
        hour = (10 + i) % 24 + 0.25
        v = 1000 + amplitude * math.sin(2 * math.pi * hour / 24) + rng.normal(0, 5)
        runs.append(FakeRun({KEY: [v], ("rtt_p99_us", "same_zone"): [2000 + rng.normal(0, 5)]},
                            schedule=SCHEDULE))
    return make_campaign(tmp_path, "hourly", runs)


def test_a_daily_cycle_is_found_and_its_amplitude_measured(tmp_path: Path) -> None:
    res = diurnal(campaign(tmp_path, 40.0), "24h")
    (s,) = [s for s in res["series"] if s["metric"] == "rtt_p50_us"]
    assert s["n"] == 48 and s["significant"] and abs(s["fit"]["amplitude"] - 40) < 4 * s["fit"]["amplitude_se"]
    (flat,) = [s for s in res["series"] if s["metric"] == "rtt_p99_us"]
    assert not flat["significant"] and flat["mde_amplitude"] < 10
    assert "1 of 2 series" in res["verdict"]
    with pytest.raises(UsageError, match="--period"):
        diurnal(tmp_path / "hourly", "a day")


def test_each_run_is_one_value_and_the_period_defaults_to_the_schedule_s_day(tmp_path: Path) -> None:
    """Three repetitions per run: the series has one value per run (their median), and with no
    --period the schedule's (compressed, 4 h) day is the period; a longer period is refused."""
    from cloudbench.analysis.diurnal import diurnal_series, run_values
    from cloudbench.report.diurnal import utc_offsets, value_times
    from cloudbench.store.rundir import find_runs

    sched = {**SCHEDULE, "day": 14400.0}
    rng = np.random.default_rng(5)
    runs = [FakeRun({KEY: list(1000 + rng.normal(0, 20) + rng.normal(0, 5, 3))}, schedule=sched)
            for _ in range(30)]
    path = make_campaign(tmp_path, "reps", runs)
    res = diurnal(path)
    (s,) = res["series"]
    assert (res["period_s"], res["day_s"]) == (14400.0, 14400.0)
    assert (s["n"], s["n_values"]) == (30, 90)
    t, y, r = [], [], []
    for i, run in enumerate(find_runs(path)):
        times = value_times(run.manifest())
        for rep, v in enumerate(runs[i].values[KEY]):
            t.append(times[(rep, "echo")])
            y.append(v)
            r.append(i)
    _, yr, _ = run_values(np.array(t), np.array(y), np.array(r))
    assert np.allclose(sorted(yr), sorted(np.median(np.array(y).reshape(30, 3), axis=1)))
    direct = diurnal_series(np.array(t), np.array(y), 14400.0, utc_offsets(np.array(t), "UTC"), run=np.array(r),
                            day=14400.0)
    assert s["p_at_period"] == pytest.approx(direct.p_at_period) and s["kruskal_p"] == pytest.approx(direct.kruskal_p)
    # 30 hourly runs cover 29 h 15 min: a day fits, two days do not
    assert diurnal(path, "1d")["period_s"] == 86400.0
    with pytest.raises(UsageError, match=r"--period is 48.0h, longer than the 29.2h its 30 runs cover"):
        diurnal(path, "2d")


def test_a_campaign_shorter_than_its_day_is_refused_and_confirm_and_the_report_carry_on(tmp_path: Path) -> None:
    runs = [FakeRun({KEY: [1000 + i]}, schedule=SCHEDULE) for i in range(10)]
    path = make_campaign(tmp_path, "young", runs)
    with pytest.raises(UsageError, match=r"the schedule's day is 24\.0h, longer than the 9\.\dh its 10 runs cover"):
        diurnal(path)
    assert not any("time-of-day" in n for n in confirm(path).dataset.notes)
    from cloudbench.report.build import time_of_day_section
    from cloudbench.store.rundir import find_runs

    assert time_of_day_section(find_runs(path)[-1]) is None


def test_confirm_warns_about_a_time_of_day_effect_and_pools_within_an_hour(tmp_path: Path) -> None:
    path = campaign(tmp_path, 40.0)
    notes = confirm(path).dataset.notes
    assert any("time-of-day effect in echo rtt_p50_us same_zone" in n for n in notes), notes
    assert not any("rtt_p99_us" in n for n in notes)
    hours = repetition_hours(path)
    assert sorted(set(hours.values())) == list(range(24))
    res = confirm(path, hours=[3, 4])
    assert {hours[(v.ref.run_id, v.ref.repetition, v.workload)] for v in res.dataset.values} == {3, 4}
    assert len(res.dataset.values) == 2 * 2 * 2  # 2 hours × 2 days × 2 metrics
    assert any("within hour(s) 3, 4" in n for n in res.dataset.notes)
    with pytest.raises(AnalysisError, match=r"0\.\.23"):
        confirm(path, hours=[24])


def test_no_warning_without_an_effect(tmp_path: Path) -> None:
    notes = confirm(campaign(tmp_path, 0.0)).dataset.notes
    assert not any("time-of-day" in n for n in notes)


def test_the_report_of_a_scheduled_run_carries_the_campaign_s_verdict(tmp_path: Path) -> None:
    from cloudbench.report.build import time_of_day_section
    from cloudbench.store.rundir import find_runs

    path = campaign(tmp_path, 40.0)
    tod = time_of_day_section(find_runs(path)[-1])
    assert tod is not None and tod["runs"] == 48 and "time-of-day effect" in tod["verdict"]
    assert [(s["metric"], s["group"]) for s in tod["significant"]] == [KEY]
    one_shot = make_campaign(tmp_path / "x", "plain", [FakeRun({KEY: [1.0]}) for _ in range(8)])
    assert time_of_day_section(find_runs(one_shot)[-1]) is None


def test_the_html_report_of_a_scheduled_run_draws_the_heat_map_and_the_coverage_grid(tmp_path: Path) -> None:
    """The hour × day heat map and the coverage grid, once campaigns exist."""
    from cloudbench.report.build import build_report
    from cloudbench.report.html import render_html
    from cloudbench.store.rundir import find_runs

    run = find_runs(campaign(tmp_path, 40.0))[-1]
    report = build_report(run)
    tod = report["time_of_day"]
    coverage = np.array(tod["coverage"])
    assert coverage.shape == (7, 24) and coverage.sum() == 48 and coverage.max() == 1  # 48 hours, once each
    (shown,) = tod["heatmaps"]
    assert (shown["metric"], shown["group"]) == KEY and shown["significant"]
    # each run is measured at its start: the grid counts runs in the heat map's cells
    assert (coverage > 0).tolist() == [[v is not None for v in row] for row in shown["heatmap"]]
    assert coverage[6][10] == 1 and coverage[1][9] == 1  # Sun 2026-11-22 10:15 UTC, the 48th run Tue 09:15
    html, files = render_html(run, report, tmp_path / "figures")
    assert 'id="time-of-day"' in html and "coverage" in html and "hour of day (UTC)" in html
    assert any(p.name.startswith("time-of-day") and p.suffix == ".svg" for p in files)


def test_the_coverage_grid_of_a_compressed_day_uses_the_heat_map_s_cells(tmp_path: Path) -> None:
    """A testbed campaign's 4 h "day": runs an hour apart fall 6 compressed hours apart, on
    compressed weekdays; the grid counts them where the heat maps put their values."""
    from cloudbench.report.build import time_of_day_section
    from cloudbench.store.rundir import find_runs

    sched = {**SCHEDULE, "day": 14400.0}
    rng = np.random.default_rng(3)
    runs = [FakeRun({KEY: [1000 + rng.normal(0, 5)]}, schedule=sched) for _ in range(48)]
    tod = time_of_day_section(find_runs(make_campaign(tmp_path, "compressed", runs))[-1])
    assert tod is not None and tod["period_s"] == 14400.0
    coverage = np.array(tod["coverage"])
    (shown,) = tod["heatmaps"]
    assert coverage.sum() == 48
    assert (coverage > 0).tolist() == [[v is not None for v in row] for row in shown["heatmap"]]
    # 10:15 UTC is 8100 s into its 4 h day: compressed hour 13 (600 s each); then every 6th hour
    assert sorted({h for row in coverage.tolist() for h, n in enumerate(row) if n}) == [1, 7, 13, 19]


def test_confirm_gives_the_time_of_day_amplitude_in_its_natural_unit(tmp_path: Path) -> None:
    """The compressed-day campaign's confirm said "amplitude 4.03e+03 us" for a 4 ms sine: 4.03 ms."""
    notes = confirm(campaign(tmp_path, 4030.0)).dataset.notes
    (note,) = [n for n in notes if "time-of-day effect in echo rtt_p50_us same_zone" in n]
    amplitude = re.search(r"amplitude ([^)]*)\)", note)
    assert amplitude is not None and re.fullmatch(r"4\.0\d ms", amplitude[1]), note
