"""How many repetitions a target needs when the data never reach it: the 1/√n law.

When the mean CI of the convergence curve (:mod:`.convergence`) never gets within ±e,
the repetitions needed are predicted from the 1/√n law of quantile CI widths
(:func:`.stats.fit_sqrt_law`), and the prediction is labelled reliable only when the data
show the law (:func:`law_reliability`): its reasons are codes with data
(:class:`Reliability`), worded by :mod:`cloudbench.report.confirm_text`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.checks import (
    MIN_N_INDEPENDENCE,
    MIN_N_MODES,
    MIN_N_STATIONARITY,
    MIN_N_TREND,
    CheckResult,
)
from cloudbench.analysis.convergence import convergence, finite_or_none, relative_half_width
from cloudbench.analysis.stats import SqrtLawFit, fit_sqrt_law_rows, min_n_for_ci

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


# A prediction from the 1/√n law is *reliable* only when the data show the law:
# the slope's own interval -- the SLOPE_LEVEL percentile interval of
# the free log-log slope over SLOPE_BOOT moving-block bootstrap resamples of the
# repetitions in their order (blocks of ceil(n^(1/3)), see slope_bootstrap) --
# lies inside SLOPE_BAND (and so does the slope itself), the fit spans at least
# MIN_SPAN in n (two octaves: 24 repetitions for the median at 95 %), AND the
# independence, stationarity, trend and modes checks of the series ran and did
# not warn. A bootstrap cannot see drift or a regime switch in the order of the
# repetitions (the convergence curve draws random subsets, so it never sees the
# order either); the checks do, which is why both are needed.
# The band is not centred on -1/2: at n = 20-100 the exact-rank CI of i.i.d.
# data shrinks a little faster than the law (mean free slope -0.56..-0.62 in
# simulation: the subsets' extreme order statistics are wider than the normal
# approximation), so it reaches further down than up. Coverage of the interval:
# tests/analysis/coverage; the rates: bench/bench_confirm_reliable.py.
SLOPE_BAND = (-0.8, -0.3)
SLOPE_LEVEL = 0.80
MIN_SPAN = 4.0
SLOPE_BOOT = 200
RELIABILITY_CHECKS = ("independence", "stationarity", "trend", "modes")
# The law fitted on small n overshoots: exact ranks are conservative there, so the
# half-widths it extrapolates from are wide. On i.i.d. normal samples of 40 the
# prediction was 1.2-4x (2.5-97.5 %) the n at which the CI really reaches the
# target (tests/analysis/coverage); the range's lower end is divided by this.
LAW_OVERSHOOT = 2.5
SLOPE_BOOT_SUBSETS = 100
SLOPE_BOOT_SIZES = 50  # a geometric grid is enough for a slope (N = 1000: 0.03 s, not 2 s)


class Unreliable(enum.Enum):
    """Why a 1/√n prediction is not labelled reliable (:func:`law_reliability`)."""

    SHORT_FIT = "short_fit"  # the slope's fit spans less than MIN_SPAN in n
    NO_SLOPE = "no_slope"  # the CI half-width has no finite log-log slope
    NO_SLOPE_INTERVAL = "no_slope_interval"  # too few bootstrap slopes for an interval
    SLOPE_OUTSIDE_BAND = "slope_outside_band"  # the slope or its interval leaves SLOPE_BAND
    CHECKS_WARNED = "checks_warned"  # a check of RELIABILITY_CHECKS warned
    CHECKS_NOT_RUN = "checks_not_run"  # a check of RELIABILITY_CHECKS was skipped or missing


@dataclass(frozen=True)
class Reliability:
    """The reasons a prediction is not reliable (none: reliable), with the checks they name."""

    reasons: tuple[Unreliable, ...] = ()
    warned: tuple[str, ...] = ()
    unchecked: tuple[str, ...] = ()

    @property
    def reliable(self) -> bool:
        """True when there is no reason against the prediction."""
        return not self.reasons


class SlopeIntervalJSON(TypedDict):
    """``free_slope_interval`` of a prediction in ``confirm.json``."""

    level: float
    lower: float | None
    upper: float | None
    method: str


class PredictionJSON(TypedDict):
    """``prediction`` of a target in ``confirm.json`` (its ``reason`` is worded by the report)."""

    n: int
    more: int
    law: str
    a: float
    fit_sizes: list[int]
    free_slope: float | None
    free_slope_sd: float | None
    free_slope_interval: SlopeIntervalJSON
    reliable_band: list[float]
    slope_fit_sizes: list[int]
    n_range: list[int] | None
    reliable: bool


@dataclass(frozen=True)
class Prediction:
    """Repetitions needed by the 1/√n law when the data never reach the target.

    ``n_low``–``n_high``: the 2.5–97.5 % range of the prediction over the
    bootstrap data sets that gave ``slope_sd`` (0 when not computed);
    ``slope_low``–``slope_high``: the slope's :data:`SLOPE_LEVEL` interval (nan when
    not computed)."""

    n: int
    more: int
    fit: SqrtLawFit
    reliability: Reliability
    slope_sd: float = math.nan
    n_low: int = 0
    n_high: int = 0
    slope_low: float = math.nan
    slope_high: float = math.nan

    @property
    def reliable(self) -> bool:
        """Whether the data show the law (:func:`law_reliability`)."""
        return self.reliability.reliable

    def to_json(self) -> PredictionJSON:
        """The prediction's numbers as ``confirm.json`` holds them."""
        f = self.fit
        return {
            "n": self.n,
            "more": self.more,
            "law": "relative half-width = a / sqrt(n)",
            "a": f.a,
            "fit_sizes": [f.n_lo, f.n_hi],
            "free_slope": finite_or_none(f.slope),
            "free_slope_sd": finite_or_none(self.slope_sd),
            "free_slope_interval": {
                "level": SLOPE_LEVEL,
                "lower": finite_or_none(self.slope_low),
                "upper": finite_or_none(self.slope_high),
                "method": "percentile, moving-block bootstrap over repetition order",
            },
            "reliable_band": list(SLOPE_BAND),
            "slope_fit_sizes": [f.slope_n_lo, f.slope_n_hi],
            "n_range": [self.n_low, self.n_high] if self.n_high else None,
            "reliable": self.reliable,
        }


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def prediction_from_json(doc: PredictionJSON, fit: SqrtLawFit,
                         checks: Sequence[CheckResult]) -> Prediction:
    """A prediction back from :meth:`Prediction.to_json`, given the law's fit (recomputed from
    the stored convergence curve, :func:`.stats.fit_sqrt_law`) and the series' checks: the
    reliability is a pure function of those and the stored slope interval."""
    lo, hi = _nan(doc["free_slope_interval"]["lower"]), _nan(doc["free_slope_interval"]["upper"])
    n_low, n_high = doc["n_range"] or (0, 0)
    return Prediction(doc["n"], doc["more"], fit, law_reliability(fit, (lo, hi), checks),
                      _nan(doc["free_slope_sd"]), n_low, n_high, lo, hi)


