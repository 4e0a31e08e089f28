"""The statistics of ``cloudbench compare`` (:mod:`cloudbench.analysis.compare`).

Exact pieces against brute force, verdicts on samples whose answer is known, and the rates at the
unit that varies: null pairs of campaigns with per-run effects (:mod:`cloudbench.testing.adversarial`)
compared one value per run, against the rates the issue promises (3 Monte-Carlo SEs of slack).
The full-size runs are ``bench/bench_compare.py``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from cloudbench.analysis.compare import (
    EXACT_MAX_CELLS,
    MIN_N,
    Threshold,
    compare_samples,
    decide,
    hl_shift,
    holm,
    mw_null_cdf,
    mw_rank,
    reduce_per_run,
)
from cloudbench.testing.adversarial import repetitions, round_us

FIVE = Threshold(0.05, True)


def se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize(("m", "n"), [(1, 1), (2, 3), (3, 4), (4, 4), (5, 3)])
def test_mann_whitney_null_distribution_is_exact(m: int, n: int) -> None:
    """Every placement of A's ranks among m + n is equally likely; U counts pairs a < b."""
    counts = np.zeros(m * n + 1)
    for pos in itertools.combinations(range(m + n), m):
        a = set(pos)
        u, seen_a = 0, 0
        for i in range(m + n):
            if i in a:
                seen_a += 1
            else:
                u += seen_a  # every a placed below this b
        counts[u] += 1
    assert np.allclose(mw_null_cdf(m, n), np.cumsum(counts) / counts.sum())


def test_rank_matches_scipys_exact_test() -> None:
    """[d_(k), d_(mn+1-k)] excludes 0 exactly when scipy's exact two-sided test rejects."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        a, b = rng.normal(0, 1, 7), rng.normal(0.8, 1, 9)
        s = hl_shift(a, b)
        assert s.ci95 is not None
        rejects = sps.mannwhitneyu(b, a, method="exact").pvalue <= 0.05
        assert rejects == (not s.ci95[0] <= 0 <= s.ci95[1])


def test_no_interval_below_six_per_side_and_a_verdict_that_says_so() -> None:
    assert mw_rank(2, 2, 0.05) == 0
    c = compare_samples([1.0, 1.1, 0.9, 1.0, 1.05], [2.0, 2.1, 1.9, 2.0, 2.05, 2.2], FIVE)
    (d,) = decide([c], ["lower"])
    assert d.ratio_ci is None and d.diff_ci is None and d.median_a.lower is None
    assert d.verdict == "inconclusive (n too small)"
    assert d.ratio is not None and d.ratio > 1.8  # the estimate is still given
    assert MIN_N == 6


def test_reduce_per_run_gives_one_value_per_run_and_keeps_a_single_run() -> None:
    x, unit = reduce_per_run([1, 2, 3, 10, 11, 30], ["r1", "r1", "r1", "r2", "r2", "r3"])
    assert unit == "run" and x.tolist() == [2.0, 10.5, 30.0]
    x, unit = reduce_per_run([1, 2, 3], ["r1", "r1", "r1"])
    assert unit == "repetition" and x.tolist() == [1.0, 2.0, 3.0]


def test_verdicts_on_known_answers() -> None:
    rng = np.random.default_rng(1)
    base = 100 + rng.normal(0, 2, 20)
    other = 100 + rng.normal(0, 2, 20)
    rows = [
        compare_samples(base, other * 1.2, FIVE),   # latency 20 % up: worse
        compare_samples(base, other * 0.8, FIVE),   # latency 20 % down: better
        compare_samples(base, other * 1.005, FIVE),  # 0.5 % with 2 % noise at n=20: equivalent
        compare_samples(base, other * 1.2, FIVE),   # throughput 20 % up: better
        compare_samples(base, other * 1.2, FIVE),   # no declared direction: different
        compare_samples(100 + rng.normal(0, 40, 8), 100 + rng.normal(0, 40, 8), FIVE),  # noisy: inconclusive
    ]
    d = decide(rows, ["lower", "lower", "lower", "higher", None, "lower"])
    assert [r.verdict for r in d] == ["worse", "better", "equivalent", "better", "different", "inconclusive"]
    assert d[0].ratio_ci is not None and d[0].ratio_ci[0] < 1.2 < d[0].ratio_ci[1]
    assert d[5].more is not None and d[5].more > 0
    assert all(r.p_holm is not None and r.p is not None and r.p_holm >= r.p for r in d)


def test_equivalent_needs_the_90_interval_inside_the_band_not_a_small_estimate() -> None:
    """A near-zero estimate from noisy data is inconclusive, not equivalent (absence of evidence)."""
    rng = np.random.default_rng(5)
    a = 100 + rng.normal(0, 30, 8)
    b = a[::-1].copy()  # same values: estimate 0, interval wide
    (d,) = decide([compare_samples(a, b, FIVE)], ["lower"])
    assert abs(d.ratio - 1) < 1e-9 if d.ratio is not None else False
    assert d.verdict == "inconclusive"


def test_a_zero_median_decides_on_the_difference() -> None:
    a = np.zeros(8)
    b = np.array([0, 0, 0.01, 0.02, 0.0, 0.03, 0.01, 0.02])
    c = compare_samples(a, b, FIVE)
    assert c.ratio is None and c.decided_on == "diff"
    assert c.diff_ci is not None and c.diff_ci[0] <= c.diff <= c.diff_ci[1]
    same = compare_samples(a, np.zeros(8), FIVE)
    (d,) = decide([same], ["lower"])
    assert d.verdict == "equivalent" and d.p == 1.0


def test_absolute_threshold_decides_on_the_difference() -> None:
    rng = np.random.default_rng(2)
    a, b = 300 + rng.normal(0, 1, 12), 310 + rng.normal(0, 1, 12)
    (small,) = decide([compare_samples(a, b, Threshold(50, False, "us"))], ["lower"])
    (large,) = decide([compare_samples(a, b, Threshold(5, False, "us"))], ["lower"])
    assert small.decided_on == "diff" and small.verdict == "equivalent"
    assert large.verdict == "worse"


def test_holm_is_holm() -> None:
    from statsmodels.stats.multitest import multipletests

    assert holm([0.01, None, 0.04, 0.03]) == pytest.approx([0.03, None, 0.06, 0.06])
    ps = np.random.default_rng(4).uniform(0, 0.2, 30) ** 2
    assert holm(list(ps)) == pytest.approx(list(multipletests(ps, method="holm")[1]))


# ------------------------------------------------- rates at the unit that varies

PAIRS = 400
RUNS, REPS = 8, 3


def null_pair(rng: np.random.Generator, factor: float = 1.0,
              rounded: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Two campaigns of RUNS runs x REPS repetitions, per-run effects as large as the repetition
    noise; B's values times ``factor``. ``rounded``: at 20 µs in whole µs (ties everywhere)."""
    data = repetitions(rng, 2, RUNS * REPS, "run_effects", run_size=REPS, level=20.0 if rounded else 100.0).values
    if rounded:
        data = round_us(data)
    return data[0], data[1] * factor


