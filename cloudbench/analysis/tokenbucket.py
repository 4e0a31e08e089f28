"""Token-bucket drain analysis (Uta et al., NSDI'20, §3.3 and §4.2). Pure functions.

A drain is one series sent at full speed until the rate dropped and stayed down.

* **Drained** — Uta et al.'s rule, ``min(first W) × 0.75 > max(last W)`` over the
  interval rates (W = 10 s), applied as the test goes: drained as soon as, at
  some point, the last W intervals all lie under 0.75 × the minimum of the
  intervals before them (at most W of those). Once the test is 2W long this is
  Uta's rule; before, the first window is what precedes the last W, so a budget
  that lasts less than W is still seen (a 4 s budget with W = 10 s). The worker
  stops the tool by the same rule. A test shorter than 3W intervals shrinks W to
  a third of its intervals (:func:`adapt_window`).
* **High rate, low rate, time to empty** — the level shift of
  :func:`cloudbench.analysis.throughput.detect_level_shift`: means of the clean
  intervals of each level, and the shift time interpolated inside the straddling
  interval(s). Measured at the receiver, these are goodputs.
* **Budget** — the bits sent above the low rate: V(t_b) − low · t_b, where t_b
  starts the first clean low interval and V counts every bit received before it
  (Uta's "budget"; with TBF it is the ``burst`` in payload bits).
* **Refill rate** — after a rest of R seconds, a second drain sends a budget B₂
  above the low rate before it drops; refill = B₂ / R. Its shift is found with
  the first drain's levels, so a refill of one second of high rate is enough.
  When B₂ reaches 90 % of the first budget, the bucket was full again and the
  refill is only a lower bound (the rest was too long); this is flagged.

Uncertainty (an interval must cover the configured truth, not only the noise of
the levels, and hold at 1 s sampling, where a drain has two or three high-rate
intervals). Each 95 % interval combines:

1. **Noise of the levels** — Student-t, not a bootstrap: a level's mean of n clean
   interval rates read as AR(1) with lag-1 correlation ρ has the standard error
   √(f_n·σ²/n), f_n = 1 + 2·Σ_{k<n}(1 − k/n)·ρ^k (:func:`finite_factor`), σ² estimated
   as s²·(n − 1)/(n − f_n) (the sample variance of dependent intervals is biased low),
   and Satterthwaite's (n − 1)·(1 − ρ²)/(1 + ρ²) degrees of freedom. A percentile
   bootstrap of two or three intervals covers 50–66 % (its spread is the sample's,
   without the t quantile); with ρ = 0 the interval is the t interval, exact for
   independent normal intervals at any n. ρ is the larger of the lag-1 autocorrelation
   and the square root of the lag-2 one, each corrected for its small-sample bias
   ((n·r + 1)/(n − 4), Kendall) and kept in [0, ``MAX_RHO``]: a counter read late moves
   bytes into the next interval, a negative lag-1 term that cancels in a level's mean
   but hides the AR part from r₁ (ρ₂ = φ² still reads it). Both levels use the largest
   ρ of the high level's, the low level's and both pooled (each relative to its
   mean): a short level borrows the dependence the series shows elsewhere. Under
   ``PRIOR_N`` intervals in both levels ρ cannot be estimated (from 2–5 intervals at
   1 s sampling r₁ is noise): it is taken as at least ``PRIOR_RHO`` and the notes say
   by how much that widened the high level's interval. A level of one interval
   prints no interval; for the derived quantities its error is one interval's, the
   other level's relative interval SD, with that level's degrees of freedom.
2. **Model error of the levels** — a level is modelled as constant; its drift
   (half the difference between the means of its first and second halves) is
   added in quadrature to its standard error.
3. **Noise of the cumulative bytes** — the budget is V(t_b) − low · t_b and V
   sums every interval before t_b, each as noisy as the level's intervals: V gets
   a t error of SD r·√(f·Σ b_i²) (r the relative interval SD of both levels pooled,
   each relative to its mean, with their n_high + n_low − 2 degrees of freedom
   reduced for ρ (:func:`volume_error`); b_i the bits of each interval). The
   refill's second budget likewise.
4. **Sampling resolution** — the switch is seen through intervals of length
   ``dt``: each draw of the time to empty gets a uniform error on
   ``[−dt/2, dt/2]``; each draw of the rest before a refill (its ends are
   interval boundaries) one on ``[−dt/2, dt/2]`` too.

The derived quantities (time to empty, budget, refill) propagate ``N_BOOT``
seeded draws of these errors (levels from their t distributions) through their
formulas; their interval is the 2.5–97.5 % range of the draws. For the time to
empty, the model also has two readings: the switch time interpolated inside the
straddling interval(s) (when the bucket really emptied) and budget / (high −
low) (when a sender at the high rate from the first instant would have emptied
it; the configured truth). They differ by the deficit of the first intervals
(slow start) over the high level, so the interval spans the draws of both;
likewise the budget's interval spans V(t_b) − low·t_b and (high − low) × the
interpolated switch time. The reported ``sd`` is the standard error of a level
and the SD of the draws of a derived estimate.

``method="bootstrap"`` keeps the intervals the reports printed before (percentile
bootstrap over intervals, V taken as exact) so the coverage suite can show what they missed
(62 % for the high rate at 1 s sampling); reports use ``"t"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.throughput import (
    TRANSITION_BAND,
    LevelShift,
    detect_level_shift,
    full_mask,
    rates_of,
    shift_time,
)

FloatArray = NDArray[np.float64]
UTA_WINDOW_S = 10.0
UTA_FACTOR = 0.75
N_BOOT = 2000
SATURATED_SHARE = 0.9
LEVEL = 0.95
MIN_DEPENDENCE_N = 8  # intervals needed to estimate their lag-1 autocorrelation
MAX_RHO = 0.8
# Fewer intervals than this in both levels cannot tell their dependence: ρ is taken as at
# least PRIOR_RHO (inflation (1 + ρ)/(1 − ρ) ≈ 2.1), and the output says so.
PRIOR_N = 20
PRIOR_RHO = 0.35
Method = Literal["t", "bootstrap"]


def adapt_window(n_intervals: int, window_intervals: int) -> int:
    """Window length (intervals) for a test of ``n_intervals``: at most a third of it."""
    return max(1, min(window_intervals, n_intervals // 3))


def drained_at(rates: FloatArray | list[float], w: int, factor: float = UTA_FACTOR) -> int | None:
    """Smallest prefix length m at which the rule holds (None if never).

    At m: ``min(r[:min(w, m − w)]) × factor > max(r[m − w:m])``.
    """
    r = np.asarray(rates, dtype=np.float64)
    for m in range(w + 1, len(r) + 1):
        first = r[: min(w, m - w)]
        if first.min() * factor > r[m - w:m].max():
            return m
    return None


def uta_drained(rates: FloatArray | list[float], window_intervals: int,
                factor: float = UTA_FACTOR) -> bool:
    """Whether the rates drained by the UTA rule (a later window below ``factor`` of the first)."""
    r = np.asarray(rates, dtype=np.float64)
    w = adapt_window(len(r), window_intervals)
    return drained_at(r, w, factor) is not None


@dataclass(frozen=True)
class Estimate:
    """A value with its standard error (or SD of its draws) and 95 % interval."""

    value: float
    sd: float = math.nan
    low: float = math.nan
    high: float = math.nan

    def as_dict(self, prefix: str) -> dict[str, float]:
        return {prefix: self.value, f"{prefix}_sd": self.sd, f"{prefix}_ci_low": self.low,
                f"{prefix}_ci_high": self.high}


def _est(value: float, boot: FloatArray) -> Estimate:
    b = boot[np.isfinite(boot)]
    if len(b) < 2:
        return Estimate(value)
    lo, hi = np.percentile(b, [2.5, 97.5])
    return Estimate(value, float(np.std(b, ddof=1)), float(lo), float(hi))


@dataclass
class DrainEstimate:
    """What one drain series shows: drained or not, the two levels, time to empty, budget."""
    drained: bool
    window_intervals: int
    high: Estimate | None = None  # bit/s
    low: Estimate | None = None
    time_to_empty: Estimate | None = None  # s from the start of the series
    budget: Estimate | None = None  # bits above the low rate
    volume_before_bits: float = math.nan
    high_rate_sd: float = math.nan  # spread of per-interval rates within each level
    low_rate_sd: float = math.nan
    n_high: int = 0
    n_low: int = 0
    notes: list[str] = field(default_factory=list)
    # kept for the refill: clean interval rates of each level
    high_rates: FloatArray = field(default_factory=lambda: np.zeros(0))
    low_rates: FloatArray = field(default_factory=lambda: np.zeros(0))
    interval_s: float = 0.0  # sampling resolution (median interval length)
    high_error: LevelError | None = None  # Student-t errors of the levels (method "t")
    volume_error: LevelError | None = None  # one interval's relative noise, both levels pooled
    low_error: LevelError | None = None
    method: Method = "t"


def _resample(rng: np.random.Generator, x: FloatArray, n_boot: int) -> FloatArray:
    if len(x) == 0:
        return np.full(n_boot, math.nan)
    picks = rng.integers(0, len(x), size=(n_boot, len(x)))
    return np.asarray(x[picks].mean(axis=1))


def level_drift(x: FloatArray) -> float:
    """Model error of a constant level: half the gap between the means of its halves."""
    if len(x) < 4:
        return 0.0
    half = len(x) // 2
    return float(abs(np.mean(x[:half]) - np.mean(x[len(x) - half:])) / 2.0)


def dependence_rho(*levels: FloatArray) -> tuple[float, int]:
    """Lag-1 autocorrelation ρ of the intervals of all ``levels`` (each relative to its own
    mean: the intervals of one series share one dependence), corrected for its bias
    ((n·ρ̂ + 1)/(n − 4)) and kept in [0, ``MAX_RHO``], with the n it rests on; 0 under
    ``MIN_DEPENDENCE_N`` intervals in all (too few to compute it)."""
    devs = [np.asarray(x, dtype=np.float64) / float(np.mean(x)) - 1.0 for x in levels
            if len(x) >= 2 and float(np.mean(x)) > 0]
    n = sum(len(d) for d in devs)
    den = sum(float(np.sum(d * d)) for d in devs)
    if n < MIN_DEPENDENCE_N or den <= 0:
        return 0.0, n
    rho_hat = sum(float(np.sum(d[1:] * d[:-1])) for d in devs) / den
    rho = (n * rho_hat + 1.0) / (n - 4.0)
    # a late counter read moves bytes into the next interval: a negative lag-1 term that
    # cancels in a level's mean but hides its AR part from ρ̂₁; ρ₂ = φ² still reads it
    r2 = sum(float(np.sum(d[2:] * d[:-2])) for d in devs) / den
    rho = max(rho, math.sqrt(max((n * r2 + 1.0) / (n - 4.0), 0.0)))
    return min(max(rho, 0.0), MAX_RHO), n


def dependence_factor(*levels: FloatArray) -> float:
    """Variance inflation (1 + ρ)/(1 − ρ) of the mean of a level read as AR(1), ρ of
    :func:`dependence_rho`; 1 under ``MIN_DEPENDENCE_N`` intervals in all."""
    rho, _n = dependence_rho(*levels)
    return (1.0 + rho) / (1.0 - rho)


def finite_factor(rho: float, n: int) -> float:
    """n·Var(mean)/σ² of n AR(1) intervals with lag-1 correlation ``rho``:
    1 + 2·Σ_{k<n} (1 − k/n)·ρ^k (the asymptotic (1 + ρ)/(1 − ρ) overstates it at small n)."""
    if n < 2 or rho == 0.0:
        return 1.0
    k = np.arange(1, n)
    return float(1.0 + 2.0 * np.sum((1.0 - k / n) * rho ** k))


@dataclass(frozen=True)
class LevelError:
    """The error of a level's mean: standard error, Student-t degrees of freedom, both
    relative to the mean, the relative SD of one interval and the dependence factor
    (method in the module docstring). NaN when nothing measures the level's spread."""

    se: float
    df: float
    rel_se: float
    rel_sd: float
    factor: float = 1.0


