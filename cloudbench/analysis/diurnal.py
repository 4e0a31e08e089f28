"""Time-of-day effects in one series of per-run values (pure: arrays in, numbers out).

:func:`diurnal_series` takes the runs' times (UTC epoch seconds), their local
offsets (seconds east of UTC, 0 for a compressed day) and one value per run, and
the period of the cycle ``P`` (86400 s for the day, 604800 s for the week, or a
compressed day). It reports

* the values by hour of the cycle (``P/24`` wide bins) and by weekday × hour;
* **Kruskal–Wallis** across the hours (scipy.stats.kruskal), with the effect size
  ε² = H / (n − 1) (Tomczak & Tomczak 2014);
* **Mann–Whitney U** weekday vs weekend (scipy.stats.mannwhitneyu), with the
  rank-biserial correlation r = 2U/(n₁n₂) − 1;
* a **Lomb–Scargle** periodogram of the irregularly timed values
  (astropy.timeseries.LombScargle): the peak over periods from P/3 to 1.5 × the
  span, its false-alarm probability (Baluev 2008), and the p-value of the power at
  P itself (the single-frequency test, the primary test here);
* the **period and amplitude** of a least-squares sinusoid started at the peak
  (scipy.optimize.curve_fit), with their standard errors from its covariance;
* the **minimum detectable effect**: the smallest amplitude at P that the
  F-test of a sinusoid at a known period (2 and n − 3 degrees of freedom; the
  noncentrality n·A²/(2σ²) for phases spread over the cycle) detects with
  probability ``power`` at ``alpha`` (scipy.stats.ncf), and the smallest Cohen's f
  across the hours for a one-way ANOVA with ``power`` (statsmodels FTestAnovaPower).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, stats

HOURS = 24
WEEKEND = (5, 6)  # Saturday, Sunday (weekday 0 = Monday)


@dataclass
class Fit:
    """A least-squares sinusoid: ``mean + amplitude·sin(2π(t − phase)/period)``."""

    period_s: float
    period_se_s: float
    amplitude: float
    amplitude_se: float
    phase_s: float  # at the analysis period, counted from the UTC epoch
    mean: float


@dataclass
class DiurnalSeries:
    """The time-of-day analysis of one series (every p-value is two-sided)."""

    n: int
    period_s: float
    by_hour: list[dict[str, float]]
    heatmap: list[list[float | None]]  # weekday (Mon..Sun) × hour: median, None when empty
    kruskal_h: float | None
    kruskal_p: float | None
    kruskal_epsilon2: float | None
    mw_u: float | None
    mw_p: float | None
    mw_rank_biserial: float | None
    n_weekday: int
    n_weekend: int
    ls_best_period_s: float | None
    ls_best_fap: float | None
    ls_power_at_period: float | None
    p_at_period: float | None  # the primary test: the Lomb-Scargle power at the period
    fit: Fit | None
    residual_sd: float | None
    mde_amplitude: float | None
    mde_cohens_f: float | None
    alpha: float
    power: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def phase_bins(t: NDArray[np.float64], offset: NDArray[np.float64], period: float,
               bins: int = HOURS) -> NDArray[np.int64]:
    """The hour (of ``bins``) of the cycle of each time, local offsets applied."""
    pos = np.mod(t + offset, period)
    return np.minimum((pos // (period / bins)).astype(np.int64), bins - 1)


def weekdays(t: NDArray[np.float64], offset: NDArray[np.float64], period: float) -> NDArray[np.int64]:
    """Weekday (0 = Monday) of each time, days of length ``period`` counted from the UTC epoch."""
    day = np.floor((t + offset) / period).astype(np.int64)
    return np.mod(day + 3, 7)  # 1970-01-01 was a Thursday


def diurnal_series(t: NDArray[np.float64], values: NDArray[np.float64], period: float,
                   offset: NDArray[np.float64] | float = 0.0, alpha: float = 0.05,
                   power: float = 0.8) -> DiurnalSeries:
    """The analysis of one series; ``t`` in UTC epoch seconds, ``period`` in seconds."""
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    off = np.broadcast_to(np.asarray(offset, dtype=np.float64), t.shape)
    ok = np.isfinite(t) & np.isfinite(y)
    t, y, off = t[ok], y[ok], off[ok]
    n = int(t.size)
    if period <= 0:
        raise ValueError("period must be positive")
    notes: list[str] = []
    hours = phase_bins(t, off, period)
    wd = weekdays(t, off, period)
    by_hour = [{"hour": int(h), "n": int((hours == h).sum()), "median": float(np.median(y[hours == h])),
                "mean": float(np.mean(y[hours == h]))} for h in range(HOURS) if (hours == h).any()]
    heat: list[list[float | None]] = [[None] * HOURS for _ in range(7)]
    for d in range(7):
        for h in range(HOURS):
            sel = (wd == d) & (hours == h)
            if sel.any():
                heat[d][h] = float(np.median(y[sel]))

    groups = [y[hours == h] for h in range(HOURS) if (hours == h).any()]
    kw_h = kw_p = eps2 = None
    if len(groups) >= 2 and n > len(groups):
        try:
            with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)  # all values tied: H is nan, handled below
                res = stats.kruskal(*groups)
            kw_h, kw_p = float(res.statistic), float(res.pvalue)
        except ValueError:  # every value equal: no difference at all
            kw_h, kw_p = 0.0, 1.0
        if not math.isfinite(kw_h):
            kw_h, kw_p = 0.0, 1.0
        eps2 = kw_h / (n - 1)
    else:
        notes.append(f"Kruskal-Wallis needs values in 2 or more hours and more values than hours "
                     f"({n} values in {len(groups)} hours)")

    weekend = np.isin(wd, WEEKEND)
    a, b = y[~weekend], y[weekend]
    mw_u = mw_p = rb = None
    if a.size and b.size:
        res2 = stats.mannwhitneyu(a, b, alternative="two-sided")
        mw_u, mw_p = float(res2.statistic), float(res2.pvalue)
        rb = 2.0 * mw_u / (a.size * b.size) - 1.0
    else:
        notes.append("no weekday vs weekend comparison: the runs fall on "
                     + ("weekdays only" if a.size else "weekend days only"))

    best_period = best_fap = power_at = p_at = None
    fit: Fit | None = None
    resid_sd = mde_amp = None
    span = float(t.max() - t.min()) if n else 0.0
    if n >= 5 and np.ptp(y) > 0:
        from astropy.timeseries import LombScargle

        t0 = float(t.min())
        ls = LombScargle(t - t0, y)
        fmin, fmax = 1.0 / (1.5 * max(span, period)), 3.0 / period
        freq, pw = ls.autopower(minimum_frequency=fmin, maximum_frequency=fmax, samples_per_peak=20)
        i = int(np.argmax(pw))
        best_period = float(1.0 / freq[i])
        best_fap = float(ls.false_alarm_probability(pw[i], minimum_frequency=fmin, maximum_frequency=fmax,
                                                    method="baluev"))
        power_at = float(ls.power(1.0 / period))
        p_at = float(ls.false_alarm_probability(power_at, method="single"))
        fit = _fit(t - t0, y, best_period if best_fap < alpha else period)
        resid_sd, mde_amp, phase = _mde_sinusoid(t, y, period, alpha, power)
        if fit is not None and phase is not None:
            fit.phase_s = phase
    elif n >= 5:
        notes.append("every value is the same: no periodicity to look for")
        resid_sd = 0.0
    else:
        notes.append(f"{n} values: too few for a periodogram (5 or more)")
    if span < period:
        notes.append(f"the runs span {span:.0f}s, less than one period ({period:.0f}s): the period is "
                     "poorly determined")
    mde_f = _mde_anova(n, len(groups), alpha, power)
    return DiurnalSeries(n, period, by_hour, heat, kw_h, kw_p, eps2, mw_u, mw_p, rb, int(a.size), int(b.size),
                         best_period, best_fap, power_at, p_at, fit, resid_sd, mde_amp, mde_f, alpha, power,
                         notes)


def _fit(t: NDArray[np.float64], y: NDArray[np.float64], period0: float) -> Fit | None:
    """Least-squares sinusoid with a free period, started at ``period0`` (curve_fit)."""
    def model(x: NDArray[np.float64], c: float, a: float, b: float, p: float) -> NDArray[np.float64]:
        w = 2.0 * np.pi * x / p
        return c + a * np.sin(w) + b * np.cos(w)

    w0 = 2.0 * np.pi * t / period0
    design = np.column_stack([np.ones_like(t), np.sin(w0), np.cos(w0)])
    c0, a0, b0 = np.linalg.lstsq(design, y, rcond=None)[0]
    if t.size < 5:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optimize.OptimizeWarning)
            popt, pcov = optimize.curve_fit(model, t, y, p0=[c0, a0, b0, period0], maxfev=20000)
    except (RuntimeError, ValueError):
        return None
    c, a, b, p = (float(x) for x in popt)
    amp = math.hypot(a, b)
    if not np.all(np.isfinite(pcov)) or amp == 0:
        return None
    # delta method: d amp / d(a, b) = (a, b) / amp
    grad = np.array([a / amp, b / amp])
    amp_var = float(grad @ pcov[1:3, 1:3] @ grad)
    # a·sin(w) + b·cos(w) = amp·sin(w + φ), φ = atan2(b, a): as sin(2π(t − phase)/p)
    phase = -math.atan2(b, a) * p / (2.0 * np.pi)
    return Fit(abs(p), math.sqrt(max(float(pcov[3, 3]), 0.0)), amp, math.sqrt(max(amp_var, 0.0)), phase, c)


def _mde_sinusoid(t: NDArray[np.float64], y: NDArray[np.float64], period: float, alpha: float,
                  power: float) -> tuple[float | None, float | None, float | None]:
    """(residual SD at the known period, smallest amplitude detected with ``power``, the phase
    of the sinusoid at the period, counted from the UTC epoch)."""
    n = t.size
    if n <= 4:
        return None, None, None
    w = 2.0 * np.pi * t / period
    design = np.column_stack([np.ones_like(t), np.sin(w), np.cos(w)])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    rss = float(np.sum((y - design @ coef) ** 2))
    sd = math.sqrt(rss / (n - 3))
    dfd = n - 3
    crit = float(stats.f.ppf(1 - alpha, 2, dfd))

    def gap(lam: float) -> float:
        return float(stats.ncf.sf(crit, 2, dfd, lam)) - power

    lam = optimize.brentq(gap, 1e-9, 1e4)
    phase = float(np.mod(-math.atan2(coef[2], coef[1]) * period / (2.0 * np.pi), period))
    return sd, sd * math.sqrt(2.0 * lam / n), phase


def _mde_anova(n: int, k: int, alpha: float, power: float) -> float | None:
    """Smallest Cohen's f across ``k`` hours that a one-way ANOVA of ``n`` values detects."""
    if k < 2 or n <= k:
        return None
    from statsmodels.stats.power import FTestAnovaPower

    try:
        f = FTestAnovaPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power, k_groups=k)
    except (ValueError, RuntimeError):
        return None
    return float(np.asarray(f).item())
