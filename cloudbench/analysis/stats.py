"""Exact nonparametric confidence intervals for quantiles, and how many samples they need.

Every function here is pure and names its method. The central one,
:func:`quantile_ci_ranks`, picks the order statistics ``X_(j) <= q_p <= X_(k)``
of an i.i.d. sample of size ``n`` from the binomial distribution of the number
of observations below the true ``p``-quantile (Le Boudec, *Performance
Evaluation of Computer and Communication Systems*, 2010, Thm. 2.1)::

    P(X_(j) <= q_p <= X_(k)) >= B(k-1) - B(j-1),    B = CDF of Binomial(n, p)

with equality for continuous distributions.

Rank convention (1-based ranks, ``1 <= j < k <= n``)
----------------------------------------------------
The coverage of ``(j, k)`` is the binomial mass on ``i = j, ..., k-1``. Among
those terms (``1 <= i <= n-1``) we take the most probable ones first, starting
from the mode (about ``n*p``) and always adding the more probable neighbour,
*both* neighbours when they are equally probable, until the mass reaches the
level. Because the binomial pmf is unimodal, the ``m`` most probable terms form
an interval, so this gives the shortest rank interval with coverage >= level,
centred on ``n*p``. The tie rule keeps it symmetric when the pmf is (``p = 1/2``):
then ``k = n + 1 - j`` with the largest ``j`` that still covers, which is Le
Boudec's table (Appendix A); that is at most one rank
longer than the shortest asymmetric choice. A CI exists iff ``(1, n)`` covers,
i.e. ``1 - p**n - (1-p)**n >= level``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import cast

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.quantiles import quantile_name

FloatArray = NDArray[np.float64]

# Coverage is a sum of floating-point binomial terms; a rounding error must not
# turn an exact tie with the level into "no CI".
_COVERAGE_TOL = 1e-12
# Relative tolerance under which two pmf terms count as equally probable (for
# p = 1/2 they are equal mathematically; scipy may differ in the last bits).
_TIE_RTOL = 1e-9


def _sps() -> ModuleType:
    """scipy.stats, imported on first use: 0.6 s, and the event detector (which imports this
    module) runs in the report's first pass, which would otherwise wait for it to start."""
    from scipy import stats  # noqa: PLC0415

    return cast("ModuleType", stats)


@dataclass(frozen=True)
class QuantileRanks:
    """1-based order-statistic ranks of an exact quantile CI and its coverage."""

    n: int
    p: float
    level: float
    j: int
    k: int
    coverage: float


@dataclass(frozen=True)
class QuantileCI:
    """A sample quantile with its exact CI, or the reason there is none.

    ``lower``/``upper``/``ranks`` are ``None`` when the sample is too small;
    ``note`` then says so and ``n_required`` says how many samples are needed.
    """

    n: int
    p: float
    level: float
    estimate: float
    lower: float | None
    upper: float | None
    ranks: QuantileRanks | None
    n_required: int
    note: str

    @property
    def exists(self) -> bool:
        return self.ranks is not None

    @property
    def relative_half_width(self) -> float | None:
        """Largest distance from the estimate to a CI bound, relative to |estimate|."""
        if self.lower is None or self.upper is None:
            return None
        return relative_half_width(self.estimate, self.lower, self.upper)


def _check_p_level(p: float, level: float) -> None:
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile p must be in (0, 1), got {p}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")


def level_name(level: float) -> str:
    """``95%`` for 0.95."""
    return f"{level * 100:.6g}%"


def ci_exists(n: int, p: float, level: float) -> bool:
    """Whether an exact CI for the p-quantile exists at ``level`` with ``n`` samples.

    Method: the widest interval ``(X_(1), X_(n))`` has coverage
    ``1 - p**n - (1-p)**n`` (Le Boudec, Thm. 2.1); no narrower one covers more.
    """
    _check_p_level(p, level)
    if n < 2:
        return False
    return bool(1.0 - p**n - (1.0 - p) ** n >= level - _COVERAGE_TOL)