NO_ERROR = LevelError(math.nan, math.nan, math.nan, math.nan)


def level_error(x: FloatArray, mean: float, rho: float = 0.0,
                other: LevelError | None = None) -> LevelError:
    """Student-t error of the mean of the interval rates ``x`` read as AR(1) with lag-1
    correlation ``rho`` (:func:`dependence_rho`), with its drift as model error; with one
    interval, the relative SD of one of ``other``'s intervals scaled to ``mean`` (a single
    interval is as noisy as one interval, not as the mean of ``other``'s n), with
    ``other``'s degrees of freedom (where that SD was estimated).

    At n intervals, n·Var(mean) = f_n·σ² (:func:`finite_factor`) and the sample variance
    is biased low, E s² = σ²·(n − f_n)/(n − 1): σ² is estimated as s²·(n − 1)/(n − f_n).
    Degrees of freedom: Satterthwaite's for s² of AR(1) data, (n − 1)·(1 − ρ²)/(1 + ρ²)."""
    n = len(x)
    if n < 2 or mean <= 0:
        if other is None or not math.isfinite(other.se) or n == 0 or mean <= 0:
            return NO_ERROR
        return LevelError(other.rel_sd * mean, other.df, other.rel_sd, other.rel_sd, other.factor)
    fn = finite_factor(rho, n)
    sigma2 = float(np.var(x, ddof=1)) * (n - 1.0) / (n - fn)
    se = math.sqrt(fn * sigma2 / n + level_drift(x) ** 2)
    df = max((n - 1.0) * (1.0 - rho * rho) / (1.0 + rho * rho), 1.0)
    return LevelError(se, df, se / mean, math.sqrt(sigma2) / mean, (1.0 + rho) / (1.0 - rho))


