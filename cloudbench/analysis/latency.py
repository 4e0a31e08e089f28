"""Latency analysis of echo observations: groups, tails, quorums, windows, pairs.

All functions are pure: arrays in, numbers out. Percentiles use the linear
interpolation between order statistics of Hyndman & Fan's definition 7 (numpy's
default ``method="linear"``); warm-up rows are excluded and timeouts are counted
apart, never folded into the RTT distribution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from cloudbench.analysis.orderstats import order_statistics
from cloudbench.core.topology import PairGroup

PERCENTILES: tuple[float, ...] = (5, 25, 50, 90, 95, 99, 99.9, 99.99, 99.999)

TAIL_K = 1.0
"""The one rule for which quantiles a sample can estimate (tables, CCDFs, summaries): the
p-th percentile of n values is printed only when n ≥ TAIL_K / min(p, 1 − p) (p as a
fraction), i.e. when at least TAIL_K value is expected beyond it; otherwise it is the
largest (or smallest) value read as a tail it never saw. p99 needs 100 values, p99.9
1,000, p99.999 100,000. Below that, tables print "—" with the n it needs, CCDFs stop
at 1/n and summaries leave the value out. An exact 95 % CI of it (what ``confirm``
prints) needs about 3.7 / (1 − p) values (``analysis.stats.min_n_for_ci``)."""


def min_n_for_quantile(p: float) -> int:
    """The fewest values whose p-th percentile (p in (0, 100)) is printed (:data:`TAIL_K`)."""
    tail = min(p, 100.0 - p) / 100.0
    if tail <= 0:
        raise ValueError(f"percentile must be in (0, 100), got {p}")
    return math.ceil(TAIL_K / tail - 1e-9)


def quantile_estimable(n: int, p: float) -> bool:
    """Whether ``n`` values estimate their p-th percentile (:data:`TAIL_K`)."""
    return n >= min_n_for_quantile(p)


def not_estimable(n: int, percentiles: Sequence[float] = PERCENTILES) -> list[float]:
    """The percentiles ``n`` values cannot estimate (:func:`quantile_estimable`)."""
    return [p for p in percentiles if n > 0 and not quantile_estimable(n, p)]


def needs_note(ns: Sequence[int], percentiles: Sequence[float] = PERCENTILES, what: str = "values") -> str:
    """The note under a table whose rows have ``ns`` values: which percentiles print "—"
    and how many values each needs; empty when every row estimates every percentile."""
    hidden = sorted({p for n in ns for p in not_estimable(n, percentiles)},
                    key=lambda p: min_n_for_quantile(p))
    if not hidden:
        return ""
    return "— : too few " + what + " to estimate; " + ", ".join(
        f"{pct_label(p)} needs {min_n_for_quantile(p):,}" for p in hidden)


def mask_unestimable(row: dict[str, float | int], n: int,
                     percentiles: Sequence[float] = PERCENTILES) -> dict[str, float | int]:
    """``row`` with NaN for each percentile its ``n`` values cannot estimate."""
    for p in not_estimable(n, percentiles):
        row[pct_label(p)] = float("nan")
    return row


def pct_label(p: float) -> str:
    """The label of a quantile in report keys and tables: 0.5 -> ``p0.5``, 99 -> ``p99``."""
    return "p" + f"{p:g}"


def quantiles_sorted(xs: np.ndarray, ps: Sequence[float]) -> np.ndarray:
    """Quantiles (ps in [0, 100]) of an ascending array; Hyndman & Fan type 7.

    h = (n-1)·p; the result interpolates between xs[floor(h)] and xs[ceil(h)].
    """
    n = len(xs)
    if n == 0:
        return np.full(len(ps), np.nan)
    h = (n - 1) * (np.asarray(ps, dtype=float) / 100.0)
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    frac = h - lo
    out: np.ndarray = xs[lo] + (xs[hi] - xs[lo]) * frac
    return out


def distribution_row(rtt_us: np.ndarray, timeouts: int) -> dict[str, float | int]:
    """count, timeouts, mean, Table-1 percentiles and max of RTTs in µs; NaN for the
    percentiles the sample cannot estimate (:data:`TAIL_K`).

    Linear time: only the order statistics the percentiles use are selected
    (:func:`~cloudbench.analysis.orderstats.order_statistics`), the same values a full
    sort would give.
    """
    nan = np.isnan(rtt_us)
    xs = rtt_us[~nan] if nan.any() else rtt_us
    n = len(xs)
    row: dict[str, float | int] = {"count": int(n + timeouts), "timeouts": int(timeouts)}
    row["mean"] = float(xs.mean()) if n else float("nan")
    if n:
        h = (n - 1) * (np.asarray(PERCENTILES) / 100.0)
        lo, hi = np.floor(h).astype(np.int64), np.ceil(h).astype(np.int64)
        stats = order_statistics(xs, [*lo.tolist(), *hi.tolist(), n - 1])
        a, b = (np.array([stats[i] for i in ix.tolist()]) for ix in (lo, hi))
        qs = a + (b - a) * (h - lo)
        mx = float(stats[n - 1])
    else:
        qs, mx = np.full(len(PERCENTILES), np.nan), float("nan")
    for p, v in zip(PERCENTILES, qs, strict=True):
        row[pct_label(p)] = float(v)
    row["max"] = mx
    return mask_unestimable(row, n)


BOX_PERCENTILES: tuple[float, ...] = (5, 25, 50, 75, 95)
"""The box plot's levels (StormCloud Fig. 3): whiskers p5 and p95, box p25–p75, median."""