@lru_cache(maxsize=256)
def min_n_for_ci(p: float, level: float) -> int:
    """Smallest n with an exact CI for the p-quantile at ``level``.

    Method: ``1 - p**n - (1-p)**n`` increases with n (Le Boudec, Thm. 2.1);
    search upward from the bound ``max(p, 1-p)**n <= 1 - level``.
    E.g. 6 for the median at 95 %, 29 for p90, 299 for p99.
    """
    _check_p_level(p, level)
    # A CI needs max(p, 1-p)**n < 1 - level, so the answer is at least this start.
    big = max(p, 1.0 - p)
    n = max(2, math.floor(math.log(1.0 - level) / math.log(big)))
    while not ci_exists(n, p, level):
        n += 1
    return n


def rank_coverage(n: int, p: float, j: int, k: int) -> float:
    """Coverage ``B(k-1) - B(j-1)`` of ``[X_(j), X_(k)]`` (Le Boudec, Thm. 2.1).

    Computed as ``1 - cdf(j-1) - sf(k-1)`` so that both tails keep full precision.
    """
    if not 1 <= j < k <= n:
        raise ValueError(f"need 1 <= j < k <= n, got j={j}, k={k}, n={n}")
    return float(1.0 - _sps().binom.cdf(j - 1, n, p) - _sps().binom.sf(k - 1, n, p))


@lru_cache(maxsize=8192)
def quantile_ci_ranks(n: int, p: float, level: float = 0.95) -> QuantileRanks | None:
    """Order-statistic ranks ``(j, k)`` of the exact CI for the p-quantile, or None.

    Method: Le Boudec, Thm. 2.1, with the rank convention of this module's
    docstring (most probable binomial terms first, equal terms together);
    coverage >= ``level`` is guaranteed. ``None`` when ``n`` is too small
    (see :func:`min_n_for_ci`).
    """
    _check_p_level(p, level)
    if not ci_exists(n, p, level):
        return None
    # Terms more than 12 sd (+12) from the mean hold < 1e-30 of the mass and
    # are smaller than every term the interval can need, so they are skipped.
    reach = 12.0 * math.sqrt(n * p * (1 - p)) + 12.0
    i = np.arange(max(1, math.floor(n * p - reach)), min(n - 1, math.ceil(n * p + reach)) + 1)
    pmf = _sps().binom.pmf(i, n, p)
    order = np.argsort(-pmf, kind="stable")
    mass = np.cumsum(pmf[order])
    last = min(int(np.searchsorted(mass, level - _COVERAGE_TOL)), len(order) - 1)
    cut = pmf[order[last]]
    chosen = i[pmf >= cut * (1.0 - _TIE_RTOL)]
    j, k = int(chosen.min()), int(chosen.max()) + 1
    return QuantileRanks(n=n, p=p, level=level, j=j, k=k, coverage=rank_coverage(n, p, j, k))


def sample_quantile_sorted(xs: FloatArray, p: float) -> float:
    """The p-quantile of an ascending array: Hyndman & Fan definition 7 (numpy linear)."""
    h = (len(xs) - 1) * p
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (h - lo) * (xs[hi] - xs[lo]))


def relative_half_width(estimate: float, lower: float, upper: float) -> float:
    """``max(estimate - lower, upper - estimate) / |estimate|`` (inf when estimate is 0).

    The larger side is used because the exact CI is asymmetric and both bounds
    must lie within the error band.
    """
    half = max(estimate - lower, upper - estimate)
    if estimate == 0.0:
        return 0.0 if half == 0.0 else math.inf
    return half / abs(estimate)


def no_ci_message(n: int, p: float, level: float) -> str:
    """Why there is no exact CI for quantile ``p`` from ``n`` values, and how many more it needs."""
    need = min_n_for_ci(p, level)
    return (
        f"no {level_name(level)} CI for the {quantile_name(p)} from n={n}: an exact CI "
        f"needs n >= {need} (1 - p^n - (1-p)^n >= {level:.6g}), {need - n} more"
    )