def run_ids() -> list[str]:
    return [f"r{i // REPS}" for i in range(RUNS * REPS)]


def rates(factor: float, per_run: bool, seed: int = 7, rounded: bool = False) -> tuple[float, float, float]:
    """False better/worse share, share of 95 % ratio intervals covering ``factor``, equivalent share."""
    rng = np.random.default_rng(seed)
    ids = run_ids()
    flagged = covered = equivalent = 0
    for _ in range(PAIRS):
        a, b = null_pair(rng, factor, rounded)
        if per_run:
            a, _ = reduce_per_run(a, ids)
            b, _ = reduce_per_run(b, ids)
        (d,) = decide([compare_samples(a, b, FIVE)], ["lower"])
        flagged += d.verdict in ("better", "worse")
        # with ties an end point can equal the truth, up to the rounding of exp(log)
        covered += d.ratio_ci is not None and d.ratio_ci[0] * (1 - 1e-9) <= factor <= d.ratio_ci[1] * (1 + 1e-9)
        equivalent += d.verdict == "equivalent"
    return flagged / PAIRS, covered / PAIRS, equivalent / PAIRS


def test_null_campaigns_per_run_rates_hold() -> None:
    """One value per run: false better/worse <= 5 %, the interval covers >= 95 %."""
    false_rate, coverage, _ = rates(1.0, per_run=True)
    assert false_rate <= 0.05 + 3 * se(0.05, PAIRS), false_rate
    assert coverage >= 0.95 - 3 * se(0.95, PAIRS), coverage


def test_pooling_repetitions_of_several_runs_would_break_the_rates() -> None:
    """The same data with repetitions as units (what a spreadsheet does): the interval is too
    narrow for per-run effects. Shows the rate tests above can fail."""
    _, coverage, _ = rates(1.0, per_run=False)
    assert coverage < 0.95 - 3 * se(0.95, PAIRS), coverage


def test_a_difference_exactly_at_the_threshold_is_rarely_called_equivalent() -> None:
    _, coverage, equivalent = rates(1.05, per_run=True, seed=11)
    assert equivalent <= 0.05 + 3 * se(0.05, PAIRS), equivalent
    assert coverage >= 0.95 - 3 * se(0.95, PAIRS), coverage


def test_values_rounded_to_whole_microseconds_keep_the_rates() -> None:
    """Ties (20 µs medians stored in whole µs): the closed interval stays conservative."""
    false_rate, coverage, _ = rates(1.0, per_run=True, seed=13, rounded=True)
    assert false_rate <= 0.05 + 3 * se(0.05, PAIRS), false_rate
    assert coverage >= 0.95 - 3 * se(0.95, PAIRS), coverage
    _, coverage, equivalent = rates(1.05, per_run=True, seed=17, rounded=True)
    assert coverage >= 0.95 - 3 * se(0.95, PAIRS), coverage
    assert equivalent <= 0.05 + 3 * se(0.05, PAIRS), equivalent


def test_normal_approximation_beyond_the_exact_range_is_conservative() -> None:
    """Past EXACT_MAX_CELLS the rank comes from the normal approximation: never a rank that
    covers less than the level, at most two ranks wider than the exact one."""
    m, n = 101, 101
    assert m * n > EXACT_MAX_CELLS
    cdf = mw_null_cdf(m, n)  # exact, computed here only to check
    exact = int(np.searchsorted(cdf, 0.025 + 1e-12, side="right"))
    approx = mw_rank(m, n, 0.05)
    assert exact - 2 <= approx <= exact
    assert cdf[approx - 1] <= 0.025