CCDF_EXCEEDANCE: tuple[float, ...] = tuple(float(10 ** (-k / 4)) for k in range(21))
"""Levels of the tail plot: P(RTT > x) from 1 down to 1e-5 (p99.999), four per decade."""


def box_stats(rtt_us: np.ndarray) -> dict[str, float]:
    """The five box-plot quantiles (:data:`BOX_PERCENTILES`, type 7) and the mean of the
    finite RTTs; NaN when there are none."""
    xs = np.sort(rtt_us[np.isfinite(rtt_us)])
    out = {pct_label(p): float(v) for p, v in zip(BOX_PERCENTILES, quantiles_sorted(xs, BOX_PERCENTILES),
                                                   strict=True)}
    out["mean"] = float(xs.mean()) if len(xs) else float("nan")
    return out


def ccdf_points(rtt_us: np.ndarray, exceedance: Sequence[float] = CCDF_EXCEEDANCE) -> list[tuple[float, float]]:
    """The empirical CCDF at fixed levels: (P(RTT > x), x) pairs, x the type-7 quantile
    at 1 − level; levels below 1/n (beyond what n replies can show) are left out,
    and the largest RTT closes the curve at 1/n. Timeouts are not RTTs (counted apart)."""
    xs = np.sort(rtt_us[np.isfinite(rtt_us)])
    n = len(xs)
    if n == 0:
        return []
    levels = [e for e in exceedance if e >= 1.0 / n]
    qs = quantiles_sorted(xs, [100.0 * (1.0 - e) for e in levels])
    pts = [(float(e), float(q)) for e, q in zip(levels, qs, strict=True)]
    if not levels or levels[-1] > 1.0 / n:
        pts.append((1.0 / n, float(xs[-1])))
    return pts


def ccdf_levels(n: int, exceedance: Sequence[float] = CCDF_EXCEEDANCE) -> list[float]:
    """The CCDF levels n values can show (level ≥ 1/n), as the percentiles to compute."""
    return [100.0 * (1.0 - e) for e in exceedance if e >= 1.0 / n] if n else []


__all__ = ["BOX_PERCENTILES", "CCDF_EXCEEDANCE", "PERCENTILES", "TAIL_K", "PairGroup", "box_stats",
           "ccdf_levels", "ccdf_points", "distribution_row", "mask_unestimable", "min_n_for_quantile",
           "needs_note", "not_estimable", "pct_label", "quantile_estimable", "quantiles_sorted"]