def _t_draws(rng: np.random.Generator, mean: float, err: LevelError, n_boot: int) -> FloatArray:
    if not math.isfinite(err.se):
        return np.full(n_boot, math.nan)
    return np.asarray(mean + err.se * rng.standard_t(err.df, n_boot), dtype=np.float64)


def level_interval(mean: float, err: LevelError, level: float = LEVEL) -> Estimate:
    """The Student-t interval mean ± t(0.5 + level/2, df)·se; no interval without an error."""
    from scipy import stats as sps  # noqa: PLC0415 - 0.6 s to import; the registry imports this module

    if not math.isfinite(err.se):
        return Estimate(mean)
    half = float(sps.t.ppf(0.5 + level / 2.0, err.df)) * err.se
    return Estimate(mean, err.se, mean - half, mean + half)


def volume_error(high: FloatArray, low: FloatArray, rho: float,
                 fallback: LevelError) -> LevelError:
    """The relative noise of one interval for the cumulative bytes V: both levels'
    intervals relative to their own means, pooled (one series, one noise process; the
    high level alone has two or three intervals at 1 s sampling, whose few degrees of
    freedom made V's draws heavy-tailed), read as AR(1) with ``rho``; ``fallback``
    (the high level's error) when the pool has under three intervals."""
    devs = [np.asarray(x, dtype=np.float64) / float(np.mean(x)) for x in (high, low)
            if len(x) >= 2 and float(np.mean(x)) > 0]
    n = sum(len(d) for d in devs)
    if n - len(devs) < 2:
        return fallback
    ss = sum(float(np.sum((d - d.mean()) ** 2)) for d in devs)
    # each level loses one degree of freedom to its mean; the dependence bias as in
    # level_error, from the longer level's length
    m = max(len(d) for d in devs)
    fn = finite_factor(rho, m)
    bias = (m - fn) / (m - 1.0)
    rel_sd = math.sqrt(ss / (n - len(devs)) / bias)
    df = max((n - len(devs)) * (1.0 - rho * rho) / (1.0 + rho * rho), 1.0)
    return LevelError(fallback.se, df, fallback.rel_se, rel_sd, (1.0 + rho) / (1.0 - rho))


