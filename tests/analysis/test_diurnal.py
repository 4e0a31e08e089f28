"""Time-of-day analysis on synthetic series: a sinusoid is recovered, flat data give a null with
its minimum detectable effect, the tests agree with scipy run independently on the runs (or days)
they must use, and on simulated campaigns with per-run effects and no time-of-day effect the
printed tests hold their level (cloudbench.testing.timeofday: a generator that is not the
estimator's model)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from cloudbench.analysis.diurnal import diurnal_series, phase_bins, run_values, weekdays
from cloudbench.testing.timeofday import CampaignModel, simulate_campaign

DAY = 86400.0
MONDAY = 1764547200.0  # 2025-12-01T00:00:00Z, a Monday


def hourly_week(rng: np.random.Generator, jitter: float = 600.0) -> np.ndarray:
    return MONDAY + np.arange(168) * 3600.0 + rng.uniform(0, jitter, 168)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_diurnal_sinusoid_is_recovered_with_its_uncertainty(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = hourly_week(rng)
    y = 1000 + 50 * np.sin(2 * np.pi * (t - 3 * 3600) / DAY) + rng.normal(0, 10, t.size)
    r = diurnal_series(t, y, DAY)
    assert r.fit is not None
    assert abs(r.fit.period_s - DAY) < 3 * r.fit.period_se_s + 0.01 * DAY
    assert abs(r.fit.amplitude - 50) < 4 * r.fit.amplitude_se
    assert abs(r.fit.phase_s - 3 * 3600) < 0.05 * DAY
    assert r.p_at_period is not None and r.p_at_period < 1e-6
    assert r.amplitude_at_period is not None and r.amplitude_at_period_se is not None
    assert abs(r.amplitude_at_period - 50) < 4 * r.amplitude_at_period_se
    assert r.kruskal_p is not None and r.kruskal_p < 1e-3 and r.kruskal_epsilon2 is not None
    assert r.kruskal_epsilon2 > 0.5
    assert r.mde_amplitude is not None and r.mde_amplitude < 50


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_flat_data_give_a_null_result_and_the_smallest_detectable_effect(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = hourly_week(rng)
    y = 1000 + rng.normal(0, 10, t.size)
    r = diurnal_series(t, y, DAY)
    assert r.p_at_period is not None and r.p_at_period > 0.001
    assert r.mde_amplitude is not None
    # n = 168, sigma = 10: the F-test at a known period sees about 2.5·sigma·sqrt(2/n) ≈ 2.7
    assert 2.0 < r.mde_amplitude < 4.0
    assert r.mde_cohens_f is not None and 0.2 < r.mde_cohens_f < 0.6


def test_the_minimum_detectable_amplitude_is_detected_about_as_often_as_promised() -> None:
    """Coverage by simulation: a sine of the reported MDE amplitude is found in ~80 % of campaigns."""
    rng = np.random.default_rng(11)
    t = hourly_week(rng)
    mde = diurnal_series(t, 1000 + rng.normal(0, 10, t.size), DAY).mde_amplitude
    assert mde is not None
    hits = 0
    trials = 200
    for _ in range(trials):
        y = 1000 + mde * np.sin(2 * np.pi * (t - rng.uniform(0, DAY)) / DAY) + rng.normal(0, 10, t.size)
        w = 2 * np.pi * t / DAY
        X = np.column_stack([np.ones_like(t), np.sin(w), np.cos(w)])
        rss1 = np.sum((y - X @ np.linalg.lstsq(X, y, rcond=None)[0]) ** 2)
        rss0 = np.sum((y - y.mean()) ** 2)
        f = ((rss0 - rss1) / 2) / (rss1 / (t.size - 3))
        hits += stats.f.sf(f, 2, t.size - 3) < 0.05
    assert 0.70 < hits / trials < 0.90


def test_kruskal_wallis_is_scipy_s_on_one_value_per_run() -> None:
    """Three repetitions per run: every test sees the runs' medians, n is the number of runs."""
    rng = np.random.default_rng(7)
    starts = hourly_week(rng, jitter=0)
    t = np.repeat(starts, 3) + np.tile([0.0, 300.0, 600.0], starts.size)
    run = np.repeat(np.arange(starts.size), 3)
    y = np.repeat(rng.normal(0, 1, starts.size), 3) + rng.normal(0, 1, t.size)
    r = diurnal_series(t, y, DAY, run=run)
    assert (r.n, r.n_values) == (168, 504)
    tr, yr, _ = run_values(t, y, run)
    assert np.allclose(tr, starts + 300.0) and np.allclose(yr, np.median(y.reshape(-1, 3), axis=1))
    hours = phase_bins(tr, np.zeros_like(tr), DAY)
    kw = stats.kruskal(*[yr[hours == h] for h in range(24)])
    assert r.kruskal_h == pytest.approx(kw.statistic) and r.kruskal_p == pytest.approx(kw.pvalue)
    assert r.by_hour[0]["n"] == 7