@dataclass(frozen=True)
class SlopeBootstrap:
    """The free slope and the law's constant ``a`` over bootstrap resamples of a series."""

    slopes: FloatArray
    a: FloatArray

    @property
    def slope_sd(self) -> float:
        s = self.slopes[np.isfinite(self.slopes)]
        return float(np.std(s, ddof=1)) if len(s) >= 3 else math.nan

    def slope_interval(self, level: float = SLOPE_LEVEL) -> tuple[float, float]:
        """Percentile interval of the slope at ``level`` (nan, nan with fewer than 10 finite
        slopes or when a tenth of the resamples had none: a slope that often undefined has
        no interval)."""
        s = self.slopes[np.isfinite(self.slopes)]
        if len(s) < 10 or len(s) < 0.9 * len(self.slopes):
            return math.nan, math.nan
        lo, hi = np.percentile(s, [50 * (1 - level), 50 * (1 + level)])
        return float(lo), float(hi)

    def n_range(self, rel_error: float) -> tuple[int, int]:
        """2.5–97.5 % of the bootstrap predictions, the lower end divided by
        ``LAW_OVERSHOOT`` (the model's error: see there)."""
        a = self.a[np.isfinite(self.a)]
        if len(a) < 3:
            return 0, 0
        lo, hi = np.percentile((a / rel_error) ** 2, [2.5, 97.5])
        return math.floor(float(lo) / LAW_OVERSHOOT), math.ceil(float(hi))


def block_length(n: int) -> int:
    """Block length of the moving-block bootstrap: ``ceil(n^(1/3))`` (the usual rate
    for variances, Hall, Horowitz & Jing 1995), at least 1."""
    return max(1, math.ceil(math.pow(n, 1 / 3) - 1e-9))