def volume_sd(bits: FloatArray, err: LevelError) -> float:
    """SD of a sum of interval volumes ``bits`` each as noisy (relative SD) as the
    intervals of the level ``err`` describes, dependence included (point 3 of the
    module docstring)."""
    b = np.asarray(bits, dtype=np.float64)
    return float(err.rel_sd * math.sqrt(err.factor * float(np.sum(b * b))))


def _level_draws(rng: np.random.Generator, x: FloatArray, n_boot: int) -> FloatArray:
    """``method="bootstrap"``'s draws of a level: bootstrap means plus its drift as a normal
    model error."""
    return _resample(rng, x, n_boot) + rng.normal(0.0, 1.0, n_boot) * level_drift(x)


def _interval(value: float, draws: FloatArray, *more: FloatArray) -> Estimate:
    """``value`` with the SD of ``draws`` and the hull of the 95 % percentile
    intervals of ``draws`` and of each of ``more`` (other readings of the model)."""
    est = _est(value, draws)
    lo, hi = est.low, est.high
    for m in more:
        e = _est(value, m)
        if math.isfinite(e.low):
            lo, hi = min(lo, e.low), max(hi, e.high)
    return Estimate(value, est.sd, lo, hi)


def interval_seconds(t_start: FloatArray, t_end: FloatArray) -> float:
    """The sampling resolution: the median length of the full intervals."""
    secs = np.asarray(t_end, dtype=np.float64) - np.asarray(t_start, dtype=np.float64)
    full = secs[full_mask(secs)]
    return float(np.median(full)) if len(full) else 0.0


