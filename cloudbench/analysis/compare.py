"""Is B different from A, by how much, and does it matter? The statistics of ``cloudbench compare``.

Pure functions over two samples of one series (a workload's metric in one group), one value
per *unit that varies independently*: a run when a side holds several runs (its repetitions
reduced to their median, :func:`reduce_per_run`), a repetition when a side is one run.

Per series (:func:`compare_samples`):

* each side's median with its exact order-statistic CI (:func:`.stats.quantile_ci`);
* the **difference** ``diff``: the Hodges–Lehmann shift of B relative to A (the median of all
  pairwise differences ``b_j - a_i``), with the distribution-free interval from inverting the
  Mann–Whitney test (Lehmann 1963; Hollander & Wolfe ch. 4.3): the order statistics
  ``d_(k)``, ``d_(mn+1-k)`` of the pairwise differences, ``k`` from the exact null
  distribution of U (:func:`mw_null_cdf`; its normal approximation beyond
  :data:`EXACT_MAX_CELLS`);
* the **ratio** ``ratio``: the same on the logarithms when every value is positive,
  ``exp(HL shift of log b - log a)`` (the Hodges–Lehmann *ratio*, B/A; a multiplicative
  change is a shift of the logs), else the shift relative to A's median (``1 + diff / median_a``);
* the two-sided Mann–Whitney U p-value (scipy), Holm-adjusted over the rows shown
  (:func:`holm`);
* the verdict against a threshold (:func:`verdict`): ``better``/``worse`` when the Holm-adjusted
  p-value is below alpha and the estimate lies beyond the threshold; ``equivalent`` when the
  90 % interval lies inside ±threshold (two one-sided tests at 5 %, TOST); otherwise
  ``inconclusive``, with about how many more units per side would decide. Below
  :data:`MIN_N` units per side, no interval and ``inconclusive (n too small)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal, TypedDict

import numpy as np
from numpy.typing import NDArray
from scipy import stats as sps

from cloudbench.analysis.stats import QuantileCI, quantile_ci, quantile_ci_at

FloatArray = NDArray[np.float64]
Direction = Literal["lower", "higher"]

MIN_N = 6  # units per side below which no interval and no verdict are given (an exact median CI needs 6)
ALPHA = 0.05  # two-sided level of the p-values and of the 95 % interval; TOST at ALPHA (90 % interval)
EXACT_MAX_CELLS = 10_000  # m*n up to which U's null distribution is computed exactly
MAX_MORE = 100_000  # "more units would decide" beyond this is reported as out of reach


@lru_cache(maxsize=512)
def mw_null_cdf(m: int, n: int) -> FloatArray:
    """``P(U <= u)`` for ``u = 0..m*n`` under the null (continuous data, no ties).

    U counts the pairs ``(i, j)`` with ``a_i < b_j``. Recursion on the largest of the ``m + n``
    values: it belongs to A with probability ``m/(m+n)`` (adding nothing to U) or to B
    (adding ``m``): ``p(m, n, u) = m/(m+n) p(m-1, n, u) + n/(m+n) p(m, n-1, u-m)`` —
    probabilities, so nothing overflows or cancels.
    """
    prev = [np.ones(1)] * (n + 1)  # row a = 0: U = 0 with certainty for every b
    for a in range(1, m + 1):
        row = [np.ones(1)]
        for b in range(1, n + 1):
            p = np.zeros(a * b + 1)
            p[: (a - 1) * b + 1] += a / (a + b) * prev[b]
            p[a: a + a * (b - 1) + 1] += b / (a + b) * row[b - 1]
            row.append(p)
        prev = row
    return np.minimum(np.cumsum(prev[n]), 1.0)


def mw_rank(m: int, n: int, alpha: float) -> int:
    """Largest ``k`` with ``P(U <= k - 1) <= alpha / 2``: ``[d_(k), d_(mn+1-k)]`` then covers the
    shift with probability >= ``1 - alpha``. 0 when no such interval exists."""
    if m * n <= EXACT_MAX_CELLS:
        cdf = mw_null_cdf(m, n)
        return int(np.searchsorted(cdf, alpha / 2.0 + 1e-12, side="right"))
    # normal approximation with continuity correction (Hollander & Wolfe 4.3)
    z = float(sps.norm.ppf(1.0 - alpha / 2.0))
    return max(0, math.floor(m * n / 2.0 - z * math.sqrt(m * n * (m + n + 1) / 12.0)))


@dataclass(frozen=True)
class Shift:
    """Hodges–Lehmann shift of B relative to A with its Mann–Whitney interval(s)."""

    estimate: float
    ci95: tuple[float, float] | None
    ci90: tuple[float, float] | None


def hl_shift(a: FloatArray, b: FloatArray, alpha: float = ALPHA) -> Shift:
    """Median of all ``b_j - a_i``, and the ``1 - alpha`` and ``1 - 2 alpha`` intervals from
    inverting the Mann–Whitney test (None where the sample sizes allow none)."""
    d = np.sort((np.asarray(b, dtype=np.float64)[None, :] - np.asarray(a, dtype=np.float64)[:, None]).ravel())
    est = float(np.median(d))
    m, n = len(a), len(b)

    def interval(level_alpha: float) -> tuple[float, float] | None:
        k = mw_rank(m, n, level_alpha)
        if k < 1:
            return None
        return float(d[k - 1]), float(d[m * n - k])

    return Shift(est, interval(alpha), interval(2.0 * alpha))


def reduce_per_run(values: Sequence[float] | FloatArray, runs: Sequence[str]) -> tuple[FloatArray, str]:
    """One value per independent unit: each run's median when there are several runs
    (``"run"``), else the repetitions of the one run (``"repetition"``)."""
    x = np.asarray(values, dtype=np.float64)
    ids = list(runs)
    if len(set(ids)) <= 1:
        return x, "repetition"
    order = list(dict.fromkeys(ids))
    arr = np.asarray(ids)
    return np.array([float(np.median(x[arr == r])) for r in order], dtype=np.float64), "run"


@dataclass(frozen=True)
class Threshold:
    """``--threshold``: relative (a share, 0.05) or absolute (``value`` in ``unit``)."""

    value: float
    relative: bool
    unit: str = ""

    def text(self) -> str:
        """``5%`` or ``50us``: as ``--threshold`` takes it."""
        return f"{self.value * 100:.3g}%" if self.relative else f"{self.value:g}{self.unit}"


@dataclass(frozen=True)
class Comparison:
    """One series compared: everything a row of the table and of the JSON holds.

    ``ratio``/``ratio_ci``: B/A (``ratio_method`` says how); ``diff``/``diff_ci``: B - A
    (Hodges–Lehmann); ``decided_on``: ``ratio`` or ``diff``; ``band``: ±threshold on that scale
    (a share for ``ratio``, the series' unit for ``diff``). ``p_holm``, ``verdict`` and ``more``
    are set by :func:`decide` over all rows.
    """

    n_a: int
    n_b: int
    median_a: QuantileCI
    median_b: QuantileCI
    ratio: float | None
    ratio_ci: tuple[float, float] | None
    ratio_ci90: tuple[float, float] | None
    ratio_method: str
    diff: float
    diff_ci: tuple[float, float] | None
    diff_ci90: tuple[float, float] | None
    p: float | None
    decided_on: Literal["ratio", "diff"]
    band: float
    p_holm: float | None = None
    verdict: str = "inconclusive"
    more: int | None = None  # about this many more units per side would decide (inconclusive rows)

    @property
    def relative(self) -> float | None:
        """B/A - 1 (None when there is no ratio)."""
        return None if self.ratio is None else self.ratio - 1.0

    def to_json(self) -> ComparisonJSON:
        """The comparison's numbers as a row of ``compare.json`` holds them."""
        ma, mb = self.median_a, self.median_b
        return {
            "n_a": self.n_a, "n_b": self.n_b,
            "median_a": _num(ma.estimate), "median_b": _num(mb.estimate),
            "median_a_ci": None if not ma.exists else [ma.lower, ma.upper],  # type: ignore[list-item]
            "median_b_ci": None if not mb.exists else [mb.lower, mb.upper],  # type: ignore[list-item]
            "ratio": _num(self.ratio), "ratio_ci": _pair(self.ratio_ci), "ratio_ci90": _pair(self.ratio_ci90),
            "ratio_method": self.ratio_method,
            "diff": _num(self.diff), "diff_ci": _pair(self.diff_ci), "diff_ci90": _pair(self.diff_ci90),
            "p": self.p, "p_holm": self.p_holm, "verdict": self.verdict, "more_per_side": self.more,
            "decided_on": self.decided_on, "band": self.band,
        }

    @classmethod
    def from_json(cls, doc: ComparisonJSON) -> Comparison:
        """The comparison back from :meth:`to_json` (the medians' CIs rebuilt from n and bounds)."""
        def median(n: int, est: float | None, ci: list[float] | None) -> QuantileCI:
            return quantile_ci_at(n, 0.5, 0.95, math.nan if est is None else est,
                                  None if ci is None else (ci[0], ci[1]))

        return cls(doc["n_a"], doc["n_b"], median(doc["n_a"], doc["median_a"], doc["median_a_ci"]),
                   median(doc["n_b"], doc["median_b"], doc["median_b_ci"]), doc["ratio"],
                   _tuple(doc["ratio_ci"]), _tuple(doc["ratio_ci90"]), doc["ratio_method"],
                   math.nan if doc["diff"] is None else doc["diff"], _tuple(doc["diff_ci"]),
                   _tuple(doc["diff_ci90"]), doc["p"], doc["decided_on"], doc["band"], doc["p_holm"],
                   doc["verdict"], doc["more_per_side"])


class ComparisonJSON(TypedDict):
    """A comparison's numbers in a row of ``compare.json``."""

    n_a: int
    n_b: int
    median_a: float | None
    median_b: float | None
    median_a_ci: list[float] | None
    median_b_ci: list[float] | None
    ratio: float | None
    ratio_ci: list[float] | None
    ratio_ci90: list[float] | None
    ratio_method: str
    diff: float | None
    diff_ci: list[float] | None
    diff_ci90: list[float] | None
    p: float | None
    p_holm: float | None
    verdict: str
    more_per_side: int | None
    decided_on: Literal["ratio", "diff"]
    band: float


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _pair(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [float(ci[0]), float(ci[1])]


def _tuple(ci: list[float] | None) -> tuple[float, float] | None:
    return None if ci is None else (ci[0], ci[1])


def compare_samples(a: Sequence[float] | FloatArray, b: Sequence[float] | FloatArray,
                    threshold: Threshold) -> Comparison:
    """Medians, ratio and difference with intervals, and the Mann–Whitney p-value of B vs A."""
    xa = np.asarray(a, dtype=np.float64)
    xb = np.asarray(b, dtype=np.float64)
    if not (np.isfinite(xa).all() and np.isfinite(xb).all()):
        raise ValueError("compare_samples needs finite values")
    med_a, med_b = quantile_ci(xa, 0.5, 0.95), quantile_ci(xb, 0.5, 0.95)
    small = len(xa) < MIN_N or len(xb) < MIN_N
    empty = len(xa) == 0 or len(xb) == 0
    shift = Shift(float(med_b.estimate - med_a.estimate), None, None) if empty else hl_shift(xa, xb)
    diff_ci, diff_ci90 = (None, None) if small else (shift.ci95, shift.ci90)
    ratio: float | None
    ratio_ci: tuple[float, float] | None = None
    ratio_ci90: tuple[float, float] | None = None
    positive = len(xa) > 0 and len(xb) > 0 and bool((xa > 0).all() and (xb > 0).all())
    if positive:
        log_shift = hl_shift(np.log(xa), np.log(xb))
        ratio = math.exp(log_shift.estimate)
        if not small:
            ratio_ci = _exp(log_shift.ci95)
            ratio_ci90 = _exp(log_shift.ci90)
        method = "Hodges-Lehmann ratio B/A (shift of the log values)"
    elif med_a.estimate != 0 and math.isfinite(med_a.estimate):
        base = abs(med_a.estimate)
        ratio = 1.0 + shift.estimate / base
        ratio_ci = None if diff_ci is None else (1 + diff_ci[0] / base, 1 + diff_ci[1] / base)
        ratio_ci90 = None if diff_ci90 is None else (1 + diff_ci90[0] / base, 1 + diff_ci90[1] / base)
        method = "1 + Hodges-Lehmann shift / |median A|"
    else:
        ratio = None
        method = "none: A's median is 0"
    if threshold.relative and ratio is not None:
        decided_on: Literal["ratio", "diff"] = "ratio"
        band = threshold.value
    elif threshold.relative:
        # A's median is 0 (loss, timeouts): a share of it is no band; the difference decides,
        # the band a share of the larger median (0 when both are 0: only an exact tie is equivalent)
        decided_on, band = "diff", threshold.value * max(abs(med_a.estimate), abs(med_b.estimate))
    else:
        decided_on, band = "diff", threshold.value
    p: float | None = None
    if len(xa) >= 2 and len(xb) >= 2:
        if np.ptp(np.concatenate([xa, xb])) == 0:
            p = 1.0
        else:
            p = float(sps.mannwhitneyu(xb, xa, alternative="two-sided").pvalue)
    return Comparison(len(xa), len(xb), med_a, med_b, ratio, ratio_ci, ratio_ci90, method,
                      shift.estimate, diff_ci, diff_ci90, p, decided_on, band)


def _exp(ci: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if ci is None else (math.exp(ci[0]), math.exp(ci[1]))


def holm(ps: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values of the rows that have a p-value (Holm 1979, step-down):
    the i-th smallest of m times ``m - i + 1``, made monotone, capped at 1. (statsmodels'
    ``multipletests`` gives the same but runs a full garbage collection per call, 0.1 s; the
    tests check the two agree.)"""
    idx = [i for i, p in enumerate(ps) if p is not None]
    out: list[float | None] = [None] * len(ps)
    m = len(idx)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda j: float(ps[j] or 0.0))):
        running = max(running, min(1.0, (m - rank) * float(ps[i] or 0.0)))
        out[i] = running
    return out


def _scale(c: Comparison) -> tuple[float, tuple[float, float] | None, tuple[float, float] | None]:
    """Estimate, 95 % and 90 % interval on the deciding scale (relative change or difference)."""
    if c.decided_on == "ratio":
        assert c.ratio is not None
        ci = None if c.ratio_ci is None else (c.ratio_ci[0] - 1, c.ratio_ci[1] - 1)
        ci90 = None if c.ratio_ci90 is None else (c.ratio_ci90[0] - 1, c.ratio_ci90[1] - 1)
        return c.ratio - 1.0, ci, ci90
    return c.diff, c.diff_ci, c.diff_ci90


def more_needed(c: Comparison) -> int | None:
    """About how many more units per side would decide an inconclusive row, from the observed
    spread (interval half-widths shrink as 1/sqrt(n)): enough for the 90 % interval to fit inside
    ±threshold when the estimate is inside it, else for the 95 % interval to exclude 0.
    None when no interval exists or no number of units would do (an estimate of exactly 0
    outside a zero band)."""
    est, ci, ci90 = _scale(c)
    if ci is None or ci90 is None:
        return None
    if abs(est) < c.band:
        half, room = max(est - ci90[0], ci90[1] - est), c.band - abs(est)
    else:
        half, room = max(est - ci[0], ci[1] - est), abs(est)
    n = max(c.n_a, c.n_b)
    if room <= 0:
        return None
    if half <= 0:
        return 0
    need = math.ceil(n * (half / room) ** 2)
    return max(need - n, 1) if need - n < MAX_MORE else None


def verdict(c: Comparison, p_holm: float | None, direction: Direction | None) -> str:
    """``better``/``worse`` (or ``different`` when the metric declares no direction),
    ``equivalent``, ``inconclusive`` or ``inconclusive (n too small)``."""
    if c.n_a < MIN_N or c.n_b < MIN_N:
        return "inconclusive (n too small)"
    est, _ci, ci90 = _scale(c)
    if p_holm is not None and p_holm < ALPHA and abs(est) > c.band:
        if direction is None:
            return "different"
        up = est > 0
        return "worse" if up == (direction == "lower") else "better"
    if ci90 is not None and -c.band <= ci90[0] and ci90[1] <= c.band:
        return "equivalent"
    return "inconclusive"


def decide(rows: Sequence[Comparison], directions: Sequence[Direction | None]) -> list[Comparison]:
    """Holm over the rows' p-values, then each row's verdict (and ``more`` when inconclusive)."""
    adjusted = holm([r.p for r in rows])
    out = []
    for r, q, d in zip(rows, adjusted, directions, strict=True):
        v = verdict(r, q, d)
        out.append(replace(r, p_holm=q, verdict=v, more=more_needed(r) if v == "inconclusive" else None))
    return out
