"""Change points in one series of a scheduled campaign's runs (pure: arrays in, numbers out).

**The run is the unit.** The caller gives one value per run (its repetitions' median, as
:func:`cloudbench.analysis.diurnal.run_values` reduces them) at the run's time, in time order.

1. **Time of day.** When a period is given, :func:`cloudbench.analysis.diurnal.diurnal_series`
   runs its primary test (a sinusoid at the period with AR(2) errors, GLS) on the run values
   less the best single step fitted jointly with a sinusoid (least squares over every split: a
   step inside the fit would bend the sinusoid and hide part of itself); when it rejects at
   ``alpha`` (per series, not Holm: removing a cycle that is there is safer than keeping it),
   the sinusoid is reported and carried in the sizes' fit (3. below). The search itself runs on
   the values less the sinusoid part of that joint least-squares fit (level, best step,
   sin, cos) whenever the runs span a period,
   found or not: subtracting it only when the diurnal test found one made the subtraction
   depend on the noise (that test rejected in 13 % of flat AR(1) series, and those called a
   change in 11 %), which the test's null series cannot repeat; a fixed projection they can.
2. **Binary segmentation with a CUSUM test** (Page 1954; Csörgő & Horváth 1997, ch. 1): in a
   segment of n runs, ``S_k = Σ_{i<k} (x_i − x̄)``; the candidate change is the ``k`` of the
   largest ``|S_k|`` (at least :data:`MIN_SEGMENT` runs either side) and its statistic
   ``max|S_k| / sqrt(n·σ²_LR)``. The whole series' split gets its p-value from an **AR
   sieve bootstrap** of the search (:func:`sieve_p`: null series from an autoregression of the
   runs around their one mean, less its bias as its own null series show it
   (:func:`debiased_ar`), the sinusoid projected out as above, split and σ²_LR estimated
   again on each); Kolmogorov's law (the supremum of a Brownian bridge,
   ``scipy.stats.kstwobign``), which the further splits keep, called a change in 6.6 % of flat
   AR(1) series at 5 % and 15 % of short ones (see :func:`sieve_p`). ``σ²_LR`` is the **long-run variance** of the runs
   around the two means of the split, AR(1) prewhitened, ``σ²_innovation / (1 − φ)²``
   (Andrews & Monahan 1992), φ with Kendall's bias correction and floored at 0, so runs
   correlated over hours do not pass for a change (around the one mean of the segment, a
   large step read as persistence, φ → 1, and hid itself). A permutation test over runs, or
   the plain variance, would take the runs as exchangeable, which serially correlated runs
   are not: the plain-variance CUSUM calls a change in over 30 % of flat AR(1) series
   (tests/analysis/test_changes.py). When a split is
   significant, both halves are searched again (up to :data:`MAX_CHANGES` changes): each
   segment at its share of the runs times alpha (weighted Bonferroni, so the halves of a series
   with one real change add about alpha of false changes between them, not alpha each), with
   σ²_LR from the whole series around its segments so far and the candidate (a half's own
   runs gave a φ biased low: 7 % false splits at 5 % in halves of flat AR(1) series).
3. **Size** of each change, relative to the level before: ``level after / level before − 1``,
   the levels of the runs between the neighbouring changes from one GLS fit with AR(1) errors
   (statsmodels ``GLSAR`` at the Kendall-corrected φ of the least-squares residuals: an
   indicator per segment, plus sin and cos at the period when a
   sinusoid was removed, so its uncertainty is carried), with a 95 % interval by the delta
   method at Student's t quantile for the runs' effective number ``n(1 − φ)/(1 + φ)``; also the
   absolute difference and its interval. A **marginal neighbour** (an adjacent change found
   later, adjusted p ≥ :data:`MARGINAL`·alpha) widens the interval to hold the intervals of the
   fits without it: a false change beside a real one sits where its segment's mean deviates
   most and biases the level it leaves beside the real change (those intervals covered
   37–64 % of steps without this). Why the interval covered 89–90 % before: those false
   neighbours (8–15 % of stepped series), not the location (at the true location it covered
   as much). Measured coverage of a 3-SD step: bench/bench_changes.py and the README.
   The location is chosen where the difference is largest, so a small size is biased upward
   (the winner's curse); steps well above the noise are not.

**Over series:** :func:`find_changes_holm` applies Holm's step-down over the series' first
(whole-series) split p-values; a further change in a series counts only when its own p-value,
times the multiplier its series' first split got, stays below alpha (the first change gates
the rest). Segments shorter than :data:`MIN_RUNS` runs are not tested.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import signal, stats
from statsmodels.regression.linear_model import burg
from statsmodels.tsa.stattools import acovf, levinson_durbin

from cloudbench.analysis.diurnal import diurnal_series

FloatArray = NDArray[np.float64]

MIN_SEGMENT = 4  # runs on either side of a change
MIN_RUNS = 12  # a series or segment with fewer runs is not tested (Kolmogorov's law is asymptotic)
ALPHA = 0.05
MAX_CHANGES = 5  # per series
MARGINAL = 0.05  # a neighbouring change whose adjusted p is at least this share of alpha is marginal
MAX_PHI = 0.95  # AR(1) coefficient cap: closer to 1 the long-run variance is unbounded
MAX_ROOT = 0.99  # a debiased null autoregression keeps its roots inside this radius (stationary)
BOOTSTRAP_BATCH = 400  # null series drawn at a time for the first split's p-value (sieve_p)
BOOTSTRAP_HITS = 20  # ... until this many reach the observed statistic
BOOTSTRAP_MAX = 20_000  # ... or this many are drawn
Z95 = float(stats.norm.ppf(0.975))


@dataclass(frozen=True)
class Change:
    """One change point: between run ``index − 1`` and run ``index`` (time order)."""

    index: int
    time_utc: float  # epoch seconds of the first run at the new level
    previous_utc: float  # ... and of the last run at the old level: the change happened in between
    level_before: float
    level_after: float
    diff: float
    diff_ci: tuple[float, float]
    size: float | None  # level_after / level_before − 1; None when the level before is not positive
    size_ci: tuple[float, float] | None
    p: float
    n_before: int
    n_after: int
    p_holm: float | None = None


@dataclass
class SeriesChanges:
    """The search over one series."""

    n: int  # runs
    changes: list[Change]
    first_p: float | None  # p-value of the first (whole-series) split: the series' test
    deseasonalized: bool
    diurnal_p: float | None
    amplitude: float | None
    phi: float | None  # AR(1) coefficient of the runs around the final segment means
    notes: list[str] = field(default_factory=list)


def long_run_variance(e: FloatArray, segments: int = 1) -> tuple[float, float]:
    """(σ²_LR, φ) of residuals ``e`` (mean 0 within each of ``segments``): AR(1) prewhitened,
    φ with Kendall's (1954) bias correction ``(1 + 3φ)/n`` per mean removed."""
    if e.size < 3 or float(np.dot(e, e)) == 0.0:
        return float(np.mean(e * e)) if e.size else 0.0, 0.0
    phi = float(np.dot(e[1:], e[:-1]) / np.dot(e[:-1], e[:-1]))
    phi += segments * (1.0 + 3.0 * phi) / e.size
    phi = min(max(phi, 0.0), MAX_PHI)  # negative φ would shrink σ²_LR: runs are not assumed anti-correlated
    innov = e[1:] - phi * e[:-1]
    s2 = float(np.dot(innov, innov) / max(innov.size - 1, 1))
    return s2 / (1.0 - phi) ** 2, phi


