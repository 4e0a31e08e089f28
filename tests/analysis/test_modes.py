"""Multimodality of latency distributions (cloudbench.analysis.modes): the dip test, modes and shares.

The bimodal fixture is the blog's example (Latency Sensei, "three latency
anomalies"): a median of 0.45 ms with a few percent of the round trips in modes
near 10 and 20 ms, so that p90 falls between modes. Its truth is known by
construction: the modes' locations and shares.
"""

from __future__ import annotations

import diptest
import numpy as np
import pytest

from cloudbench.analysis.modes import (
    bounded_sample,
    find_modes,
    find_modes_histogram,
    sample_from_histogram,
)

SHARES = (0.85, 0.07, 0.08)
CENTRES_US = (450.0, 10_000.0, 20_000.0)


def blog_rtts(n: int, seed: int = 1, shares: tuple[float, ...] = SHARES) -> np.ndarray:
    """RTTs in µs: lognormal around 0.45 ms, normal modes near 10 and 20 ms."""
    rng = np.random.default_rng(seed)
    k = rng.multinomial(n, shares)
    return rng.permutation(
        np.concatenate(
            [
                rng.lognormal(np.log(450.0), 0.15, k[0]),
                rng.normal(10_000.0, 600.0, k[1]),
                rng.normal(20_000.0, 900.0, k[2]),
            ]
        )
    )


def test_the_blogs_bimodal_latencies_have_three_modes_with_their_shares() -> None:
    x = blog_rtts(200_000)
    assert np.median(x) == pytest.approx(450, rel=0.05)  # the median alone sees nothing
    r = find_modes(x)
    assert r.multimodal and r.p_value < 1e-6 and r.n == 200_000 and r.n_tested == 20_000
    assert len(r.modes) == 3
    for mode, centre, share in zip(r.modes, CENTRES_US, SHARES, strict=True):
        assert mode.location == pytest.approx(centre, rel=0.08)
        assert mode.share == pytest.approx(share, abs=0.01)
        assert mode.low < centre < mode.high
    assert sum(m.share for m in r.modes) == pytest.approx(1.0)
    # p90 and p95 sit near the cumulative shares 0.85 and 0.92: unstable; p50 and p99 are not
    assert r.unstable_percentiles((50, 90, 95, 99)) == [90, 95]


def test_percentiles_deep_inside_a_small_tail_mode_are_not_called_unstable() -> None:
    # 28 % near 28 µs, 70 % near 60 µs, 2 % near 1.8 ms (as in a testbed run: CPU wake-ups, stalls)
    rng = np.random.default_rng(9)
    k = rng.multinomial(100_000, (0.28, 0.70, 0.02))
    x = np.concatenate(
        [
            rng.lognormal(np.log(28), 0.1, k[0]),
            rng.lognormal(np.log(60), 0.1, k[1]),
            rng.lognormal(np.log(1800), 0.2, k[2]),
        ]
    )
    r = find_modes(x)
    assert r.multimodal and [round(m.share, 2) for m in r.modes] == [0.28, 0.70, 0.02]
    # p25 sits below the 28 % cut, p95 below the 98 % one; p99.9 needs the 2 % mode to vanish
    assert r.unstable_percentiles((25, 50, 95, 99.9, 99.99)) == [25, 95]


def test_the_variants_p90_moves_between_modes_while_the_modes_stay() -> None:
    """The blog's point: a few percent moved between modes changes p90 from ~10 ms to < 1 ms."""
    a, b = blog_rtts(100_000, seed=2, shares=(0.85, 0.07, 0.08)), blog_rtts(100_000, seed=3, shares=(0.91, 0.05, 0.04))
    assert np.percentile(a, 90) > 9_000 and np.percentile(b, 90) < 1_000
    ra, rb = find_modes(a), find_modes(b)
    assert ra.multimodal and rb.multimodal
    assert [round(m.location, -3) for m in ra.modes[1:]] == [round(m.location, -3) for m in rb.modes[1:]]


@pytest.mark.parametrize(
    "unimodal",
    [
        lambda rng: rng.lognormal(np.log(450.0), 0.3, 200_000),  # skewed
        lambda rng: 450.0 + rng.exponential(100.0, 200_000),  # a floor and an exponential tail
        lambda rng: rng.normal(450.0, 20.0, 200_000),
    ],
    ids=["lognormal", "floor+exponential", "normal"],
)
def test_unimodal_latencies_are_not_called_multimodal(unimodal: object) -> None:
    x = unimodal(np.random.default_rng(5))  # type: ignore[operator]
    r = find_modes(x)
    assert not r.multimodal and r.p_value > 0.05
    assert len(r.modes) == 1 and r.modes[0].share == 1.0
    assert r.unstable_percentiles((50, 90, 99)) == []


