"""The aggregates the HTML report's figures draw from: box statistics, CCDF
points, per-pair windowed means and binned rates, checked against numpy directly."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cloudbench.analysis.latency import CCDF_EXCEEDANCE, box_stats, ccdf_points
from cloudbench.analysis.throughput import binned_rates
from tests.analysis.test_latency import make_data

# the row-level oracle the engine is compared with (tests/workloads/echo/test_engine.py)
from tests.workloads.echo.numpy_reference import group_boxes, group_tails, pair_windowed_means, windowed_means


def test_box_stats_are_numpy_percentiles_of_the_finite_rtts() -> None:
    rng = np.random.default_rng(3)
    xs = rng.lognormal(5, 0.5, 5001)
    with_nan = np.concatenate([xs, [np.nan] * 7])
    b = box_stats(with_nan)
    want = np.percentile(xs, [5, 25, 50, 75, 95])
    assert [b[k] for k in ("p5", "p25", "p50", "p75", "p95")] == pytest.approx(list(want), rel=1e-12)
    assert b["mean"] == pytest.approx(xs.mean())
    assert all(np.isnan(v) for v in box_stats(np.array([np.nan])).values())


def test_ccdf_points_reach_p99999_only_with_enough_replies() -> None:
    rng = np.random.default_rng(4)
    big = rng.exponential(100.0, 200_000)
    pts = ccdf_points(big)
    levels = [e for e, _ in pts]
    # every level down to p99.999, then the largest RTT at 1/n
    assert levels[:-1] == pytest.approx(list(CCDF_EXCEEDANCE)) and levels[0] == 1.0
    assert pts[-1] == (pytest.approx(1 / 200_000), big.max())
    # each point is the type-7 quantile at 1 - level: the share of RTTs above it is that level
    for e, x in pts[1:-1]:
        assert np.mean(big > x) == pytest.approx(e, rel=0.15, abs=2e-5)
        assert x == pytest.approx(np.percentile(big, 100 * (1 - e)))
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(pts))  # x grows as P falls

    small = rng.exponential(100.0, 50)
    pts = ccdf_points(small)
    assert min(e for e, _ in pts) == pytest.approx(1 / 50)  # no level below what 50 replies show
    assert pts[-1][1] == small.max()
    assert ccdf_points(np.array([np.nan, np.nan])) == []


def test_group_boxes_and_tails_leave_out_warmup_and_timeouts() -> None:
    rng = np.random.default_rng(5)
    rtt = rng.uniform(100, 200, size=(2, 2, 50))
    timeout = np.zeros(rtt.shape, dtype=bool)
    timeout[0, 1, 10] = True
    d = make_data(rtt, timeout, ["a", "b"])
    boxes = {b["group"]: b for b in group_boxes(d)}
    cross = rtt[[0, 1], [1, 0], 2:].ravel()  # group 1 = the two off-diagonal pairs, rounds 2.. (no warm-up)
    cross = cross[~np.isin(cross, [rtt[0, 1, 10]])]
    assert boxes["same_subnet"]["count"] == len(cross) == 95
    assert boxes["same_subnet"]["p75"] == pytest.approx(np.percentile(cross, 75))
    tails = [t for t in group_tails(d) if t["group"] == "same_subnet"]
    assert tails[-1]["rtt_us"] == pytest.approx(cross.max()) and tails[-1]["exceedance"] == pytest.approx(1 / 95)


def test_pair_windows_average_to_the_group_windows() -> None:
    rng = np.random.default_rng(6)
    rtt = rng.uniform(100, 200, size=(3, 3, 100))
    d = make_data(rtt, np.zeros(rtt.shape, dtype=bool), ["a", "b", "c"])
    pairs = pair_windowed_means(d, 0.25)  # rounds every 10 ms: 25 rounds a window
    groups = windowed_means(d, 0.25)
    assert {(p["src"], p["dst"]) for p in pairs} == {(a, b) for a in "abc" for b in "abc"}
    for g in groups:
        ps = [p for p in pairs if p["group"] == g["group"] and p["window"] == g["window"]]
        assert sum(p["count"] for p in ps) == g["count"]
        assert sum(p["mean"] * p["count"] for p in ps) / g["count"] == pytest.approx(g["mean"])
    one = next(p for p in pairs if (p["src"], p["dst"], p["window"]) == ("a", "c", 1))
    assert one["mean"] == pytest.approx(rtt[0, 2, 25:50].mean()) and one["start_s"] == 0.25


def test_binned_rates_keep_the_volume_and_the_time_axis() -> None:
    t0 = np.arange(0.0, 3600.0, 1.0)
    t1 = t0 + 1.0
    nbytes = np.where(t0 < 1800, 125e6, 12.5e6)  # 1000 then 100 Mbit/s
    mid, rate = binned_rates(t0 + 50.0, t1 + 50.0, nbytes, origin=50.0, max_points=600)
    assert len(mid) == 600 and mid[0] == pytest.approx(3.0) and mid[-1] == pytest.approx(3597.0)
    assert np.sum(rate * 6.0) == pytest.approx(8 * nbytes.sum())  # bins of 6 s keep the bits
    assert rate[0] == pytest.approx(1e9) and rate[-1] == pytest.approx(1e8)
    m2, r2 = binned_rates(t0[:10], t1[:10], nbytes[:10], origin=0.0)
    assert len(m2) == 10 and r2 == pytest.approx(np.full(10, 1e9))
    assert len(binned_rates(np.zeros(0), np.zeros(0), np.zeros(0), 0.0)[0]) == 0