def _t_draws_of_levels(est: DrainEstimate, shift: LevelShift, b: FloatArray, rng: np.random.Generator,
                       n_boot: int) -> tuple[FloatArray, FloatArray, FloatArray, LevelError, LevelError]:
    """Student-t draws of the high and low levels and of the volume before the switch (the
    ``"t"`` method), with the dependence between intervals; records the errors and notes on
    ``est``. Returns (high draws, low draws, volume draws, high error, low error)."""
    from scipy import stats as sps  # noqa: PLC0415 - 0.6 s to import; the registry imports this module

    # the largest of each level's own dependence and both levels' pooled one (a
    # short level's own cannot be estimated; the intervals of one series share
    # their process, but the levels' noise mixes may differ, so no pooling alone)
    rho_n = [dependence_rho(shift.high_rates), dependence_rho(shift.low_rates),
             dependence_rho(shift.high_rates, shift.low_rates)]
    rho = max(r for r, _n in rho_n)
    n_dep = rho_n[2][1]
    if n_dep < PRIOR_N and rho < PRIOR_RHO:
        # the data cannot tell the dependence: assume the prior's, and say by how much
        # that widened the high level's interval (the one with the fewest intervals)
        plain = level_error(shift.high_rates, shift.high_bps, rho)
        rho = PRIOR_RHO
        wider = level_error(shift.high_rates, shift.high_bps, rho)
        if math.isfinite(plain.se) and plain.se > 0:
            ratio = (wider.se * float(sps.t.ppf(0.975, wider.df))) / (
                plain.se * float(sps.t.ppf(0.975, plain.df)))
            est.notes.append(f"dependence not estimable from {n_dep} intervals: interval "
                             f"widened by ×{ratio:.1f} (lag-1 correlation taken as "
                             f"{PRIOR_RHO:g}); sample faster or drain longer")
    he0 = level_error(shift.high_rates, shift.high_bps, rho)
    le = level_error(shift.low_rates, shift.low_bps, rho, he0)
    he = level_error(shift.high_rates, shift.high_bps, rho, le)
    est.high_error, est.low_error = he, le
    hb = _t_draws(rng, shift.high_bps, he, n_boot)
    lb = _t_draws(rng, shift.low_bps, le, n_boot)
    # V(t_b) sums every interval before the first clean low one
    ve = volume_error(shift.high_rates, shift.low_rates, rho, he)
    est.volume_error = ve
    v_sd = volume_sd(8.0 * b[: shift.first_low], ve)
    vb = v_sd * rng.standard_t(ve.df, n_boot) if math.isfinite(v_sd) else np.full(n_boot,
                                                                                    math.nan)
    return hb, lb, vb, he, le