def moving_block_resamples(rng: np.random.Generator, n: int, n_boot: int,
                           length: int) -> IntArray:
    """``(n_boot, n)`` indices of moving-block bootstrap resamples (Künsch 1989).

    Each resample joins ``ceil(n / length)`` blocks of ``length`` consecutive
    repetitions, their starts uniform over the ``n - length + 1`` possible ones,
    cut to ``n``: neighbouring repetitions stay neighbours inside a block, so the
    resamples keep short-range dependence that an i.i.d. bootstrap would erase.
    """
    length = min(max(1, length), n)
    blocks = math.ceil(n / length)
    starts = rng.integers(0, n - length + 1, (n_boot, blocks))
    idx: IntArray = (starts[:, :, None] + np.arange(length)).reshape(n_boot, -1)[:, :n]
    return idx


def slope_bootstrap(values: FloatArray, p: float, level: float, *, n_boot: int = SLOPE_BOOT,
                    subsets: int = SLOPE_BOOT_SUBSETS, seed: int = 0,
                    max_sizes: int = 1000) -> SlopeBootstrap:
    """Moving-block bootstrap of the 1/√n fit over the repetitions in their order.

    Method: ``n_boot`` resamples of the same size (:func:`moving_block_resamples`,
    blocks of :func:`block_length`), each run through :func:`convergence`
    (sharing its random subsets, so one vectorised call) and
    :func:`fit_sqrt_law`. ``values`` must be in repetition order. The slope's
    interval is :meth:`SlopeBootstrap.slope_interval`; its coverage of the slope
    that independent samples give is checked in tests/analysis/coverage."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) < min_n_for_ci(p, level) or n_boot < 3:
        return SlopeBootstrap(np.full(0, math.nan), np.full(0, math.nan))
    rng = np.random.default_rng([seed, len(x), 23])
    sets = np.sort(x[moving_block_resamples(rng, len(x), n_boot, block_length(len(x)))], axis=1)
    curves = convergence(sets, p, level, subsets=subsets, seed=seed, max_sizes=max_sizes)
    # one fit per resample, all at once (fit_sqrt_law per curve was three quarters of confirm's time)
    rel = relative_half_width(*(np.stack([getattr(c, k) for c in curves]) for k in ("estimate", "lower", "upper")))
    slopes, a = fit_sqrt_law_rows(curves[0].sizes, rel)
    return SlopeBootstrap(slopes, a)


def min_n_for_reliable(p: float, level: float) -> int:
    """The fewest repetitions with which a prediction can be labelled reliable at all:
    a convergence curve spanning :data:`MIN_SPAN` in n from the smallest n with a CI,
    and enough values for every check of :data:`RELIABILITY_CHECKS` (24 for the
    median at 95 %, 116 for p90)."""
    span = math.ceil(MIN_SPAN * min_n_for_ci(p, level) - 1e-9)
    return max(span, MIN_N_INDEPENDENCE, MIN_N_STATIONARITY, MIN_N_TREND, MIN_N_MODES)


def law_reliability(fit: SqrtLawFit, slope_interval: tuple[float, float],
                    checks: Sequence[CheckResult] = ()) -> Reliability:
    """Whether a 1/√n prediction may be called reliable, and if not why.

    Reliable: the fit spans at least :data:`MIN_SPAN` in n, the slope and its
    :data:`SLOPE_LEVEL` block-bootstrap interval (``slope_interval``,
    :meth:`SlopeBootstrap.slope_interval`; nan when none) lie inside :data:`SLOPE_BAND`,
    and every check of :data:`RELIABILITY_CHECKS` ran on the series and did not warn.
    """
    reasons: list[Unreliable] = []
    if not fit.span >= MIN_SPAN:
        reasons.append(Unreliable.SHORT_FIT)
    lo, hi = slope_interval
    if not math.isfinite(fit.slope):
        reasons.append(Unreliable.NO_SLOPE)
    elif not (math.isfinite(lo) and math.isfinite(hi)):
        reasons.append(Unreliable.NO_SLOPE_INTERVAL)
    elif not (SLOPE_BAND[0] <= lo <= hi <= SLOPE_BAND[1]
              and SLOPE_BAND[0] <= fit.slope <= SLOPE_BAND[1]):
        reasons.append(Unreliable.SLOPE_OUTSIDE_BAND)
    by_name = {c.name: c for c in checks}
    warned = tuple(n for n in RELIABILITY_CHECKS if n in by_name and by_name[n].warned)
    unchecked = tuple(n for n in RELIABILITY_CHECKS
                      if n not in by_name or by_name[n].status == "skipped")
    if warned:
        reasons.append(Unreliable.CHECKS_WARNED)
    if unchecked:
        reasons.append(Unreliable.CHECKS_NOT_RUN)
    return Reliability(tuple(reasons), warned, unchecked)