def _residuals(x: FloatArray, cuts: Sequence[int]) -> FloatArray:
    bounds = [0, *sorted(cuts), x.size]
    return np.concatenate([x[a:b] - x[a:b].mean() for a, b in itertools.pairwise(bounds) if b > a])


def cusum_split(x: FloatArray, min_segment: int = MIN_SEGMENT,
                lrv_at: Callable[[int], float] | None = None) -> tuple[int, float] | None:
    """The split ``k`` (runs ``x[:k]`` before) of largest ``|S_k|`` and its CUSUM p-value from
    Kolmogorov's law (the further splits'; the first split's is :func:`sieve_p`).
    ``lrv_at(k)``: the long-run variance to use given the split (default: from ``x`` alone)."""
    n = x.size
    if n < 2 * min_segment:
        return None
    s = np.cumsum(x - x.mean())[:-1]  # s[k-1] = S_k for k = 1..n-1
    ks = np.arange(min_segment, n - min_segment + 1)
    k = int(ks[np.argmax(np.abs(s[ks - 1]))])
    lrv = lrv_at(k) if lrv_at is not None else long_run_variance(_residuals(x, [k]), segments=2)[0]
    if lrv <= 0:
        return k, (0.0 if abs(s[k - 1]) > 0 else 1.0)
    stat = float(abs(s[k - 1]) / math.sqrt(n * lrv))
    return k, float(stats.kstwobign.sf(stat))