def quantile_ci(values: NDArray[np.floating] | list[float], p: float = 0.5,
                level: float = 0.95) -> QuantileCI:
    """Sample p-quantile (Hyndman & Fan 7) with its exact order-statistic CI.

    Method: Le Boudec, Thm. 2.1 (see :func:`quantile_ci_ranks`). When ``n`` is
    too small the estimate is still given, with no CI and a note saying the
    ``n`` required.
    """
    _check_p_level(p, level)
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    need = min_n_for_ci(p, level)
    if n == 0:
        return QuantileCI(0, p, level, math.nan, None, None, None, need, no_ci_message(0, p, level))
    ranks = quantile_ci_ranks(n, p, level)
    # only four order statistics are read (the estimate's two and the bounds'): a partition at
    # them, not a sort (a step's sides hold a million echoes each)
    h = math.floor((n - 1) * p)
    kth = {h, min(h + 1, n - 1), *((ranks.j - 1, ranks.k - 1) if ranks is not None else ())}
    xs = np.partition(values, sorted(kth))
    est = sample_quantile_sorted(xs, p)  # reads the two order statistics placed above
    if ranks is None:
        return quantile_ci_at(n, p, level, est, None)
    return quantile_ci_at(n, p, level, est, (float(xs[ranks.j - 1]), float(xs[ranks.k - 1])))


def quantile_ci_at(n: int, p: float, level: float, estimate: float,
                   bounds: tuple[float, float] | None) -> QuantileCI:
    """The :class:`QuantileCI` of :func:`quantile_ci` from its numbers: a sample of ``n``, its
    estimate and its CI's bounds (None when ``n`` allows no CI); the ranks, the ``n`` required
    and the note follow from ``n``, ``p`` and ``level`` (a result read back from JSON)."""
    _check_p_level(p, level)
    need = min_n_for_ci(p, level)
    ranks = quantile_ci_ranks(n, p, level) if n > 0 else None
    if ranks is None or bounds is None:
        return QuantileCI(n, p, level, estimate, None, None, None, need, no_ci_message(n, p, level))
    note = (
        f"ranks {ranks.j}..{ranks.k} of {n}, coverage {ranks.coverage:.4f} >= {level:.6g} "
        "(exact, Le Boudec Thm. 2.1)"
    )
    return QuantileCI(n, p, level, estimate, bounds[0], bounds[1], ranks, need, note)


def z_two_sided(level: float) -> float:
    """Standard normal quantile ``z`` with ``P(|Z| <= z) = level``."""
    return float(_sps().norm.ppf(0.5 + level / 2.0))


def asymptotic_required_n(p: float, level: float, rel_error: float, quantile_value: float,
                          density_at_quantile: float) -> float:
    """Samples needed for a p-quantile CI half-width of ``rel_error * |q_p|``.

    Method: asymptotic normality of the sample quantile (Bahadur; Le Boudec
    Thm. 2.1 for large n): half-width ``≈ z * sqrt(p(1-p)/n) / f(q_p)``; solving
    ``half-width = e * |q_p|`` gives ``n = (z * sqrt(p(1-p)) / (f(q_p) * e * |q_p|))**2``.
    """
    _check_p_level(p, level)
    z = z_two_sided(level)
    return (z * math.sqrt(p * (1 - p)) / (density_at_quantile * rel_error * abs(quantile_value))) ** 2


def normal_required_n(cov: float, rel_error: float, level: float = 0.95, p: float = 0.5) -> float:
    """:func:`asymptotic_required_n` for normal data with coefficient of variation ``cov``.

    With ``q_p = mu(1 + c z_p)`` and ``f(q_p) = phi(z_p) / sigma``:
    ``n = (z * c * sqrt(p(1-p)) / (phi(z_p) * e * (1 + c z_p)))**2``; for the
    median ``phi(0) = 1/sqrt(2 pi)`` so ``n = (z * c * sqrt(pi/2) / e)**2``.
    """
    zp = float(_sps().norm.ppf(p))
    mu, sigma = 1.0, cov
    return asymptotic_required_n(
        p, level, rel_error, mu + sigma * zp, float(_sps().norm.pdf(zp)) / sigma
    )


@dataclass(frozen=True)
class SqrtLawFit:
    """Fit of ``relative half-width ≈ a / sqrt(n)`` on observed sizes.

    ``slope`` is the free log-log slope over all sizes (-1/2 when the law holds).
    """

    a: float
    slope: float
    n_lo: int
    n_hi: int
    points: int
    slope_n_lo: int = 0  # sizes the free slope was fitted on
    slope_n_hi: int = 0

    @property
    def span(self) -> float:
        """How many times larger the largest size of the slope's fit is than its smallest."""
        return self.slope_n_hi / self.slope_n_lo if self.slope_n_lo > 0 else math.nan

    def required_n(self, rel_error: float) -> int:
        return math.ceil((self.a / rel_error) ** 2)


