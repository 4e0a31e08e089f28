"""Time-of-day effects in one series of a scheduled campaign (pure: arrays in, numbers out).

**The run is the unit.** The repetitions of one run share its hour and whatever
the cloud did in it (a per-run effect), so they are not independent draws at that
hour. :func:`diurnal_series` takes every value with the run it belongs to and
first reduces each run to one value (the median of its repetitions, at the mean
of their times); every test, fit and minimum detectable effect below sees one
value per run, and its n is the number of runs. Weekday vs weekend goes one step
further: a day's runs share that day's conditions, so the unit is the day.

Given the runs' times (UTC epoch seconds), their local offsets (seconds east of
UTC, 0 for a compressed day), the period of the cycle ``P`` (86400 s, 604800 s
or a compressed day) and the length of a day (86400 s, or ``schedule.day`` of a
compressed campaign: the weekday of a value comes from its day, never from
``P``), it reports

* the run values by hour of the cycle (``P/24`` wide bins) and by weekday × hour
  of the day;
* the **primary test**: a sinusoid at ``P`` (regression on sin, cos) with AR(2)
  errors across consecutive runs, fitted by iterated feasible GLS (statsmodels
  ``GLSAR``), and the F-test of both coefficients. Consecutive runs are correlated
  (a slow afternoon lasts more than an hour); ordinary least squares or a
  Lomb–Scargle power would read that red noise as a cycle. AR(2), not AR(1): on
  campaigns with regime switches and slow drift (cloudbench.testing.timeofday) AR(1)
  errors left the test at 6.7 % for α = 5 % and 1.2 % for α = 0.625 % (Holm's first
  step over 8 series), AR(2) at 4.1 % and 0.67 % (2,400 series). Below
  ``BOOTSTRAP_BELOW`` runs the F distribution is not the null distribution of that
  statistic: the AR coefficients estimated from a few runs are biased toward 0 and
  the test is anti-conservative (22 % rejections at α = 5 % on 20 i.i.d. runs). There
  the p-value comes from a parametric AR(2) bootstrap of the same procedure: null
  series with the run times, the AR(2) coefficients (Yule–Walker) and the resampled
  innovations of the observed series, each refitted by the same iterated GLS
  (``BOOTSTRAP_SERIES`` null series, vectorised; the generator seeded from the
  data, so a series always gets the same p-value);
* **Kruskal–Wallis** of the run values across the hours (scipy.stats.kruskal),
  with the effect size ε² = H / (n − 1) (Tomczak & Tomczak 2014);
* **Mann–Whitney U** weekday vs weekend on the means of whole days (exact;
  scipy.stats.mannwhitneyu), with the rank-biserial correlation; only with two
  weeks of whole days or more (one week has 5 weekdays and 2 weekend days: the
  smallest two-sided p-value Mann–Whitney can give is 2/21 = 0.095, above any
  usual α), otherwise "not testable" and why;
* the **period and amplitude** of a sinusoid with a free period (nonlinear least
  squares on the AR(2)-prewhitened residuals, scipy.optimize.least_squares),
  fitted only when the primary test rejects, and reported only when identified
  (a finite standard error under a fifth of the period, within the span);
  otherwise a note says why, and the amplitude at ``P`` (from the GLS fit) stands;
* the **minimum detectable amplitude** at ``P``: the amplitude the primary F-test
  (2 and n − 3 degrees of freedom, n runs) detects with probability ``power`` at
  ``alpha`` (noncentral F, scipy.stats.ncf), from the standard errors of the GLS
  coefficients; and the smallest Cohen's f across the hours for a one-way ANOVA
  of n runs (statsmodels FTestAnovaPower).

The p-values here are per series; the caller adjusts them over series.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import TypedDict, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, stats
from scipy.signal import lfilter

HOURS = 24
WEEKEND = (5, 6)  # Saturday, Sunday (weekday 0 = Monday)
WEEKDAY_TEST_DAYS = 14  # two weeks of whole days: 10 weekdays against 4 weekend days
MAX_PERIOD_SE = 0.2  # a free-period fit whose SE is above this fraction of its period is not identified

FloatArray = NDArray[np.float64]


@dataclass
class Fit:
    """A sinusoid with a free period: ``mean + amplitude·sin(2π(t − phase)/period)``."""

    period_s: float
    period_se_s: float
    amplitude: float
    amplitude_se: float
    phase_s: float  # at the analysis period, counted from the UTC epoch, in [0, period)
    mean: float


class FitJSON(TypedDict):
    """A free-period fit as ``diurnal --json`` gives it (:class:`Fit`'s fields)."""

    period_s: float
    period_se_s: float
    amplitude: float
    amplitude_se: float
    phase_s: float
    mean: float


class DiurnalSeriesJSON(TypedDict):
    """One series' analysis as ``diurnal --json`` gives it (:class:`DiurnalSeries`'s fields, in order)."""

    n: int
    n_values: int
    period_s: float
    day_s: float
    by_hour: list[dict[str, float]]
    heatmap: list[list[float | None]]
    p_at_period: float | None
    ar_rho: list[float] | None
    amplitude_at_period: float | None
    amplitude_at_period_se: float | None
    phase_at_period_s: float | None
    kruskal_h: float | None
    kruskal_p: float | None
    kruskal_epsilon2: float | None
    mw_u: float | None
    mw_p: float | None
    mw_rank_biserial: float | None
    weekday_days: int
    weekend_days: int
    weekday_not_testable: str | None
    fit: FitJSON | None
    fit_note: str | None
    residual_sd: float | None
    mde_amplitude: float | None
    mde_cohens_f: float | None
    alpha: float
    power: float
    notes: list[str]


@dataclass
class DiurnalSeries:
    """The time-of-day analysis of one series (every p-value two-sided, per series)."""

    n: int  # runs: the unit of every test below
    n_values: int  # repetitions' values the runs were reduced from
    period_s: float
    day_s: float
    by_hour: list[dict[str, float]]
    heatmap: list[list[float | None]]  # weekday (Mon..Sun) × hour of the day: median run value
    p_at_period: float | None  # the primary test: a sinusoid at the period, AR(2) errors
    ar_rho: list[float] | None  # the AR(2) coefficients between consecutive runs it estimated
    amplitude_at_period: float | None
    amplitude_at_period_se: float | None
    phase_at_period_s: float | None
    kruskal_h: float | None
    kruskal_p: float | None
    kruskal_epsilon2: float | None
    mw_u: float | None
    mw_p: float | None
    mw_rank_biserial: float | None
    weekday_days: int  # whole days on weekdays / weekend days (the units of Mann-Whitney)
    weekend_days: int
    weekday_not_testable: str | None
    fit: Fit | None
    fit_note: str | None  # why there is no free-period fit
    residual_sd: float | None
    mde_amplitude: float | None
    mde_cohens_f: float | None
    alpha: float
    power: float
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> DiurnalSeriesJSON:
        """The analysis's numbers, one key per field in field order (the fit as a mapping)."""
        return cast(DiurnalSeriesJSON, asdict(self))

    @classmethod
    def from_json(cls, doc: DiurnalSeriesJSON) -> DiurnalSeries:
        """The analysis back from :meth:`to_json` (extra keys of a report row ignored)."""
        fit = doc["fit"]
        values = {k: doc[k] for k in DiurnalSeriesJSON.__annotations__}  # type: ignore[literal-required]
        return cls(**{**values, "fit": None if fit is None else Fit(**fit)})


def phase_bins(t: ArrayLike, offset: ArrayLike, period: float, bins: int = HOURS) -> NDArray[np.int64]:
    """The hour (of ``bins``) of the cycle of each time, local offsets applied."""
    pos = np.mod(np.asarray(t, dtype=np.float64) + np.asarray(offset, dtype=np.float64), period)
    return np.minimum((pos // (period / bins)).astype(np.int64), bins - 1)


def day_index(t: ArrayLike, offset: ArrayLike, day: float) -> NDArray[np.int64]:
    """The day (of ``day`` seconds, local offsets applied) of each time, counted from the epoch."""
    local = np.asarray(t, dtype=np.float64) + np.asarray(offset, dtype=np.float64)
    return np.floor(local / day).astype(np.int64)


def weekdays(t: ArrayLike, offset: ArrayLike, day: float = 86400.0) -> NDArray[np.int64]:
    """Weekday (0 = Monday) of each time, days of length ``day`` (86400 s, or a compressed
    campaign's ``schedule.day``) counted from the UTC epoch."""
    return np.mod(day_index(t, offset, day) + 3, 7)  # 1970-01-01 was a Thursday


def run_values(t: ArrayLike, values: ArrayLike, run: ArrayLike,
               offset: ArrayLike | None = None) -> tuple[FloatArray, FloatArray, FloatArray]:
    """One value per run: the median of its values, at the mean of their times, with the local
    offset of its first value (0 without ``offset``); (times, values, offsets), in time order."""
    tv = np.asarray(t, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    off = np.zeros_like(tv) if offset is None else np.asarray(offset, dtype=np.float64)
    if tv.size == 0:
        return tv, y, off
    _, first, inv = np.unique(np.asarray(run), return_index=True, return_inverse=True)
    k = first.size
    tr = np.bincount(inv, weights=tv, minlength=k) / np.bincount(inv, minlength=k)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(k + 1))
    ys = y[order]
    yr = np.array([np.median(ys[bounds[i]:bounds[i + 1]]) for i in range(k)])
    s = np.argsort(tr, kind="stable")
    return tr[s], yr[s], off[first][s]


def diurnal_series(t: ArrayLike, values: ArrayLike, period: float, offset: ArrayLike = 0.0,
                   alpha: float = 0.05, power: float = 0.8, *, run: ArrayLike | None = None,
                   day: float = 86400.0) -> DiurnalSeries:
    """The analysis of one series; ``t`` in UTC epoch seconds, ``period`` and ``day`` in seconds.

    ``run`` labels the run of each value (its repetitions share one label); None means
    each value already is one run's value. ``offset`` is per value or one number."""
    if period <= 0 or day <= 0:
        raise ValueError("period and day must be positive")
    t_all = np.asarray(t, dtype=np.float64)
    y_all = np.asarray(values, dtype=np.float64)
    off_all = np.broadcast_to(np.asarray(offset, dtype=np.float64), t_all.shape)
    labels = np.arange(t_all.size) if run is None else np.asarray(run)
    ok = np.isfinite(t_all) & np.isfinite(y_all)
    n_values = int(ok.sum())
    t, y, off = run_values(t_all[ok], y_all[ok], labels[ok], off_all[ok])
    n = int(t.size)
    notes: list[str] = []
    hours = phase_bins(t, off, period)
    day_hours = phase_bins(t, off, day)
    wd = weekdays(t, off, day)
    by_hour, heat = _hour_tables(y, hours, day_hours, wd)
    groups = [y[hours == h] for h in range(HOURS) if (hours == h).any()]
    kw_h, kw_p, eps2 = _kruskal(groups, n, notes)

    wk = _weekday_weekend(t, off, y, day, alpha)

    p_at = amp_p = amp_p_se = phase_p = resid_sd = mde_amp = None
    rho: list[float] | None = None
    fit: Fit | None = None
    fit_note: str | None = None
    span = float(t.max() - t.min()) if n else 0.0
    if n >= 6 and np.ptp(y) > 0:
        gls = _gls_sinusoid(t, y, period)
        p_at, rho, amp_p, amp_p_se, phase_p, resid_sd, coef_se = gls
        mde_amp = _mde_amplitude(coef_se, n, alpha, power)
        if not math.isfinite(p_at):  # no residual left (a perfect fit of as many runs as parameters)
            notes.append("the sinusoid test is undefined: the runs leave no residual")
            p_at = None
            fit_note = "no residual to judge a fit by"
        elif p_at < alpha:
            fit, fit_note = _free_period_fit(t, y, period, rho, span)
            if fit is not None and phase_p is not None:
                # counted from the epoch a free period's phase drifts by the period's error times
                # the cycles since 1970: the phase at the analysis period is the one to read
                fit.phase_s = phase_p
        else:
            fit_note = f"no sinusoid at the period (p = {p_at:.2g}): no period to fit"
    elif n >= 6:
        notes.append("every run has the same value: no periodicity to look for")
        resid_sd = 0.0
        fit_note = "every run has the same value"
    else:
        notes.append(f"{n} runs: too few for the sinusoid test (6 or more)")
        fit_note = f"{n} runs: too few to fit"
    if span < period:
        notes.append(f"the runs span {span:.0f}s, less than one period ({period:.0f}s)")
    mde_f = _mde_anova(n, len(groups), alpha, power)
    return DiurnalSeries(n, n_values, period, day, by_hour, heat, p_at, rho, amp_p, amp_p_se, phase_p,
                         kw_h, kw_p, eps2, wk[0], wk[1], wk[2], wk[3], wk[4], wk[5], fit, fit_note, resid_sd,
                         mde_amp, mde_f, alpha, power, notes)


def _hour_tables(y: FloatArray, hours: NDArray[np.int64], day_hours: NDArray[np.int64], wd: NDArray[np.int64]
                 ) -> tuple[list[dict[str, float]], list[list[float | None]]]:
    """The runs per hour of the period (count, median, mean) and the weekday × hour-of-day medians."""
    by_hour = [{"hour": int(h), "n": int((hours == h).sum()), "median": float(np.median(y[hours == h])),
                "mean": float(np.mean(y[hours == h]))} for h in range(HOURS) if (hours == h).any()]
    heat: list[list[float | None]] = [[None] * HOURS for _ in range(7)]
    for d in range(7):
        for h in range(HOURS):
            sel = (wd == d) & (day_hours == h)
            if sel.any():
                heat[d][h] = float(np.median(y[sel]))
    return by_hour, heat


def _kruskal(groups: list[FloatArray], n: int, notes: list[str]
             ) -> tuple[float | None, float | None, float | None]:
    """Kruskal-Wallis across the hours (scipy): H, its p-value and epsilon squared, or a note why not."""
    if not (len(groups) >= 2 and n > len(groups)):
        notes.append(f"Kruskal-Wallis needs runs in 2 or more hours and more runs than hours "
                     f"({n} runs in {len(groups)} hours)")
        return None, None, None
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # all values tied: H is nan, handled below
        try:
            res = stats.kruskal(*groups)
            kw_h, kw_p = float(res.statistic), float(res.pvalue)
        except ValueError:  # every value equal: no difference at all
            kw_h, kw_p = 0.0, 1.0
    if not math.isfinite(kw_h):
        kw_h, kw_p = 0.0, 1.0
    return kw_h, kw_p, kw_h / (n - 1)


def _weekday_weekend(t: FloatArray, off: FloatArray, y: FloatArray, day: float, alpha: float
                     ) -> tuple[float | None, float | None, float | None, int, int, str | None]:
    """Mann-Whitney weekday vs weekend on the means of whole days: (U, p, rank-biserial r,
    weekday days, weekend days, why not testable)."""
    local = t + off
    if local.size < 2:
        return None, None, None, 0, 0, f"{local.size} runs: no whole day"
    # a day is whole when the runs cover it but for at most one slot (their usual spacing) at
    # either end: a run starts anywhere in its slot
    gap = float(np.median(np.diff(np.sort(local))))
    start, end = float(local.min()) - gap, float(local.max()) + gap
    whole = np.arange(math.ceil(start / day), math.floor(end / day))  # [k·day, (k+1)·day) inside
    dk = np.floor(local / day).astype(np.int64)
    means = [(int(k), float(np.mean(y[dk == k]))) for k in whole if (dk == k).any()]
    wd_of = {k: (k + 3) % 7 for k, _ in means}
    a = np.array([m for k, m in means if wd_of[k] not in WEEKEND])
    b = np.array([m for k, m in means if wd_of[k] in WEEKEND])
    why = None
    if len(means) < WEEKDAY_TEST_DAYS:
        why = (f"not testable: {_days(len(means), 'whole day')} ({_days(a.size, 'weekday')}, "
               f"{_days(b.size, 'weekend day')}); "
               f"the test compares whole days and needs two weeks of them ({WEEKDAY_TEST_DAYS})")
    elif not a.size or not b.size or 2.0 / math.comb(a.size + b.size, b.size) >= alpha:
        why = (f"not testable: {a.size} weekdays against {b.size} weekend days cannot reach "
               f"p < {alpha:g}")
    if why is not None:
        return None, None, None, int(a.size), int(b.size), why
    res = stats.mannwhitneyu(a, b, alternative="two-sided")
    u = float(res.statistic)
    return u, float(res.pvalue), 2.0 * u / (a.size * b.size) - 1.0, int(a.size), int(b.size), None


def _design(t: FloatArray, period: float) -> FloatArray:
    w = 2.0 * np.pi * np.mod(t, period) / period  # phase from the epoch, reduced first for precision
    return np.column_stack([np.ones_like(t), np.sin(w), np.cos(w)])


AR_ORDER = 2  # of the errors between consecutive runs (see the module's docstring)


def _gls_sinusoid(t: FloatArray, y: FloatArray, period: float
                  ) -> tuple[float, list[float], float, float, float, float, tuple[float, int]]:
    """The primary test: ``y = c + a·sin + b·cos`` at ``period`` with AR(2) errors in run order
    (statsmodels GLSAR, iterated feasible GLS), F-test of a = b = 0.

    Returns (p, rho, amplitude, its SE (delta method), phase from the epoch, SD of the runs
    around the sinusoid, (SE of one coefficient, residual degrees of freedom))."""
    from statsmodels.regression.linear_model import GLSAR  # noqa: PLC0415 - heavy library, only the fits pay for it; not statsmodels.api: it imports everything

    x = _design(t, period)
    model = GLSAR(y, x, rho=AR_ORDER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter of the rho iteration
        res = model.iterative_fit(maxiter=50)
    ftest = res.f_test(np.eye(3)[1:])
    p = float(np.asarray(ftest.pvalue).item())
    a, b = float(res.params[1]), float(res.params[2])
    cov = np.asarray(res.cov_params())[1:3, 1:3]
    amp = math.hypot(a, b)
    grad = np.array([a, b]) / amp if amp > 0 else np.array([1.0, 0.0]) / math.sqrt(2)
    amp_se = math.sqrt(max(float(grad @ cov @ grad), 0.0))
    phase = float(np.mod(-math.atan2(b, a) * period / (2.0 * np.pi), period))
    sd = float(np.std(y - x @ np.asarray(res.params), ddof=3))
    coef_se = math.sqrt(max(float(np.mean(np.diag(cov))), 0.0))
    if y.size < BOOTSTRAP_BELOW and math.isfinite(p):
        p = _ar_bootstrap_p(t, y, period, float(np.asarray(ftest.fvalue).item()))
    return p, [float(r) for r in np.asarray(model.rho).ravel()], amp, amp_se, phase, sd, (coef_se, int(res.df_resid))


BOOTSTRAP_BELOW = 100  # runs; from here on the F distribution holds the level (5-7.5 % at 168 runs)
BOOTSTRAP_SERIES = 999  # null series: p-values down to 0.001, enough for Holm over ~40 series
_BURN_IN = 50
_MAXITER, _RTOL = 50, 1e-4  # GLSAR.iterative_fit's, as called above


def _glsar_f(x: FloatArray, y: FloatArray) -> FloatArray:
    """The primary test's F statistic for each row of ``y`` (series × runs) on the design ``x``:
    statsmodels' ``GLSAR(y, x, rho=2).iterative_fit(maxiter=50)`` and its ``f_test`` of the sine
    and cosine coefficients, done for many series at once (the bootstrap refits ~1,000 null series
    per series; tests/analysis/test_diurnal.py checks it against statsmodels)."""
    order, k = AR_ORDER, x.shape[1]
    rows, n = y.shape
    rho = np.zeros((rows, order))
    params = np.zeros((rows, k))
    last = np.zeros((rows, k))
    active = np.ones(rows, dtype=bool)

    def fit(idx: NDArray[np.int64]) -> tuple[FloatArray, FloatArray, FloatArray]:
        r = rho[idx]
        xw = np.broadcast_to(x[order:], (idx.size, n - order, k)).copy()
        yw = y[idx, order:].copy()
        for j in range(order):
            xw -= r[:, j, None, None] * x[None, order - j - 1:n - j - 1]
            yw -= r[:, j, None] * y[idx, order - j - 1:n - j - 1]
        xtx = np.einsum("bti,btj->bij", xw, xw)
        b = np.linalg.solve(xtx, np.einsum("bti,bt->bi", xw, yw)[..., None])[..., 0]
        ssr = np.sum((yw - np.einsum("bti,bi->bt", xw, b)) ** 2, axis=1)
        return b, xtx, ssr

    for i in range(_MAXITER - 1):
        idx = np.flatnonzero(active)
        if not idx.size:
            break
        b, _, _ = fit(idx)
        params[idx] = b
        if i > 0:
            with np.errstate(divide="ignore", invalid="ignore"):
                diff = np.max(np.abs(last[idx] - b) / np.abs(last[idx]), axis=1)
            conv = diff < _RTOL
            active[idx[conv]] = False
            idx, b = idx[~conv], b[~conv]
        last[idx] = b
        e = y[idx] - b @ x.T
        e -= e.mean(axis=1, keepdims=True)
        acov = np.stack([np.sum(e ** 2, axis=1) / n]
                        + [np.sum(e[:, :-j] * e[:, j:], axis=1) / (n - j) for j in range(1, order + 1)], axis=1)
        toe = np.stack([np.stack([acov[:, abs(a - c)] for c in range(order)], axis=1) for a in range(order)],
                       axis=1)
        # A null series drawn from nearly tied runs (95 of 96 equal) can be constant: its
        # residuals have no variance and no autocorrelation to estimate (rho 0, F nan, which
        # the bootstrap counts against the effect); any other singular system by least squares.
        flat = ~(acov[:, 0] > 0)
        toe[flat] = np.eye(order)
        acov[flat, 1:] = 0.0
        try:
            rho[idx] = np.linalg.solve(toe, acov[:, 1:, None])[..., 0]
        except np.linalg.LinAlgError:
            rho[idx] = (np.linalg.pinv(toe) @ acov[:, 1:, None])[..., 0]
    b, xtx, ssr = fit(np.arange(rows))
    s2 = ssr / (n - order - k)
    inv = np.linalg.inv(xtx)[:, 1:, 1:]
    rb = b[:, 1:]
    q = k - 1
    f: FloatArray = np.einsum("bi,bi->b", rb, np.linalg.solve(inv, rb[..., None])[..., 0]) / (q * s2)
    return f


def _ar_bootstrap_p(t: FloatArray, y: FloatArray, period: float, f_obs: float) -> float:
    """p-value of ``f_obs`` under the null of no sinusoid with AR(2) errors, by a parametric
    bootstrap of the whole GLSAR procedure (see the module's docstring)."""
    from statsmodels.regression.linear_model import yule_walker  # noqa: PLC0415 - heavy library, only the fits pay for it

    yc = y - y.mean()
    rho, _ = yule_walker(yc, order=AR_ORDER, method="mle", result_object=False)
    rho = np.asarray(rho, dtype=np.float64)
    innov = yc[AR_ORDER:] - sum(rho[k] * yc[AR_ORDER - 1 - k:yc.size - 1 - k] for k in range(AR_ORDER))
    innov = innov - innov.mean()
    if not np.any(innov):
        return 1.0
    rng = np.random.default_rng(np.frombuffer(np.ascontiguousarray(y).tobytes(), dtype=np.uint32))
    z = lfilter([1.0], np.concatenate([[1.0], -rho]),
                rng.choice(innov, size=(BOOTSTRAP_SERIES, y.size + _BURN_IN)), axis=1)[:, _BURN_IN:]
    with np.errstate(all="ignore"):
        f = _glsar_f(_design(t, period), z)
    above = int(np.sum(~(f < f_obs)))  # a degenerate null series (nan) counts against the effect
    return (above + 1) / (BOOTSTRAP_SERIES + 1)


def _mde_amplitude(coef: tuple[float, int], n: int, alpha: float, power: float) -> float | None:
    """Smallest amplitude the primary F-test (2, df) detects with ``power``: λ = A²/se² for a
    coefficient pair of standard error se each, A = se·√λ (noncentral F, scipy)."""
    se, dfd = coef
    if dfd < 1 or not math.isfinite(se):
        return None
    crit = float(stats.f.ppf(1 - alpha, 2, dfd))
    lam = optimize.brentq(lambda x: float(stats.ncf.sf(crit, 2, dfd, x)) - power, 1e-9, 1e5)
    return se * math.sqrt(lam)


def _free_period_fit(t: FloatArray, y: FloatArray, period: float, rho: list[float], span: float
                     ) -> tuple[Fit | None, str | None]:
    """A sinusoid with a free period, started at ``period``: nonlinear least squares on the
    residuals prewhitened with the AR coefficients of the GLS fit (scipy least_squares),
    standard errors from its Jacobian. (None, why) when the period is not identified."""
    t0 = float(t.min())
    tt = t - t0
    lags = len(rho)
    c0, a0, b0 = np.linalg.lstsq(_design(tt, period), y, rcond=None)[0]

    def whitened(theta: FloatArray) -> FloatArray:
        c, a, b, p = theta
        w = 2.0 * np.pi * tt / p
        e = y - (c + a * np.sin(w) + b * np.cos(w))
        white: FloatArray = np.array(e[lags:], dtype=np.float64)
        for k, r in enumerate(rho, start=1):
            white -= r * e[lags - k:e.size - k]
        return white

    try:
        sol = optimize.least_squares(whitened, np.array([c0, a0, b0, period]), x_scale="jac",
                                     bounds=([-np.inf, -np.inf, -np.inf, period / 20],
                                             [np.inf, np.inf, np.inf, 20 * period]))
    except (ValueError, np.linalg.LinAlgError):
        return None, "period not identified: the fit failed"
    c, a, b, p = (float(v) for v in sol.x)
    dof = t.size - lags - 4
    jtj = sol.jac.T @ sol.jac
    if not sol.success or dof < 1 or not np.all(np.isfinite(jtj)):
        return None, "period not identified: the fit did not converge"
    with np.errstate(all="ignore"):
        cov = np.linalg.pinv(jtj) * float(np.sum(sol.fun ** 2)) / dof
    p_se = math.sqrt(cov[3, 3]) if cov[3, 3] >= 0 else math.inf
    amp = math.hypot(a, b)
    spacing = float(np.median(np.diff(t))) if t.size > 1 else math.inf
    if not math.isfinite(p_se) or p_se > MAX_PERIOD_SE * p or p > span or p < 2 * spacing or amp == 0:
        return None, ("period not identified: the runs do not pin a period down (the fit's period is "
                      "beyond their span or their spacing, or uncertain by more than "
                      f"{MAX_PERIOD_SE:.0%}); the amplitude at the analysis period stands")
    grad = np.array([a, b]) / amp
    amp_se = math.sqrt(max(float(grad @ cov[1:3, 1:3] @ grad), 0.0))
    phase = float(np.mod(t0 - math.atan2(b, a) * p / (2.0 * np.pi), p))  # the caller's phase replaces it
    return Fit(p, p_se, amp, amp_se, phase, c), None


def _mde_anova(n: int, k: int, alpha: float, power: float) -> float | None:
    """Smallest Cohen's f across ``k`` hours that a one-way ANOVA of ``n`` runs detects."""
    if k < 2 or n <= k:
        return None
    from statsmodels.stats.power import FTestAnovaPower  # noqa: PLC0415 - heavy library, only the fits pay for it

    try:
        f = FTestAnovaPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power, k_groups=k)
    except (ValueError, RuntimeError):
        return None
    return float(np.asarray(f).item())


def _days(n: int, what: str) -> str:
    """``1 whole day``, ``7 whole days``."""
    return f"{n} {what}{'' if n == 1 else 's'}"