def test_weekday_vs_weekend_compares_whole_days_and_needs_two_weeks() -> None:
    rng = np.random.default_rng(8)
    t = MONDAY + np.arange(14 * 24) * 3600.0 + rng.uniform(0, 600, 14 * 24)
    day = np.floor(t / DAY)
    weekend = weekdays(t, np.zeros_like(t), DAY) >= 5
    y = rng.normal(0, 1, t.size) + np.where(weekend, 3.0, 0.0)
    r = diurnal_series(t, y, DAY)
    assert (r.weekday_days, r.weekend_days) == (10, 4) and r.weekday_not_testable is None
    means = {d: y[day == d].mean() for d in np.unique(day)}
    wd = [m for d, m in means.items() if (d + 3) % 7 < 5]
    we = [m for d, m in means.items() if (d + 3) % 7 >= 5]
    mw = stats.mannwhitneyu(wd, we)
    assert r.mw_p is not None and r.mw_p == pytest.approx(mw.pvalue) and r.mw_p < 0.01
    # one week: 5 weekdays against 2 weekend days cannot reach p < 0.05 (the exact minimum is 2/21)
    week = diurnal_series(t[: 7 * 24], y[: 7 * 24], DAY)
    assert week.mw_p is None and week.weekday_not_testable is not None
    assert "not testable: 7 whole days (5 weekdays, 2 weekend days)" in week.weekday_not_testable
    # 13 days and a few hours is not two weeks of whole days
    short = diurnal_series(t[12:], y[12:], DAY)
    assert short.mw_p is None and "13 whole days" in (short.weekday_not_testable or "")
    # one day (a Monday's runs and the next morning's): singular, as printed
    one = diurnal_series(t[: 30], y[: 30], DAY)
    assert "not testable: 1 whole day (1 weekday, 0 weekend days)" in (one.weekday_not_testable or "")


def test_the_weekday_comes_from_the_day_not_from_the_period() -> None:
    """--period 7d on two weeks of hourly runs: weekdays are still Monday to Sunday (the old code
    counted days of the period's length: weekdays 0-2 only, no weekend)."""
    rng = np.random.default_rng(9)
    t = MONDAY + np.arange(14 * 24) * 3600.0
    y = rng.normal(0, 1, t.size)
    r = diurnal_series(t, y, 7 * DAY)
    assert (r.weekday_days, r.weekend_days) == (10, 4) and r.mw_p is not None
    assert all(row[12] is not None for row in r.heatmap)  # every weekday at noon
    # a compressed day of 60 s: its weekdays are days of 60 s, whatever the period
    tc = 1.7e9 - np.mod(1.7e9, 60.0) + np.arange(14 * 10) * 6.0
    rc = diurnal_series(tc, rng.normal(0, 1, tc.size), 120.0, day=60.0)
    assert (rc.weekday_days, rc.weekend_days) == (10, 4)
    assert all(sum(v is not None for v in row) == 10 for row in rc.heatmap)  # 10 runs a compressed day