def cusum_stats(x: FloatArray, min_segment: int = MIN_SEGMENT) -> FloatArray:
    """The first split's statistic for each row of ``x`` (``(B, n)``), exactly as
    :func:`cusum_split` computes it by default: ``max|S_k| / sqrt(n·σ²_LR)`` with σ²_LR from the
    residuals around the two means of the split of largest ``|S_k|`` (Kendall-corrected φ)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    rows, n = x.shape
    ks = np.arange(min_segment, n - min_segment + 1)
    cs = np.cumsum(x, axis=1)
    dev = np.abs(cs[:, ks - 1] - cs[:, -1:] * (ks / n)[None, :])  # |S_k|
    at = np.argmax(dev, axis=1)
    k, top = ks[at], dev[np.arange(rows), at]
    head = cs[np.arange(rows), k - 1]
    fit = np.where(np.arange(n)[None, :] < k[:, None], (head / k)[:, None], ((cs[:, -1] - head) / (n - k))[:, None])
    e = x - fit
    den = np.sum(e[:, :-1] ** 2, axis=1)
    phi = np.sum(e[:, 1:] * e[:, :-1], axis=1) / np.where(den > 0, den, 1.0)
    phi = np.clip(phi + 2.0 * (1.0 + 3.0 * phi) / n, 0.0, MAX_PHI)
    innov = e[:, 1:] - phi[:, None] * e[:, :-1]
    lrv = np.sum(innov * innov, axis=1) / max(n - 2, 1) / (1.0 - phi) ** 2
    return np.where(lrv > 0, top / np.sqrt(n * np.where(lrv > 0, lrv, 1.0)), np.where(top > 0, np.inf, 0.0))


def null_ar(e: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The null's autoregression of the runs ``e`` (mean 0) and its centred innovations
    (Bühlmann's AR sieve): the order by AIC over Yule-Walker fits (Levinson-Durbin) up to
    ``10·log10(n)``, at least 2, the coefficients by Burg's method (statsmodels; stationary, and
    less biased toward 0 than Yule-Walker in short series). An AR(1) null under-fits slow
    conditions under per-run noise (an ARMA(1,1)): with AR(1) 0.6 under independent noise of
    the same SD, 168 runs, it called a change in 11.6 % of 2,000 flat series; AIC alone picked
    order 1 in half of them; this null 6.7 % ± 0.5 % of 2,400, and 4.6 % ± 0.7 % of 1,000 once
    its bias is removed (:func:`debiased_ar`; the ``slow_noise`` row of bench_changes.py). Flat
    AR(1) runs (φ 0.6): 4.3 % (the AR(1) null 5.2 %), debiased 3.9 %; 48 runs at φ 0.8 hold
    their level too (15 of 300 series, 5.0 %, the test; debiased 7 of 300, 2.3 %). The price is
    power in short series: a step of one noise SD half-way through 48 i.i.d. runs is found in
    34 % (the AR(1) null 45 %), through 168 runs of 0.6 SD in 30 % (31 %); bench_changes.py's
    power rows (found within one run): 32.3 % and 31.8 % with this null, 12.3 % and 25.3 %
    debiased (:func:`debiased_ar` says why)."""
    n = e.size
    pmax = max(2, min(int(10 * math.log10(n)), n // 4))
    acov = acovf(e, fft=False)
    # statsmodels' sigma[k] is the innovation variance at order k >= 1; order 0's is the variance
    sigma2 = np.r_[acov[0], np.asarray(levinson_durbin(acov, nlags=pmax, isacov=True)[3])[1:]]
    aic = n * np.log(np.maximum(sigma2, 1e-300)) + 2.0 * np.arange(pmax + 1)
    p = max(int(np.argmin(aic)), 2)
    ar = np.asarray(burg(e, p, demean=False)[0], dtype=np.float64)
    return ar, _innovations(e, ar)


def burg_rows(e: FloatArray, order: int) -> FloatArray:
    """Burg's AR(``order``) coefficients of each row of ``e`` (``(B, n)``, rows of mean 0), the
    sign convention of statsmodels' ``burg`` (``e_t = Σ a_i e_{t−i} + u_t``), vectorised over rows:
    the reflection coefficient of each order from the forward and backward errors (Burg 1968;
    Brockwell & Davis 2016, 5.1.2), the coefficients by the Levinson recursion."""
    e = np.atleast_2d(np.asarray(e, dtype=np.float64))
    rows, n = e.shape
    f, b = e.copy(), e.copy()
    ar = np.zeros((rows, order))
    for m in range(1, order + 1):
        ff, bb = f[:, m:].copy(), b[:, m - 1:n - 1].copy()
        den = np.einsum("ij,ij->i", ff, ff) + np.einsum("ij,ij->i", bb, bb)
        k = 2.0 * np.einsum("ij,ij->i", ff, bb) / np.where(den > 0, den, 1.0)
        prev = ar[:, :m - 1].copy()
        ar[:, :m - 1] = prev - k[:, None] * prev[:, ::-1]
        ar[:, m - 1] = k
        f[:, m:] = ff - k[:, None] * bb
        b[:, m:] = bb - k[:, None] * ff
    return ar


def _innovations(e: FloatArray, ar: FloatArray) -> FloatArray:
    p, n = ar.size, e.size
    u = e[p:] - sum((ar[i] * e[p - 1 - i:n - 1 - i] for i in range(p)), np.zeros(n - p))
    return np.asarray(u - u.mean(), dtype=np.float64)


def _null_series(rng: np.random.Generator, ar: FloatArray, u: FloatArray, rows: int, n: int,
                 remove: tuple[FloatArray, float] | None, min_segment: int) -> FloatArray:
    """``rows`` null series of the autoregression ``ar`` driven by resampled innovations ``u``, through
    the observed series' own steps (the sinusoid's removal when ``remove``)."""
    burn = 200 if np.any(ar) else 0
    z = signal.lfilter([1.0], [1.0, *(-ar)], rng.choice(u, size=(rows, n + burn)), axis=1)[:, burn:]
    if remove is not None:
        z = remove_sinusoid(remove[0], z, remove[1], min_segment)
    return np.asarray(z, dtype=np.float64)


def debiased_ar(e: FloatArray, ar: FloatArray, u: FloatArray, rng: np.random.Generator,
                remove: tuple[FloatArray, float] | None = None, min_segment: int = MIN_SEGMENT,
                draws: int = BOOTSTRAP_BATCH) -> FloatArray:
    """``ar`` (the Burg fit of the runs ``e``, mean 0) less its bias as the null's own series show
    it (bootstrap bias correction, Efron & Tibshirani 1993 ch. 10; Kilian 1998 for autoregressions):
    ``draws`` null series of ``ar``, each through the observed series' steps (the sinusoid's
    removal, the mean's) and fitted again at the same order; ``2·ar − mean(refits)``, pulled back
    toward ``ar`` (by quarters) until stationary. Why: the runs were fitted after their mean and
    a sinusoid were removed, which takes their slow part and biases the fit toward less
    persistence (the sum of the coefficients by −0.04 on average over i.i.d. runs of a week); the
    null series, less persistent than the runs, then wander less, and the first split's test
    called a change in 5.8 % of flat series of per-run effects at 5 % (debiased: 4.7 % ± 0.4 %
    of 3,000, three seeds). A warp-speed double bootstrap (Giacomini, Politis & White 2013: one
    refit and one second-level series per null series) did not correct it (on the same 1,000
    flat AR(1) weeks: 5.9 %, the plain sieve 5.5 %, debiased 4.5 %).

    The cost is power: the fit under the null takes a step for persistence, and removing the
    bias adds to that (a step of 1 noise SD half-way through 48 runs is found in 12 %, not 32 %).
    A null fitted around the split instead (each null series around its own split) keeps the
    power (45 %) but its bias is not a shift that one correction removes: 12 % false changes in
    48 runs at φ 0.8."""
    if not np.any(ar):
        return ar
    z = _null_series(rng, ar, u, draws, e.size, remove, min_segment)
    refit = burg_rows(z - z.mean(axis=1, keepdims=True), ar.size)
    bias = refit.mean(axis=0) - ar
    for shrink in (1.0, 0.75, 0.5, 0.25):
        c = ar - shrink * bias
        if np.all(np.abs(np.roots(np.r_[1.0, -c])) < MAX_ROOT):
            return np.asarray(c, dtype=np.float64)
    return ar


def sieve_null(x: FloatArray, rng: np.random.Generator, remove: tuple[FloatArray, float] | None = None,
               min_segment: int = MIN_SEGMENT) -> tuple[FloatArray, FloatArray]:
    """The first split's null for the runs ``x``: the autoregression of :func:`null_ar` less its
    bias (:func:`debiased_ar`) and its centred innovations."""
    e = x - x.mean()
    ar, u = null_ar(e)
    if not np.any(u):
        return ar, u
    ar = debiased_ar(e, ar, u, rng, remove, min_segment)
    return ar, _innovations(e, ar)


def sieve_p(x: FloatArray, *, min_segment: int = MIN_SEGMENT, remove: tuple[FloatArray, float] | None = None,
            threshold: float = ALPHA) -> float:
    """The whole-series split's p-value by an **AR sieve bootstrap** of the search (the approach
    of :func:`cloudbench.analysis.levelshift.step_p`, on this test's statistic): null series from
    the autoregression of :func:`null_ar`, fitted under the null (the runs around their one mean)
    and its bias removed (:func:`debiased_ar`), its innovations resampled (heavy tails kept), each
    searched again (split and long-run variance) by :func:`cusum_stats`; ``remove``: (run times,
    period) when each null series goes through :func:`remove_sinusoid` first (its removal is part
    of the procedure). Kolmogorov's law
    for the same statistic called a change in 6.6 % of 2,000 flat
    AR(1) series (φ = 0.6, 168 runs, through remove_sinusoid; an AR(1) sieve 5.15 %, this one
    3.9 % of 1,000) and 15 % of 48-run ones at φ = 0.8 (this one 2.3 %): σ²_LR
    is estimated, φ with it, and a wander that makes a large statistic also lowers the φ of the
    runs around the split. φ around the split instead of the one mean: 5.0 % and 10 %.

    Draws in batches of :data:`BOOTSTRAP_BATCH` until :data:`BOOTSTRAP_HITS` null statistics reach
    the observed one or ``BOOTSTRAP_HITS / threshold`` draws are done (``threshold``: the smallest
    level the p-value will be compared with, Holm's first ``alpha / m``), so ``(1 + hits) / (1 +
    draws)`` resolves it. Deterministic: the generator is seeded from the data."""
    n = x.size
    t_obs = float(cusum_stats(x[None, :], min_segment)[0])
    if not math.isfinite(t_obs):
        return 0.0
    if t_obs <= 0:
        return 1.0
    rng = np.random.default_rng(np.frombuffer(np.ascontiguousarray(x).tobytes(), dtype=np.uint32))
    ar, u = sieve_null(x, rng, remove, min_segment)
    if not np.any(u):
        return 1.0
    total = min(max(BOOTSTRAP_BATCH, math.ceil(BOOTSTRAP_HITS / threshold)), BOOTSTRAP_MAX)
    done = hits = 0
    while done < total and hits < BOOTSTRAP_HITS:
        b = min(BOOTSTRAP_BATCH, total - done)
        z = _null_series(rng, ar, u, b, n, remove, min_segment)
        hits += int(np.sum(~(cusum_stats(z, min_segment) < t_obs)))
        done += b
    return (1 + hits) / (1 + done)


def remove_sinusoid(t: FloatArray, z: FloatArray, period: float, min_segment: int = MIN_SEGMENT) -> FloatArray:
    """Rows of ``z`` (``(B, n)``, runs at times ``t``) less the sin and cos terms at ``period`` of
    their least-squares fit of level + step + sin + cos (:func:`joint_fit`): the search's input,
    and the same procedure on the bootstrap's null series."""
    z = np.atleast_2d(np.asarray(z, dtype=np.float64))
    return np.asarray(z - joint_fit(t, z, period, min_segment)[0], dtype=np.float64)


def joint_fit(t: FloatArray, z: FloatArray, period: float, min_segment: int = MIN_SEGMENT
              ) -> tuple[FloatArray, FloatArray]:
    """The sinusoid part (sin and cos terms at ``period``) and the step part of each row's
    least-squares fit of level + step + sin + cos, the step's split the one of least residual
    sum of squares (no step when none beats none). The step is in the fit because a sinusoid
    fitted without it bends to take part of a step (over 2 days of runs, a 3 ms step left a
    ±600 µs wave and φ 0.95 behind, and was missed); the diurnal test runs on the values less
    the step part, the search on them less the sinusoid part."""
    z = np.atleast_2d(np.asarray(z, dtype=np.float64))
    n = t.size
    w = 2.0 * np.pi * np.mod(t, period) / period
    base = np.column_stack([np.ones_like(t), np.sin(w), np.cos(w)])
    pinv = np.linalg.pinv(base)
    ks = np.arange(min_segment, n - min_segment + 1)
    steps = (np.arange(n)[:, None] >= ks[None, :]).astype(np.float64)  # (n, K)
    r = steps - base @ (pinv @ steps)  # the steps less their fit on level, sin, cos
    rr = np.sum(r * r, axis=0)
    ok = rr > 1e-12 * n
    score = z @ r  # (B, K): (r_k · z)
    gain = np.where(ok[None, :], score * score / np.where(ok, rr, 1.0)[None, :], -1.0)
    at = np.argmax(gain, axis=1)
    gamma = np.where(gain[np.arange(z.shape[0]), at] > 0, score[np.arange(z.shape[0]), at] / rr[at], 0.0)
    step_part = gamma[:, None] * steps[:, at].T
    # Frisch-Waugh: the base's coefficients in the joint fit are its fit on z less the step's part
    coef = (z - step_part) @ pinv[1:3, :].T  # (B, 2): sin, cos
    return np.asarray(coef @ base[:, 1:3].T, dtype=np.float64), np.asarray(step_part, dtype=np.float64)


def _seasonal(t: FloatArray, y: FloatArray, period: float, alpha: float) -> tuple[bool, float | None, float | None]:
    """The diurnal test at ``period``: (a sinusoid found at ``alpha``, its p-value, its amplitude)."""
    if t.size < 6 or np.ptp(y) == 0:
        return False, None, None
    d = diurnal_series(t, y, period, alpha=alpha)
    if d.p_at_period is None or d.amplitude_at_period is None:
        return False, d.p_at_period, None
    return d.p_at_period < alpha, d.p_at_period, d.amplitude_at_period


@dataclass
class Prepared:
    """A series ready for the search: runs in time order, the time-of-day sinusoid removed."""

    t: FloatArray
    y: FloatArray  # the run values
    x: FloatArray  # ... with the time-of-day sinusoid removed
    period: float | None  # of the sinusoid removed (None: none)
    first: tuple[int, float] | None  # the whole series' split and its p-value
    removed: bool
    diurnal_p: float | None
    amplitude: float | None
    notes: list[str]


def prepare(t: ArrayLike, y: ArrayLike, *, period: float | None = None, alpha: float = ALPHA,
            min_segment: int = MIN_SEGMENT, threshold: float | None = None) -> Prepared:
    """Sort the runs by time, run the diurnal test (per series at ``alpha``: ``removed``, and the
    note), remove a least-squares sinusoid at ``period`` whenever the runs cover one (found or
    not: the test's null repeats that removal), and test the whole series once (:func:`sieve_p`;
    ``threshold``: the smallest level its p-value will be compared with, default ``alpha``)."""
    threshold = alpha if threshold is None else threshold
    tv = np.asarray(t, dtype=np.float64)
    yv = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(tv) & np.isfinite(yv)
    order = np.argsort(tv[ok], kind="stable")
    tv, yv = tv[ok][order], yv[ok][order]
    notes: list[str] = []
    if tv.size < MIN_RUNS:
        notes.append(f"{tv.size} runs: too few to look for a change ({MIN_RUNS} or more)")
        return Prepared(tv, yv, yv, None, None, False, None, None, notes)
    x, remove, removed, dp, amp = yv, None, False, None, None
    if period is not None and float(tv.max() - tv.min()) >= period:
        # the search allows for a sinusoid whether the diurnal test finds one or not: removing it
        # only when found made the removal depend on the noise (the diurnal test rejected in 13 %
        # of flat AR(1) series, and those called a change in 11 %), a choice the null series
        # cannot repeat; a least-squares fit they can (remove_sinusoid, repeated on each). A step
        # biases the sinusoid's fit (and a sinusoid hides a step): both come from one joint fit,
        # and the diurnal test (what the notes report) runs on the values less its step part.
        sin_part, step_part = joint_fit(tv, yv, period, min_segment)
        removed, dp, amp = _seasonal(tv, yv - step_part[0], period, alpha)
        x, remove = yv - sin_part[0], (tv, period)
    if removed:
        notes.append(f"time-of-day sinusoid (amplitude {amp:.3g}, p = {dp:.2g}) removed before the search")
    first = cusum_split(x, min_segment)
    if first is not None:
        first = (first[0], sieve_p(x, min_segment=min_segment, remove=remove, threshold=threshold))
    return Prepared(tv, yv, x, period if removed else None, first, removed, dp, amp, notes)


def search(prep: Prepared, *, alpha: float = ALPHA, holm: tuple[float, float] | None = None,
           min_segment: int = MIN_SEGMENT, max_changes: int = MAX_CHANGES) -> SeriesChanges:
    """Binary segmentation of a prepared series. ``holm``: (the Holm-adjusted p-value of the
    series' first split, the multiplier its rank gave); a further split counts when
    ``max(adjusted, multiplier·p) < alpha``. None: one series, no adjustment."""
    x, n = prep.x, int(prep.x.size)
    first_q, mult = holm if holm is not None else (None, 1.0)
    found: list[tuple[int, float, float]] = []
    if prep.first is not None:
        k, p = prep.first
        q = first_q if first_q is not None else p
        if q < alpha:
            found = [(k, p, q), *_segment(x, alpha, mult, min_segment, max_changes - 1, [(0, k, q), (k, n, q)])]
    cuts = sorted(i for i, _, _ in found)
    _, phi = long_run_variance(_residuals(x, cuts), segments=len(cuts) + 1) if n >= 3 else (0.0, 0.0)
    changes = []
    notes = list(prep.notes)
    if found:
        levels, cov, crit = _levels(prep, cuts)
        bounds = [0, *cuts, n]
        ordered = sorted(found)
        for j, (idx, p, q) in enumerate(ordered):
            c = _sized(prep.t, idx, levels, cov, j, bounds, p, q, crit)
            marginal = [nb for nb in (j - 1, j + 1) if 0 <= nb < len(ordered)
                        and ordered[nb][2] >= MARGINAL * alpha and ordered[nb][2] > q]
            if marginal:
                c = _hull_without(prep, cuts, c, [ordered[nb][0] for nb in marginal], p, q)
                notes.append(f"the interval of the change at run {idx} also covers its size without the "
                             f"marginal change(s) at run(s) {', '.join(str(ordered[nb][0]) for nb in marginal)}")
            changes.append(_hull_shifted(prep, cuts, c, p, q))
    return SeriesChanges(n, changes, None if prep.first is None else prep.first[1], prep.removed,
                         prep.diurnal_p, prep.amplitude, phi if n >= MIN_RUNS else None, notes)


def _hull_without(prep: Prepared, cuts: list[int], c: Change, marginal: list[int], p: float, q: float) -> Change:
    """``c`` with its intervals widened to hold its intervals in the fits without each subset of
    its ``marginal`` neighbouring cuts: a false change next to a real one (about alpha of the
    series with a change have one) was placed where its segment's mean deviates most, which biases
    the level it leaves beside the real change (the interval covered 37-64 % of those steps)."""
    drops = (d for r in range(1, len(marginal) + 1) for d in itertools.combinations(marginal, r))
    return _hull(prep, c, (([k for k in cuts if k not in d], c.index) for d in drops), p, q)


def _hull_shifted(prep: Prepared, cuts: list[int], c: Change, p: float, q: float) -> Change:
    """``c``'s intervals widened to hold those with the change one run earlier and later: its run is
    an estimate too (AR(1) runs, φ 0.5: 91 % covered one run off, 94.7 % at the run; an independent
    reviewer's bench/bench_changes_adversarial.py)."""
    moves = [(sorted(k if x == c.index else x for x in cuts), k) for k in (c.index - 1, c.index + 1)]
    return _hull(prep, c, [(m, k) for m, k in moves if len(set(m)) == len(m)  # not onto a neighbour
                           and min(b - a for a, b in itertools.pairwise([0, *m, prep.y.size])) >= 2], p, q)


def _hull(prep: Prepared, c: Change, alternatives: Iterable[tuple[list[int], int]], p: float, q: float) -> Change:
    """``c`` with its intervals widened to hold the change's intervals in each alternative fit
    (its cuts, and the run of the change among them)."""
    lo, hi = c.diff_ci
    slo, shi = c.size_ci if c.size_ci is not None else (math.inf, -math.inf)
    for kept, k in alternatives:
        levels, cov, crit = _levels(prep, kept)
        alt = _sized(prep.t, k, levels, cov, kept.index(k), [0, *kept, prep.y.size], p, q, crit)
        lo, hi = min(lo, alt.diff_ci[0]), max(hi, alt.diff_ci[1])
        if alt.size_ci is not None:
            slo, shi = min(slo, alt.size_ci[0]), max(shi, alt.size_ci[1])
    size_ci = (slo, shi) if c.size_ci is not None else None
    return replace(c, diff_ci=(lo, hi), size_ci=size_ci)


def _segment(x: FloatArray, alpha: float, mult: float, min_segment: int, max_changes: int,
             stack: list[tuple[int, int, float]] | None = None) -> list[tuple[int, float, float]]:
    """Binary segmentation: (split, p, adjusted p) of the splits of the segments on ``stack``
    (lo, hi, the adjusted p of the split that made it; default: the whole of ``x``)."""
    stack = [(0, x.size, 0.0)] if stack is None else list(stack)
    cuts = sorted({b for lo, hi, _ in stack for b in (lo, hi)} - {0, x.size})
    found: list[tuple[int, float, float]] = []
    while stack and len(found) < max_changes:
        lo, hi, parent = stack.pop(0)
        if hi - lo < MIN_RUNS:
            continue

        def lrv_at(k: int, lo: int = lo, cuts: list[int] = cuts) -> float:
            # the noise of the whole series around its segments so far and the candidate split: a
            # segment's own runs alone (half the series or less) gave a φ biased low and 7 % false
            # splits at 5 % in the halves of AR(1) series (φ = 0.6; 5.5 % over the whole series)
            return long_run_variance(_residuals(x, [*cuts, lo + k]), segments=len(cuts) + 2)[0]

        res = cusum_split(x[lo:hi], min_segment, lrv_at)
        if res is None:
            continue
        k, p = res
        # weighted Bonferroni over the segments searched after the first split: a segment's share of
        # the runs is its share of alpha, so the halves of a series with one real change add at most
        # alpha of false changes between them (not alpha each)
        q = max(parent, min(1.0, mult * p * x.size / (hi - lo)))
        if q < alpha:
            found.append((lo + k, p, q))
            cuts = sorted([*cuts, lo + k])
            stack += [(lo, lo + k, q), (lo + k, hi, q)]
    return found


def find_changes(t: ArrayLike, y: ArrayLike, *, period: float | None = None, alpha: float = ALPHA,
                 min_segment: int = MIN_SEGMENT, max_changes: int = MAX_CHANGES) -> SeriesChanges:
    """Change points of one series (no adjustment over series): ``t`` the runs' UTC epoch
    seconds, ``y`` one value per run; ``period``: the time-of-day cycle to remove (None: none)."""
    prep = prepare(t, y, period=period, alpha=alpha, min_segment=min_segment)
    return search(prep, alpha=alpha, min_segment=min_segment, max_changes=max_changes)


def find_changes_holm(series: Sequence[tuple[ArrayLike, ArrayLike]], *, period: float | None = None,
                      alpha: float = ALPHA) -> list[SeriesChanges]:
    """:func:`find_changes` over several series, Holm's step-down over their first splits
    (the first change of a series gates its further changes, at the same multiplier)."""
    # Holm's first step compares the smallest p-value with alpha/m: the bootstrap resolves that
    preps = [prepare(t, y, period=period, alpha=alpha, threshold=alpha / max(len(series), 1)) for t, y in series]
    idx = [i for i, pr in enumerate(preps) if pr.first is not None]
    m = len(idx)
    holm: dict[int, tuple[float, float]] = {}
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda j: preps[j].first[1])):  # type: ignore[index]
        p = preps[i].first[1]  # type: ignore[index]
        running = max(running, min(1.0, (m - rank) * p))
        holm[i] = (running, float(m - rank))
    return [search(pr, alpha=alpha, holm=holm.get(i, (1.0, float(m)))) for i, pr in enumerate(preps)]