def fit_sqrt_law_rows(sizes: NDArray[np.integer], rel_half_widths: FloatArray) -> tuple[FloatArray, FloatArray]:
    """:func:`fit_sqrt_law`'s ``slope`` and ``a`` for many curves over the same sizes at once.

    ``rel_half_widths`` has shape ``(m, len(sizes))``; row ``i`` gives what
    ``fit_sqrt_law(sizes, rel_half_widths[i])`` gives (nan for both where it gives None), the
    slope as the closed-form weighted least-squares slope (weights ``1/n``) that ``np.polyfit``
    solves, equal to it to rounding. For the bootstrap's thousands of curves per series."""
    n = np.asarray(sizes, dtype=np.float64)[None, :]
    w = np.atleast_2d(np.asarray(rel_half_widths, dtype=np.float64))
    ok = np.isfinite(w) & (w > 0)
    count = ok.sum(axis=1)
    x = np.broadcast_to(np.log(n), w.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(ok, np.log(np.where(ok, w, 1.0)), 0.0)
    n_ok = np.where(ok, n, np.nan)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-nan rows (no usable size)
        mid = (np.nanmin(n_ok, axis=1) + np.nanmax(n_ok, axis=1)) / 2.0
    upper = ok & (n >= mid[:, None])
    upper = np.where((upper.sum(axis=1) < 3)[:, None], ok, upper)
    k = upper.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_a = np.where(upper, y + 0.5 * x, 0.0).sum(axis=1) / k
        v = np.where(ok, 1.0 / n, 0.0)
        xm = (v * x).sum(axis=1) / v.sum(axis=1)
        ym = (v * y).sum(axis=1) / v.sum(axis=1)
        dx = np.where(ok, x - xm[:, None], 0.0)
        sxx = (v * dx * dx).sum(axis=1)
        slope = (v * dx * (y - ym[:, None])).sum(axis=1) / sxx
    few = count < 3
    slope = np.where(few | ~(sxx > 0), np.nan, slope)
    a = np.where(few, np.nan, np.exp(log_a))
    return slope, a


def fit_sqrt_law(sizes: NDArray[np.integer], rel_half_widths: FloatArray) -> SqrtLawFit | None:
    """Fit ``w(n) = a / sqrt(n)`` to relative CI half-widths observed at sizes ``n``.

    Method: the 1/sqrt(n) law of quantile CI width (asymptotic normality of
    sample quantiles), as CONFIRM (Maricq et al., OSDI'18) extrapolates.
    ``log a`` is the least-squares fit of ``log w + log(n)/2`` on the upper half
    of the observed size range, where the conservative rounding of exact ranks
    inflates widths least (fitted on all sizes, the prediction overshoots more).
    ``slope`` is a free least-squares log-log slope over all sizes, each size
    weighted by ``1/n`` so that every octave of ``n`` counts the same; it is a
    diagnostic (near -1/2 for i.i.d. data, near 0 or positive when CIs stop
    shrinking). None with fewer than 3 usable sizes.

    On i.i.d. normal samples of 30-60 repetitions the prediction landed, in
    simulation, between about 1x and 2.5x (10th-90th percentile) of the
    asymptotic n: an order of magnitude, not a promise.
    """
    n = np.asarray(sizes, dtype=np.float64)
    w = np.asarray(rel_half_widths, dtype=np.float64)
    ok = np.isfinite(w) & (w > 0)
    if ok.sum() < 3:
        return None
    n, w = n[ok], w[ok]
    x, y = np.log(n), np.log(w)
    upper = n >= (n.min() + n.max()) / 2.0
    if upper.sum() < 3:
        upper = np.ones_like(upper)
    log_a = float(np.mean(y[upper] + 0.5 * x[upper]))
    slope = float(np.polyfit(x, y, 1, w=np.sqrt(1.0 / n))[0]) if np.ptp(x) > 0 else math.nan
    return SqrtLawFit(a=math.exp(log_a), slope=slope, n_lo=int(n[upper].min()),
                      n_hi=int(n[upper].max()), points=int(upper.sum()),
                      slope_n_lo=int(n.min()), slope_n_hi=int(n.max()))