def test_a_period_the_runs_cannot_pin_down_is_not_identified_not_printed() -> None:
    """A trend over one period is a significant sinusoid at P, but no free period fits it: the
    fit says so instead of an absurd interval (like 8.64e+04±7.9e+07 s). (With fewer than 100
    runs the bootstrap null, fitted to the trending runs, reproduces trends: no longer significant.)"""
    rng = np.random.default_rng(10)
    t = 1.7e9 + np.arange(120) * 0.55
    y = 100 + 0.5 * np.arange(120) + rng.normal(0, 0.5, 120)
    short = diurnal_series(t[::10], y[::10], 66.0, day=66.0)
    assert short.p_at_period is not None and short.p_at_period > 0.05
    r = diurnal_series(t, y, 66.0, day=66.0)
    assert r.p_at_period is not None and r.p_at_period < 0.05
    assert r.fit is None and r.fit_note is not None and r.fit_note.startswith("period not identified")
    assert r.amplitude_at_period is not None and np.isfinite(r.amplitude_at_period_se or np.nan)


NULL = CampaignModel()  # one week of hourly runs, 2-3 repetitions, per-run effect = repetition noise


def test_on_campaigns_without_a_time_of_day_effect_every_printed_test_holds_its_level() -> None:
    """25 simulated campaigns of 8 series (200 series; bench/bench_diurnal.py runs 1,000+).
    The level is 5 %; 200 series have an MC SE of 1.5 %, so 10 % is over 3 SEs above it. The
    old code (every repetition a value) rejected with Kruskal-Wallis in 47 % of these series
    and with the periodogram in 35 %, and called 17 of these 25 campaigns positive."""
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(2026)
    rejections = np.zeros(2)
    positive = 0
    series = 0
    for _ in range(25):
        ps = []
        for s in simulate_campaign(rng, NULL):
            r = diurnal_series(s.t, s.values, DAY, run=s.run)
            assert r.n == np.unique(s.run).size and r.p_at_period is not None and r.kruskal_p is not None
            assert r.weekday_not_testable is not None  # one week
            rejections += [r.p_at_period < 0.05, r.kruskal_p < 0.05]
            ps.append(r.p_at_period)
            series += 1
        positive += bool(multipletests(ps, alpha=0.05, method="holm")[0].any())
    rates = rejections / series
    assert rates[0] <= 0.10 and rates[1] <= 0.10, rates
    assert positive <= 4, positive  # P(>= 5 of 25 | 5 %) < 1 %


def test_weekday_vs_weekend_holds_its_level_over_two_weeks_with_day_effects() -> None:
    """Day-level effects (the unit is the day): 120 series of two weeks, 2 per campaign (the
    series of one campaign share its day effects)."""
    rng = np.random.default_rng(2027)
    model = CampaignModel(days=14, day_sd=20.0)
    rejected = tested = 0
    for _ in range(60):
        for s in simulate_campaign(rng, model, series=2):
            r = diurnal_series(s.t, s.values, DAY, run=s.run)
            if r.mw_p is not None:
                tested += 1
                rejected += r.mw_p < 0.05
    assert tested >= 100 and rejected / tested <= 0.10, (rejected, tested)


def test_a_true_daily_sine_of_1_5_run_sds_is_found_with_its_period() -> None:
    rng = np.random.default_rng(2028)
    found = period_ok = series = 0
    for _ in range(5):
        for s in simulate_campaign(rng, CampaignModel(amplitude=1.5)):
            r = diurnal_series(s.t, s.values, DAY, run=s.run)
            series += 1
            found += r.p_at_period is not None and r.p_at_period < 0.05 / 8  # Holm's strictest step
            period_ok += r.fit is not None and abs(r.fit.period_s - DAY) <= 0.1 * DAY
    assert found == series and period_ok >= 0.95 * series, (found, period_ok, series)


def test_local_offsets_move_the_hours_and_a_compressed_day_works_the_same() -> None:
    t = MONDAY + np.arange(48) * 3600.0
    local = phase_bins(t, np.full_like(t, 3600.0), DAY)
    assert local[0] == 1  # 00:00 UTC is 01:00 at UTC+1
    rng = np.random.default_rng(3)
    P = 60.0
    tc = 1.7e9 + np.sort(rng.uniform(0, 2 * P, 20))
    y = 5000 + 800 * np.sin(2 * np.pi * (tc - 7) / P) + rng.normal(0, 50, tc.size)
    r = diurnal_series(tc, y, P)
    assert r.fit is not None and abs(r.fit.period_s - P) < 0.1 * P and abs(r.fit.amplitude - 800) < 0.2 * 800
    assert abs(r.fit.phase_s - 7) < 2


