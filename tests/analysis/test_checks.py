"""Assumption checks: they warn on the violations they test for, stay quiet on i.i.d.
data most of the time, skip tiny samples with a note and never crash or leak warnings."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pytest

from cloudbench.analysis.checks import (
    MIN_N_INDEPENDENCE,
    MIN_N_STATIONARITY,
    MIN_N_TREND,
    CheckResult,
    run_checks,
    warning_messages,
)


@pytest.fixture(autouse=True)
def warnings_are_errors() -> Iterator[None]:
    # statsmodels' InterpolationWarning / FutureWarning must not reach users.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results}


def ar1(n: int, phi: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = rng.normal(size=n)
    x = np.empty(n)
    x[0] = e[0]
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return 100 + x


def test_iid_data_rarely_warn() -> None:
    rng = np.random.default_rng(11)
    samples = 60
    counts: dict[str, int] = {}
    for _ in range(samples):
        for r in run_checks(rng.normal(100, 5, 50)):
            assert r.status in ("ok", "warning")
            counts[r.name] = counts.get(r.name, 0) + r.warned
    # Nominal false-alarm rates are 5-10 %; 20 % leaves room for chance.
    assert set(counts) == {"normality", "independence", "stationarity", "trend", "modes"}
    for name, c in counts.items():
        assert c / samples <= 0.2, (name, c)


def test_two_regimes_are_flagged_by_the_modes_check() -> None:
    rng = np.random.default_rng(4)
    level = np.repeat([100.0, 130.0], 15)
    r = by_name(run_checks(rng.permutation(level * (1 + 0.02 * rng.standard_normal(30)))))["modes"]
    assert r.warned and "more than one mode" in r.message and r.values["p"] < 0.05
    one = by_name(run_checks(100 * (1 + 0.02 * rng.standard_normal(30))))["modes"]
    assert one.status == "ok"
    assert by_name(run_checks(level[:9]))["modes"].status == "skipped"


def test_autocorrelation_is_flagged() -> None:
    r = by_name(run_checks(ar1(100, 0.8, seed=1)))["independence"]
    assert r.warned
    assert "Ljung–Box" in r.message
    assert r.values["lag1"] > r.values["band"]


def test_trend_and_nonstationarity_are_flagged() -> None:
    rng = np.random.default_rng(2)
    n = 80
    x = 100 + np.linspace(0, 20, n) + rng.normal(0, 3, n)
    res = by_name(run_checks(x))
    assert res["trend"].warned
    assert res["trend"].values["tau"] > 0
    assert res["trend"].values["relative_drift"] == pytest.approx(0.2, rel=0.35)
    assert res["stationarity"].warned
    assert "KPSS" in res["stationarity"].message


def test_trend_on_long_series_uses_a_linear_slope() -> None:
    from cloudbench.analysis.checks import THEIL_SEN_MAX_N, check_trend

    n = THEIL_SEN_MAX_N + 500
    x = 100 + np.linspace(0, 10, n) + np.random.default_rng(6).normal(0, 5, n)
    r = check_trend(x)
    assert r.warned
    assert r.values["relative_drift"] == pytest.approx(0.1, rel=0.2)


def test_skewed_data_fail_normality() -> None:
    x = np.random.default_rng(3).lognormal(0, 1, 200)
    r = by_name(run_checks(x))["normality"]
    assert r.warned and r.values["p"] < 0.05
    assert "Shapiro–Wilk" in r.message


@pytest.mark.parametrize("n", [0, 1, 2, 5, MIN_N_INDEPENDENCE, MIN_N_STATIONARITY - 1])
def test_small_n_skips_with_a_note(n: int) -> None:
    x = np.random.default_rng(n).normal(size=n)
    res = by_name(run_checks(x))
    expect_skipped = {
        "normality": n < 3,
        "independence": n < MIN_N_INDEPENDENCE,
        "stationarity": n < MIN_N_STATIONARITY,
        "trend": n < MIN_N_TREND,
    }
    for name, skipped in expect_skipped.items():
        assert (res[name].status == "skipped") == skipped, (name, n, res[name])
        if skipped:
            assert "needs n >=" in res[name].message


@pytest.mark.parametrize("n", [2, 5, 30, 200])
def test_constant_data_do_not_crash(n: int) -> None:
    res = run_checks(np.full(n, 42.0))
    assert all(r.status == "skipped" for r in res)
    assert all("equal" in r.message for r in res)
    assert warning_messages(res) == []


def test_ties_and_kpss_table_bounds_are_handled() -> None:
    # Two-valued data give extreme KPSS statistics (p outside the table).
    x = np.tile([1.0, 2.0], 40)
    res = by_name(run_checks(x))
    assert res["independence"].warned  # perfectly alternating
    msg = res["stationarity"].message
    assert "KPSS" in msg


def test_warning_messages_name_the_check() -> None:
    msgs = warning_messages(run_checks(ar1(120, 0.9, seed=4)))
    assert any(m.startswith("independence:") for m in msgs)