def estimate_drain(t_start: FloatArray, t_end: FloatArray, nbytes: FloatArray,
                   window_intervals: int, factor: float = UTA_FACTOR, n_boot: int = N_BOOT,
                   seed: int = 0, method: Method = "t") -> DrainEstimate:
    """Drained?, high and low rate, time to empty and budget of one drain series."""
    t0 = np.asarray(t_start, dtype=np.float64)
    t1 = np.asarray(t_end, dtype=np.float64)
    b = np.asarray(nbytes, dtype=np.float64)
    full = full_mask(t1 - t0)
    r = rates_of(b, t1 - t0)[full]
    w = adapt_window(len(r), window_intervals)
    est = DrainEstimate(drained=uta_drained(r, window_intervals, factor), window_intervals=w)
    if w < window_intervals:
        est.notes.append(f"short test: windows of {w} intervals instead of {window_intervals}")
    shift = detect_level_shift(t0, t1, b, min_drop=1.0 - factor)
    if shift is None:
        if est.drained:
            est.notes.append("drained by the rule, but no clean high→low shift to measure")
        return est
    rng = np.random.default_rng(seed)
    dt = interval_seconds(t0, t1)
    start = float(t0[0])
    est.method = method
    if method == "t":
        hb, lb, vb, he, le = _t_draws_of_levels(est, shift, b, rng, n_boot)
    else:
        hb = _level_draws(rng, shift.high_rates, n_boot)
        lb = _level_draws(rng, shift.low_rates, n_boot)
        vb = np.zeros(n_boot)

    def derive(h: FloatArray | float, lo: FloatArray | float,
               v: FloatArray | float = 0.0) -> tuple[FloatArray, FloatArray]:
        h_a, l_a = np.atleast_1d(np.asarray(h, dtype=np.float64)), np.atleast_1d(
            np.asarray(lo, dtype=np.float64))
        tau = shift_time(shift.t_a, shift.t_b, shift.bits_a, shift.bits_b, h_a, l_a)
        budget = shift.bits_b + v - l_a * (shift.t_b - start)
        return tau - start, budget

    tau0, bud0 = derive(shift.high_bps, shift.low_bps)
    taub, budb = derive(hb, lb, vb)
    # the budget's other reading: the levels times the interpolated switch time
    bud_switch = (hb - lb) * taub
    taub = taub + rng.uniform(-dt / 2.0, dt / 2.0, n_boot)
    with np.errstate(divide="ignore", invalid="ignore"):
        ideal = np.where(hb > lb, budb / (hb - lb), np.nan)
    if method == "t":
        # a level of one interval has no interval of its own (its error is borrowed
        # from the other level, good enough for the derived quantities' draws only)
        est.high = level_interval(shift.high_bps, he) if shift.n_high > 1 else Estimate(
            shift.high_bps)
        est.low = level_interval(shift.low_bps, le) if shift.n_low > 1 else Estimate(shift.low_bps)
    else:
        est.high = _est(shift.high_bps, hb)
        est.low = _est(shift.low_bps, lb)
    est.time_to_empty = _interval(float(tau0[0]), taub, ideal)
    est.budget = _interval(float(bud0[0]), budb, bud_switch)
    est.interval_s = dt
    est.volume_before_bits = shift.volume_before_bits
    est.high_rate_sd, est.low_rate_sd = shift.high_sd, shift.low_sd
    est.n_high, est.n_low = shift.n_high, shift.n_low
    est.high_rates, est.low_rates = shift.high_rates, shift.low_rates
    if shift.n_low < 2 or shift.n_high < 2:
        est.notes.append("a level rests on fewer than two intervals: its spread is unknown and "
                         "it has no interval; sample faster")
    return est