def _levels(prep: Prepared, cuts: Sequence[int]) -> tuple[FloatArray, FloatArray, float]:
    """The segments' levels, their covariance and the 95 % quantile for their intervals: GLS of
    the run values on one indicator per segment (and sin, cos at the period when a sinusoid was
    found: fitted jointly, so its uncertainty is in the levels'), AR(1) errors across runs
    (statsmodels ``GLSAR``)."""
    from statsmodels.regression.linear_model import GLSAR, OLS  # noqa: PLC0415 - heavy library, only the fits pay for it; not statsmodels.api: it imports everything

    n = prep.y.size
    seg = np.searchsorted(np.asarray(cuts), np.arange(n), side="right")
    cols = [(seg == j).astype(np.float64) for j in range(len(cuts) + 1)]
    if prep.period is not None:
        w = 2.0 * np.pi * np.mod(prep.t, prep.period) / prep.period
        cols += [np.sin(w), np.cos(w)]
    k = len(cuts) + 1
    design = np.column_stack(cols)
    ols = OLS(prep.y, design).fit()
    e = np.asarray(ols.resid, dtype=np.float64)
    # φ of the residuals with Kendall's bias correction per fitted parameter (statsmodels' own
    # iteration estimates it without: the interval covered 88 % of steps in AR(1) runs, φ = 0.6)
    _, phi = long_run_variance(e, segments=design.shape[1])
    res = ols
    if phi > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = GLSAR(prep.y, design, rho=np.array([phi])).fit()
    # the interval's quantile: Student's t at the runs' effective number (n (1 − φ)/(1 + φ), Bayley &
    # Hammersley 1946) less the parameters, not z: σ²_LR is estimated, and φ with it (z covered 94 %
    # of steps at the true location in AR(1) runs, φ = 0.6)
    n_eff = n * (1.0 - phi) / (1.0 + phi)
    crit = float(stats.t.ppf(0.975, max(n_eff - design.shape[1], 2.0)))
    return np.asarray(res.params[:k], dtype=np.float64), np.asarray(res.cov_params())[:k, :k], crit


def _sized(t: FloatArray, idx: int, levels: FloatArray, cov: FloatArray, j: int, bounds: list[int],
           p: float, q: float, crit: float = Z95) -> Change:
    mb, ma = float(levels[j]), float(levels[j + 1])
    vb, va, cba = float(cov[j, j]), float(cov[j + 1, j + 1]), float(cov[j, j + 1])
    d = ma - mb
    half = crit * math.sqrt(max(va + vb - 2 * cba, 0.0))
    size: float | None = None
    size_ci: tuple[float, float] | None = None
    if mb > 0:
        size = ma / mb - 1.0
        # delta method for a ratio of correlated estimates
        se = math.sqrt(max(va / mb**2 + ma**2 * vb / mb**4 - 2 * ma * cba / mb**3, 0.0))
        size_ci = (size - crit * se, size + crit * se)
    return Change(idx, float(t[idx]), float(t[idx - 1]), mb, ma, d, (d - half, d + half), size, size_ci, p,
                  bounds[j + 1] - bounds[j], bounds[j + 2] - bounds[j + 1], q)
