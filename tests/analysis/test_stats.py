"""Exact quantile CIs: ranks against Le Boudec's table, coverage by simulation, required n."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps

from cloudbench.analysis.stats import (
    asymptotic_required_n,
    ci_exists,
    fit_sqrt_law,
    fit_sqrt_law_rows,
    min_n_for_ci,
    normal_required_n,
    quantile_ci,
    quantile_ci_ranks,
    rank_coverage,
    sample_quantile_sorted,
    z_two_sided,
)

# Exact 95 % median CI ranks (1-based, k = n + 1 - j), Le Boudec's table (Appendix A).
MEDIAN_95_TABLE = {
    6: (1, 6), 7: (1, 7), 8: (1, 8), 9: (2, 8), 10: (2, 9), 11: (2, 10), 12: (3, 10),
    13: (3, 11), 14: (3, 12), 15: (4, 12), 16: (4, 13), 17: (5, 13), 18: (5, 14),
    19: (5, 15), 20: (6, 15),
}


@pytest.mark.parametrize(("n", "jk"), sorted(MEDIAN_95_TABLE.items()))
def test_median_ranks_match_le_boudec_table(n: int, jk: tuple[int, int]) -> None:
    r = quantile_ci_ranks(n, 0.5, 0.95)
    assert r is not None
    assert (r.j, r.k) == jk


@pytest.mark.parametrize(("p", "need"), [(0.5, 6), (0.9, 29), (0.1, 29), (0.99, 299)])
def test_smallest_n_with_a_ci(p: float, need: int) -> None:
    assert min_n_for_ci(p, 0.95) == need
    # The existence condition, computed independently of the module.
    assert 1 - p**need - (1 - p) ** need >= 0.95
    assert 1 - p ** (need - 1) - (1 - p) ** (need - 1) < 0.95
    assert quantile_ci_ranks(need - 1, p, 0.95) is None
    assert quantile_ci_ranks(need, p, 0.95) is not None
    assert ci_exists(need, p, 0.95) and not ci_exists(need - 1, p, 0.95)


def _shortest_length(n: int, p: float, level: float) -> int | None:
    """Brute force over all (j, k): the smallest k - j with coverage >= level."""
    cdf = sps.binom.cdf(np.arange(n + 1), n, p)
    j = np.arange(1, n + 1)[:, None]
    k = np.arange(1, n + 1)[None, :]
    cov = cdf[k - 1] - cdf[j - 1]
    ok = (k > j) & (cov >= level - 1e-12)
    return int((k - j)[ok].min()) if ok.any() else None


@pytest.mark.parametrize("p", [0.05, 0.25, 0.5, 0.75, 0.9])
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_ranks_cover_and_are_shortest(p: float, level: float) -> None:
    for n in (*range(2, 40), 57, 101):
        r = quantile_ci_ranks(n, p, level)
        shortest = _shortest_length(n, p, level)
        if r is None:
            assert shortest is None, (n, p, level)
            continue
        assert 1 <= r.j < r.k <= n
        cov = sps.binom.cdf(r.k - 1, n, p) - sps.binom.cdf(r.j - 1, n, p)
        assert cov >= level - 1e-12
        assert r.coverage == pytest.approx(cov, abs=1e-12)
        assert shortest is not None
        # Shortest, except that the symmetric median takes equal terms in pairs.
        assert r.k - r.j <= shortest + (1 if p == 0.5 else 0), (n, p, level, r)


def test_ranks_symmetric_around_np_for_large_n() -> None:
    # Le Boudec's large-n ranks: n p ∓ z sqrt(n p (1 - p)) (+1 for k).
    n, p = 1000, 0.5
    r = quantile_ci_ranks(n, p, 0.95)
    assert r is not None
    half = z_two_sided(0.95) * math.sqrt(n * p * (1 - p))
    assert abs(r.j - (n * p - half)) <= 1.5
    assert abs(r.k - (n * p + half + 1)) <= 1.5
    assert r.j + r.k == n + 1


def test_rank_coverage_matches_scipy() -> None:
    assert rank_coverage(12, 0.5, 3, 10) == pytest.approx(1 - 2 * (1 + 12 + 66) / 4096)
    with pytest.raises(ValueError):
        rank_coverage(10, 0.5, 5, 5)


@pytest.mark.parametrize(
    ("n", "p", "need"), [(5, 0.5, 6), (0, 0.5, 6), (28, 0.9, 29), (100, 0.99, 299)]
)
def test_too_small_n_is_explained(n: int, p: float, need: int) -> None:
    ci = quantile_ci(np.arange(n, dtype=float), p, 0.95)
    assert not ci.exists
    assert ci.lower is None and ci.upper is None
    assert ci.n_required == need
    assert f"n >= {need}" in ci.note
    assert f"{need - n} more" in ci.note


def test_quantile_ci_takes_the_ranked_values() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=20)
    ci = quantile_ci(x, 0.5, 0.95)
    xs = np.sort(x)
    assert ci.lower == xs[5] and ci.upper == xs[14]  # ranks 6 and 15
    assert ci.estimate == pytest.approx(np.median(x))
    ci90 = quantile_ci(rng.normal(size=50), 0.9, 0.95)
    assert ci90.exists and ci90.lower is not None and ci90.upper is not None
    assert ci90.lower <= ci90.estimate <= ci90.upper


# ------------------------------------------------------------- coverage by simulation

SAMPLES = 4000


def _bimodal_draw(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    first = rng.random(shape) < 0.6
    return np.where(first, rng.normal(0.0, 1.0, shape), rng.normal(4.0, 0.5, shape))


def _bimodal_quantile(p: float) -> float:
    def cdf(x: float) -> float:
        return float(0.6 * sps.norm.cdf(x, 0, 1) + 0.4 * sps.norm.cdf(x, 4, 0.5))

    return float(optimize.brentq(lambda x: cdf(x) - p, -10, 10))


DISTRIBUTIONS: dict[str, tuple[Callable[[np.random.Generator, tuple[int, int]], np.ndarray],
                                Callable[[float], float]]] = {
    "normal": (lambda rng, shape: rng.normal(10.0, 2.0, shape),
               lambda p: float(sps.norm.ppf(p, 10.0, 2.0))),
    "lognormal": (lambda rng, shape: rng.lognormal(0.0, 1.0, shape),
                  lambda p: float(math.exp(sps.norm.ppf(p)))),
    "bimodal": (_bimodal_draw, _bimodal_quantile),
}


def empirical_coverage(draw: Callable[[np.random.Generator, tuple[int, int]], np.ndarray],
                       true_q: float, n: int, j: int, k: int, seed: int) -> float:
    """Share of SAMPLES samples of size n whose [X_(j), X_(k)] holds the true quantile."""
    rng = np.random.default_rng(seed)
    xs = np.sort(draw(rng, (SAMPLES, n)), axis=1)
    return float(np.mean((xs[:, j - 1] <= true_q) & (true_q <= xs[:, k - 1])))


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize(("p", "sizes"), [(0.5, (6, 12, 25, 60)), (0.9, (29, 45, 100))])
def test_coverage_by_simulation(dist: str, p: float, sizes: tuple[int, ...]) -> None:
    draw, quantile = DISTRIBUTIONS[dist]
    for n in sizes:
        r = quantile_ci_ranks(n, p, 0.95)
        assert r is not None
        cov = empirical_coverage(draw, quantile(p), n, r.j, r.k, seed=n)
        assert cov >= 0.95 - 0.01, (dist, p, n, r, cov)


def test_simulation_detects_undercovering_ranks() -> None:
    # Shrinking the exact interval by one rank on each side (CONFIRM-like
    # rounding) must be caught by the same simulation, or the test above proves nothing.
    draw, quantile = DISTRIBUTIONS["normal"]
    r = quantile_ci_ranks(12, 0.5, 0.95)
    assert r is not None
    cov = empirical_coverage(draw, quantile(0.5), 12, r.j + 1, r.k - 1, seed=1)
    assert cov < 0.95 - 0.01


# ------------------------------------------------------------------- required n


def test_normal_required_n_matches_the_derivation() -> None:
    # half-width = z sqrt(p(1-p)/n) / f(q_p); normal median: f = 1/(sigma sqrt(2 pi)),
    # so half-width / mu = z c sqrt(pi/2) / sqrt(n).
    z = float(sps.norm.ppf(0.975))
    for c, e in ((0.05, 0.01), (0.2, 0.05), (0.1, 0.02)):
        assert normal_required_n(c, e) == pytest.approx((z * c * math.sqrt(math.pi / 2) / e) ** 2)
    mu, sigma = 100.0, 5.0
    q = float(sps.norm.ppf(0.9, mu, sigma))
    direct = asymptotic_required_n(0.9, 0.95, 0.01, q, float(sps.norm.pdf(q, mu, sigma)))
    assert normal_required_n(sigma / mu, 0.01, p=0.9) == pytest.approx(direct)


def test_asymptotic_half_width_holds_for_exact_ranks() -> None:
    # Check the derivation against the exact CI on large normal samples.
    n, c = 2000, 0.05
    r = quantile_ci_ranks(n, 0.5, 0.95)
    assert r is not None
    xs = np.sort(np.random.default_rng(0).normal(1.0, c, (300, n)), axis=1)
    half = (xs[:, r.k - 1] - xs[:, r.j - 1]).mean() / 2
    predicted = z_two_sided(0.95) * c * math.sqrt(math.pi / 2) / math.sqrt(n)
    assert half == pytest.approx(predicted, rel=0.08)


def test_sqrt_law_fit_recovers_the_coefficient() -> None:
    sizes = np.arange(10, 200)
    w = 0.7 / np.sqrt(sizes)
    fit = fit_sqrt_law(sizes, w)
    assert fit is not None
    assert fit.a == pytest.approx(0.7)
    assert fit.slope == pytest.approx(-0.5)
    assert fit.required_n(0.01) == math.ceil(70.0**2)
    flat = fit_sqrt_law(sizes, np.full(len(sizes), 0.1))
    assert flat is not None and flat.slope == pytest.approx(0.0, abs=1e-9)
    assert fit_sqrt_law(sizes[:2], w[:2]) is None
    assert fit_sqrt_law(sizes, np.zeros(len(sizes))) is None


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5])
def test_bad_p_or_level_is_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        quantile_ci_ranks(10, bad, 0.95)
    with pytest.raises(ValueError):
        quantile_ci_ranks(10, 0.5, bad)


def test_the_row_fit_is_fit_sqrt_law_row_by_row() -> None:
    """fit_sqrt_law_rows (the slope bootstrap's thousands of fits at once) gives each row's
    fit_sqrt_law slope and a: on convergence curves of bootstrap resamples, with nan, zero and
    inf widths mixed in, rows with fewer than 3 usable sizes (nan), and a row whose upper half
    has fewer than 3 sizes."""
    from cloudbench.analysis.convergence import convergence

    rng = np.random.default_rng(5)
    curves = convergence(np.sort(rng.lognormal(0, 0.5, (40, 30)), axis=1), subsets=20)
    sizes = curves[0].sizes
    w = np.stack([c.relative_half_width for c in curves])
    w[1, ::3] = np.nan
    w[2, 1::4] = 0.0
    w[3, 2] = np.inf
    w[4, 2:] = np.nan  # 2 usable sizes: no fit
    w[5, :] = np.nan
    w[6, len(sizes) // 2:] = np.nan  # upper half of what is left
    slopes, a = fit_sqrt_law_rows(sizes, w)
    assert slopes.shape == a.shape == (len(w),)
    for i, row in enumerate(w):
        f = fit_sqrt_law(sizes, row)
        if f is None:
            assert np.isnan(slopes[i]) and np.isnan(a[i]), i
        else:
            assert slopes[i] == pytest.approx(f.slope, rel=1e-9, abs=1e-12), i
            assert a[i] == pytest.approx(f.a, rel=1e-12), i
    assert np.isnan(slopes[[4, 5]]).all() and np.isfinite(slopes[[0, 1, 2, 3, 6]]).all()


@pytest.mark.parametrize("seed", range(4))
def test_quantile_ci_from_its_partition_equals_the_sorted_arrays_values(seed: int) -> None:
    """quantile_ci reads its four order statistics from a partition: the same numbers as from the
    sorted array, with ties, NaN-free heavy tails, and sizes from 1 to past the ranks' edges."""
    rng = np.random.default_rng(seed)
    for n in [1, 2, 3, 5, 8, 9, 20, 101, 1000, 4097]:
        for x in (rng.standard_t(2, n), np.round(rng.exponential(1.0, n), 1), np.full(n, 3.0)):
            for p, level in ((0.5, 0.95), (0.1, 0.975), (0.9, 0.99), (0.01, 0.95)):
                ci = quantile_ci(x, p, level)
                xs = np.sort(x)
                assert ci.estimate == sample_quantile_sorted(xs, p)
                ranks = quantile_ci_ranks(n, p, level)
                if ranks is None:
                    assert ci.lower is None and ci.upper is None
                else:
                    assert (ci.lower, ci.upper) == (xs[ranks.j - 1], xs[ranks.k - 1])