@dataclass
class RefillEstimate:
    """The refill rate after a rest of ``rest_s``: tokens back per second, with its interval."""
    rest_s: float
    refill: Estimate | None  # bit/s of tokens
    budget: Estimate | None  # bits above the low rate in the second drain
    high_time: float = math.nan  # s of high rate the refill bought (budget / (high − low))
    saturated: bool = False  # the bucket was full again: refill is a lower bound
    notes: list[str] = field(default_factory=list)


def estimate_refill(first: DrainEstimate, t_start: FloatArray, t_end: FloatArray,
                    nbytes: FloatArray, rest_s: float, n_boot: int = N_BOOT,
                    seed: int = 1) -> RefillEstimate:
    """Refill rate from a second drain after a rest, with the first drain's levels
    (and its method: the second budget's volume is noisy as the first's)."""
    out = RefillEstimate(rest_s, None, None)
    if first.high is None or first.low is None or first.budget is None:
        out.notes.append("the first drain has no measured levels; no refill estimate")
        return out
    if rest_s <= 0:
        out.notes.append("no rest between the drains; no refill estimate")
        return out
    t0 = np.asarray(t_start, dtype=np.float64)
    t1 = np.asarray(t_end, dtype=np.float64)
    b = np.asarray(nbytes, dtype=np.float64)
    if len(t0) == 0:
        out.notes.append("the second drain has no intervals")
        return out
    h, lo = first.high.value, first.low.value
    r = rates_of(b, t1 - t0)
    full = full_mask(t1 - t0)
    top = lo + TRANSITION_BAND * (h - lo)
    # First clean low interval: at or under the band, and (full intervals after it)
    # at most one in ten above it.
    j = None
    for i in range(len(r)):
        rest = r[i:][full[i:]]
        if r[i] <= top and (len(rest) == 0 or np.mean(rest > top) <= 0.1):
            j = i
            break
    if j is None:
        out.notes.append("the second drain never settled at the low rate")
        return out
    cum = np.concatenate([[0.0], np.cumsum(b * 8.0)])
    t_b = float(t0[j]) - float(t0[0])
    bits_b = float(cum[j])
    rng = np.random.default_rng(seed)
    if first.method == "t" and first.low_error is not None and first.high_error is not None:
        lb = _t_draws(rng, lo, first.low_error, n_boot)
        he = first.volume_error or first.high_error
        v_sd = volume_sd(8.0 * b[:j], he)
        vb = v_sd * rng.standard_t(he.df, n_boot) if math.isfinite(v_sd) else np.zeros(n_boot)
    else:
        lb = _level_draws(rng, first.low_rates, n_boot)
        vb = np.zeros(n_boot)
    budget = bits_b - lo * t_b
    boot_budget = bits_b + vb - lb * t_b
    dt = first.interval_s or interval_seconds(t0, t1)
    # the rest is measured between interval boundaries: each end is known to ±dt/2
    boot_rest = np.maximum(rest_s + rng.uniform(-dt / 2.0, dt / 2.0, n_boot), dt / 2.0)
    out.budget = _est(budget, boot_budget)
    out.refill = _est(budget / rest_s, boot_budget / boot_rest)
    out.high_time = budget / (h - lo) if h > lo else math.nan
    if budget >= SATURATED_SHARE * first.budget.value:
        out.saturated = True
        out.notes.append(f"the bucket refilled to {budget / first.budget.value:.0%} of the first "
                         "budget during the rest: the refill rate is a lower bound; rest less")
    if j == 0:
        out.notes.append("no high rate after the rest: the refill is below the resolution")
    return out