def test_false_alarms_stay_below_alpha_on_unimodal_samples() -> None:
    rng = np.random.default_rng(11)
    alarms = sum(find_modes(rng.lognormal(0.0, 0.5, 2_000), seed=i).multimodal for i in range(100))
    assert alarms <= 4  # alpha = 0.01: 1 expected; P(> 4 | p = 0.01) < 0.4 %


def test_the_dip_is_the_librarys_on_the_log_of_the_values() -> None:
    x = blog_rtts(5_000)
    r = find_modes(x, max_n=10_000)  # all of it: the sample is the input
    dip, p = diptest.diptest(np.log(x))
    assert r.dip == pytest.approx(float(dip)) and r.p_value == pytest.approx(float(p))


def test_a_histogram_gives_the_modes_of_its_values() -> None:
    x = blog_rtts(300_000)
    edges = np.geomspace(50, 100_000, 600)
    counts, _ = np.histogram(x, edges)
    r = find_modes_histogram(edges, counts)
    assert r.multimodal and r.n == counts.sum() and len(r.modes) == 3
    for mode, centre, share in zip(r.modes, CENTRES_US, SHARES, strict=True):
        assert mode.location == pytest.approx(centre, rel=0.08)
        assert mode.share == pytest.approx(share, abs=0.01)
    unimodal, _ = np.histogram(np.random.default_rng(4).lognormal(np.log(450.0), 0.3, 300_000), edges)
    assert not find_modes_histogram(edges, unimodal).multimodal


def test_inputs_are_bounded_so_large_distributions_scale() -> None:
    x = blog_rtts(2_000_000)
    s = bounded_sample(x, 1000, seed=3)
    assert len(s) == 1000 and len(np.unique(s)) == 1000 and np.isin(s, x).all()
    holes = x.copy()
    holes[::3] = np.nan  # timeouts
    holes[1::7] = 0.0
    s = bounded_sample(holes, 1000, seed=3)
    assert len(s) == 1000 and np.isfinite(s).all() and (s > 0).all() and np.isin(s, x).all()
    r = find_modes(holes)
    assert r.n == int(np.count_nonzero(np.isfinite(holes) & (holes > 0))) and len(r.modes) == 3
    assert sum(m.share for m in r.modes) == pytest.approx(1.0)
    r = find_modes(x)
    assert r.n_tested == 20_000 and r.n == 2_000_000 and len(r.modes) == 3
    edges = np.array([1.0, 2.0, 4.0])
    h = sample_from_histogram(edges, np.array([10**9, 3 * 10**9]), max_n=4000, seed=1)
    assert len(h) == 4000 and ((h >= 1) & (h < 4)).all()
    assert (h >= 2).mean() == pytest.approx(0.75, abs=0.03)


def test_degenerate_inputs() -> None:
    assert not find_modes(np.full(100, 5.0)).multimodal
    assert find_modes(np.array([np.nan, np.inf, 3.0])).n == 1
    assert find_modes(np.array([])).modes == ()
    with pytest.raises(ValueError, match="increasing edges"):
        find_modes_histogram(np.array([2.0, 1.0]), np.array([3]))


@pytest.mark.parametrize("factor", [1.0, 0.25])
def test_density_is_scipys_kde(factor: float) -> None:
    """The numpy density equals gaussian_kde's on a log-RTT sample spanning 40 µs to 10 s (where
    most kernels underflow), at Silverman's bandwidth and a quarter of it, and has the same peaks."""
    from scipy.stats import gaussian_kde

    from cloudbench.analysis.modes import _density

    rng = np.random.default_rng(7)
    logs = np.log(np.concatenate([rng.lognormal(np.log(45), 0.2, 15_000), rng.lognormal(np.log(900), 0.5, 4_000),
                                  rng.uniform(1e3, 1e7, 1_000)]))
    kde = gaussian_kde(logs, bw_method="silverman")
    kde.set_bandwidth(kde.factor * factor)
    grid = np.linspace(logs.min() - 0.5, logs.max() + 0.5, 512)
    want = kde(grid)
    got = _density(logs, grid, float(np.sqrt(kde.covariance[0, 0])))
    assert np.max(np.abs(got - want)) <= 1e-12 * want.max()

    def peaks(d: np.ndarray) -> np.ndarray:
        return np.flatnonzero((d[1:-1] > d[:-2]) & (d[1:-1] >= d[2:]))

    assert len(peaks(want)) >= 2 and np.array_equal(peaks(got), peaks(want))