def test_too_few_or_constant_values_say_why() -> None:
    r = diurnal_series(np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0]), DAY)
    assert r.fit is None and any("too few" in n for n in r.notes)
    r = diurnal_series(MONDAY + np.arange(10) * 3600.0, np.ones(10), DAY)
    assert r.fit is None and any("same" in n for n in r.notes)


def test_nearly_tied_runs_give_a_result_not_a_singular_matrix() -> None:
    """95 of 96 run medians equal on a coarse grain (a 0.1 ms grid, an independent reviewer's
    generator): the bootstrap's null series are then mostly constant, and the batched AR solve
    raised LinAlgError ('Singular matrix') through `diurnal` and `compare --changes`."""
    t = MONDAY + np.arange(96) * 3600.0
    y = np.full(96, 1000.0)
    for at in (12, 37, 80):
        y[:] = 1000.0
        y[at] = 900.0
        r = diurnal_series(t, y, DAY)
        assert r.p_at_period is not None and 0.05 < r.p_at_period <= 1.0  # one low run is no sine


def test_a_short_campaign_s_primary_test_holds_its_level() -> None:
    """Feasible GLS estimates the AR coefficients from the runs themselves; with 20 runs they are
    biased toward 0 and the F distribution is not the statistic's null distribution (the F test
    rejected 22 % of 20 i.i.d. runs at 5 %). The p-value below 100 runs comes from a parametric
    bootstrap of the whole procedure. Generators from cloudbench.testing.adversarial (written apart
    from the estimator): per-run effects with 2-3 repetitions, and AR(1) φ = 0.5 across runs.
    100 series each: MC SE 2.2 %, the bound is 3 SEs over 5 %."""
    from cloudbench.testing import adversarial as gen

    rng = np.random.default_rng(2031)
    c = gen.hourly_campaign(rng, 100, days=1, runs_per_day=20, run_sd=5.0, rep_sd=5.0)
    rejected = {"run effects": 0, "AR(1) 0.5": 0}
    for k in range(100):
        keep = c.present[k]
        r = diurnal_series(c.t[keep], c.values[k][keep], DAY, run=c.run[keep])
        assert r.n == 20 and r.p_at_period is not None
        rejected["run effects"] += r.p_at_period < 0.05
    t = MONDAY + np.arange(20) * 4320.0 + rng.uniform(0, 400, (100, 20))
    y = 100.0 + gen.ar1(rng, (100, 20), 0.5, 5.0)
    for k in range(100):
        r = diurnal_series(t[k], y[k], DAY)
        assert r.p_at_period is not None
        rejected["AR(1) 0.5"] += r.p_at_period < 0.05
    assert all(v <= 11 for v in rejected.values()), rejected


def test_the_vectorised_refit_is_statsmodels_glsar() -> None:
    """The bootstrap refits a thousand null series at once; each F must be the one statsmodels'
    GLSAR iterated fit and f_test give (white noise, random walks, trends)."""
    import warnings

    from statsmodels.regression.linear_model import GLSAR

    from cloudbench.analysis.diurnal import _design, _glsar_f

    rng = np.random.default_rng(4)
    t = 1.7e9 + np.arange(20) * 6.0 + rng.uniform(0, 3, 20)
    x = _design(t, 60.0)
    ys = np.vstack([rng.normal(size=(10, 20)), np.cumsum(rng.normal(size=(10, 20)), axis=1),
                    np.arange(20) + rng.normal(0, 0.1, (5, 20))])
    want = []
    for y in ys:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = GLSAR(y, x, rho=2).iterative_fit(maxiter=50)
        want.append(float(np.asarray(res.f_test(np.eye(3)[1:]).fvalue).item()))
    np.testing.assert_allclose(_glsar_f(x, ys), want, rtol=1e-9)
