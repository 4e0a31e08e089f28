"""Throughput analysis against values computed independently (numpy, hand tables, simulation)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cloudbench.analysis.throughput import (
    asymmetry,
    capacity_lower_bound,
    cv_rmse,
    detect_level_shift,
    falling_trend,
    series_stats,
    windowed_means,
)


def series(rates: list[float], dt: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r = np.asarray(rates, dtype=float)
    t0 = np.arange(len(r)) * dt
    return t0, t0 + dt, r * dt / 8.0


def test_series_stats_against_numpy() -> None:
    rng = np.random.default_rng(3)
    r = rng.normal(500e6, 40e6, 30)
    t0, t1, b = series(list(r))
    st = series_stats(b, t1 - t0)
    assert st.n == 30
    assert st.mean_bps == pytest.approx(r.mean())
    assert st.cov == pytest.approx(np.std(r, ddof=1) / r.mean())
    assert st.percentiles["p50"] == pytest.approx(np.median(r))
    assert st.percentiles["p95"] == pytest.approx(np.percentile(r, 95))


def test_mean_weighs_a_short_tail_by_its_length_and_leaves_it_out_of_the_spread() -> None:
    t0 = np.array([0.0, 1.0, 2.0])
    t1 = np.array([1.0, 2.0, 2.1])
    b = np.array([100e6, 100e6, 50e6]) / 8 * np.array([1.0, 1.0, 0.1])
    st = series_stats(b, t1 - t0)
    assert st.n == 2 and st.cov == 0.0
    assert st.mean_bps == pytest.approx((100e6 * 2 + 50e6 * 0.1) / 2.1)


def test_capacity_lower_bound_is_the_max_of_full_5s_windows() -> None:
    # 12 s: windows [0,5) at 100, [5,10) at 300, [10,12) incomplete (at 900: must not count)
    rates = [100e6] * 5 + [300e6] * 5 + [900e6] * 2
    t0, t1, b = series(rates)
    assert list(windowed_means(t0, t1, b)) == pytest.approx([100e6, 300e6])
    assert capacity_lower_bound(t0, t1, b) == pytest.approx(300e6)
    assert capacity_lower_bound(*series([500e6] * 4)) is None


def test_capacity_windows_average_a_spike_away() -> None:
    rates = [100e6] * 4 + [600e6] + [100e6] * 5
    assert capacity_lower_bound(*series(rates)) == pytest.approx(200e6)


@pytest.mark.parametrize("frac", [0.0, 0.3, 0.75])
def test_level_shift_time_is_interpolated_inside_the_straddling_interval(frac: float) -> None:
    high, low = 800e6, 400e6
    tau = 6.0 + frac
    rates = []
    for i in range(15):
        h = min(max(tau - i, 0.0), 1.0)  # share of interval [i, i + 1) before the shift
        rates.append(high * h + low * (1 - h))
    s = detect_level_shift(*series(rates))
    assert s is not None
    assert s.time_s == pytest.approx(tau, abs=1e-9)
    assert s.high_bps == pytest.approx(high) and s.low_bps == pytest.approx(low)
    assert s.volume_before_bits == pytest.approx(high * tau)


def test_level_shift_with_noise_lands_near_the_truth() -> None:
    rng = np.random.default_rng(7)
    rates = list(rng.normal(700e6, 30e6, 20)) + list(rng.normal(400e6, 10e6, 40))
    s = detect_level_shift(*series(rates))
    assert s is not None
    assert abs(s.time_s - 20.0) < 1.0
    assert s.high_bps == pytest.approx(700e6, rel=0.03)
    assert s.low_bps == pytest.approx(400e6, rel=0.02)
    assert s.high_sd == pytest.approx(30e6, rel=0.5)


@pytest.mark.parametrize(
    "rates",
    [
        [500e6] * 20,  # flat
        [500e6, 300e6] * 10,  # alternating, not a shift
        [300e6] * 10 + [600e6] * 10,  # low → high is not reported
        [500e6] * 10 + [420e6] * 10,  # a 16 % drop is under the 25 % threshold
        [500e6] * 10 + [200e6] * 3 + [500e6] * 7,  # a dip that comes back
    ],
)
def test_no_level_shift(rates: list[float]) -> None:
    assert detect_level_shift(*series(rates)) is None


def test_cv_rmse_by_hand() -> None:
    x, y = [1.0, 2.0, 3.0], [1.0, 2.0, 5.0]
    # sqrt(mean([0, 0, 4])) / mean(2, 8/3)
    assert cv_rmse(x, y) == pytest.approx(math.sqrt(4 / 3) / ((2 + 8 / 3) / 2))
    assert cv_rmse(x, x) == 0.0
    with pytest.raises(ValueError):
        cv_rmse([1.0], [1.0, 2.0])


def test_asymmetry() -> None:
    a = asymmetry(900e6, 300e6)
    assert a.ratio == pytest.approx(3.0) and a.log2_ratio == pytest.approx(math.log2(3))
    assert a.relative_difference == pytest.approx(600 / 900)


def test_falling_trend() -> None:
    t = falling_trend([190.0, 150.0, 120.0, 80.0, 60.0])
    assert t is not None and t.falling and t.tau == pytest.approx(-1.0)
    assert t.p == pytest.approx(1 / 120)  # exact one-sided: 1 of 5! orders
    flat = falling_trend([100.0, 100.5, 99.8, 100.2, 100.1, 99.9])
    assert flat is not None and not flat.falling
    tiny = falling_trend([100.0, 99.9, 99.8, 99.7, 99.6])  # monotone but 0.4 %: not a bucket
    assert tiny is not None and not tiny.falling
    assert falling_trend([3.0, 2.0, 1.0]) is None
    up = falling_trend([1.0, 2.0, 3.0, 4.0, 5.0])
    assert up is not None and not up.falling
