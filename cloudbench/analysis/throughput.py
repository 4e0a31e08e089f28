"""Throughput analysis: pure functions of per-interval byte counts.

A *series* is one direction of one trial: intervals in time order with their
start and end (seconds) and the bytes received in each. Rates are bytes × 8 /
length. Methods, each named where it is used:

* per-trial mean = all bits / all time (so short intervals weigh what they
  last); CoV and percentiles (Hyndman & Fan type 7) over the rates of *full*
  intervals — those at least half the median interval long — because a 30 ms
  tail interval holds a rate, not a sample of the same size;
* capacity lower bound (Persico et al. §5.2): means over non-overlapping 5 s
  windows of a UDP series, and their maximum;
* high→low level shift (Persico et al. §5.3): the least-squares split into two
  constant levels, accepted only when the low level is at least 25 % under the
  high one and both sides stay on their side of the midpoint; the time of the
  shift is interpolated inside the interval(s) that straddle it;
* direction asymmetry: ratio of the forward and reverse means;
* CV_RMSE(X, Y) = √E[(X−Y)²] / mean(E[X], E[Y]) between two paired samples
  (Persico et al., footnote 5), e.g. two zone pairs of one region pair;
* falling trend over repeated runs on the same hosts (a token bucket not reset
  between repetitions, Uta et al. §4.2): one-sided Kendall tau against order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.quantiles import percentile_name

FloatArray = NDArray[np.float64]
PERCENTILES: tuple[float, ...] = (5, 25, 50, 75, 95)
CAPACITY_WINDOW_S = 5.0
# Share of a capacity window that intervals must cover for its mean to count.
CAPACITY_MIN_COVER = 0.9
MIN_DROP = 0.25  # a high→low shift drops by at least this share (Uta's 0.75 factor)
# A mixed (transition) interval lies between the levels by more than this share
# of their gap; it belongs to neither level.
TRANSITION_BAND = 0.1
# At most this share of a level's intervals may sit across the midpoint.
STRAY_SHARE = 0.1


def rates_of(nbytes: FloatArray, seconds: FloatArray) -> FloatArray:
    """Bit/s of each interval (0 for an interval of no length)."""
    secs = np.asarray(seconds, dtype=np.float64)
    bits = np.asarray(nbytes, dtype=np.float64) * 8.0
    return np.divide(bits, secs, out=np.zeros_like(bits), where=secs > 0)


def full_mask(seconds: FloatArray) -> NDArray[np.bool_]:
    """Intervals at least half as long as the median one."""
    secs = np.asarray(seconds, dtype=np.float64)
    if len(secs) == 0:
        return np.zeros(0, dtype=bool)
    return np.asarray(secs >= 0.5 * float(np.median(secs)))


@dataclass(frozen=True)
class SeriesStats:
    """Summary of one throughput series: its full intervals' rates, total bits and time."""
    n: int  # full intervals
    seconds: float
    bits: float
    mean_bps: float  # all bits / all time
    sd_bps: float
    cov: float
    min_bps: float
    max_bps: float
    percentiles: dict[str, float]


def series_stats(nbytes: FloatArray, seconds: FloatArray) -> SeriesStats:
    """Summarize a series of intervals (bytes, seconds); rates from full intervals only."""
    secs = np.asarray(seconds, dtype=np.float64)
    bits = float(np.sum(np.asarray(nbytes, dtype=np.float64)) * 8.0)
    total = float(np.sum(secs))
    r = rates_of(nbytes, secs)[full_mask(secs)]
    nan = math.nan
    if len(r) == 0:
        return SeriesStats(0, total, bits, bits / total if total > 0 else nan, nan, nan, nan, nan,
                           {percentile_name(p / 100): nan for p in PERCENTILES})
    mean = bits / total if total > 0 else nan
    sd = float(np.std(r, ddof=1)) if len(r) > 1 else 0.0
    rmean = float(np.mean(r))
    qs = np.percentile(r, PERCENTILES)
    return SeriesStats(len(r), total, bits, mean, sd, sd / rmean if rmean > 0 else nan,
                       float(r.min()), float(r.max()),
                       {percentile_name(p / 100): float(q) for p, q in zip(PERCENTILES, qs, strict=True)})


def windowed_means(t_start: FloatArray, t_end: FloatArray, nbytes: FloatArray,
                   window: float = CAPACITY_WINDOW_S,
                   min_cover: float = CAPACITY_MIN_COVER) -> FloatArray:
    """Mean bit/s over non-overlapping windows from the first interval's start.

    An interval belongs to the window holding its midpoint; a window counts only
    if its intervals cover at least ``min_cover`` of it (the end of a run, the
    pause of an on/off pattern).
    """
    t0 = np.asarray(t_start, dtype=np.float64)
    t1 = np.asarray(t_end, dtype=np.float64)
    if len(t0) == 0:
        return np.zeros(0)
    mid = (t0 + t1) / 2.0
    k = np.floor((mid - t0[0]) / window).astype(np.int64)
    secs = np.bincount(k, weights=t1 - t0)
    bits = np.bincount(k, weights=np.asarray(nbytes, dtype=np.float64) * 8.0)
    ok = secs >= min_cover * window
    return np.asarray(bits[ok] / secs[ok])


def capacity_lower_bound(t_start: FloatArray, t_end: FloatArray, nbytes: FloatArray,
                         window: float = CAPACITY_WINDOW_S) -> float | None:
    """Persico et al. §5.2: max of the 5 s windowed means of a UDP series (bit/s).

    None when the series has no complete window (shorter than ``window``).
    """
    w = windowed_means(t_start, t_end, nbytes, window)
    return float(w.max()) if len(w) else None


def capacity_lower_bound_95(t_start: FloatArray, t_end: FloatArray, nbytes: FloatArray,
                            window: float = CAPACITY_WINDOW_S, level: float = 0.95) -> float | None:
    """A lower confidence bound on the capacity: below it with probability ≥ ``level``.

    Method: in each complete window (as :func:`windowed_means`) with k ≥ 2
    intervals, the one-sided Student-t bound of its mean rate,
    ``mean − t(1 − α/W, k − 1) · sd / √k``, with α = 1 − level split over the W
    windows (Bonferroni); the bound is the largest of them. The max of windowed
    means alone (:func:`capacity_lower_bound`) reads above the capacity about half
    the time when byte counts jitter across interval edges. Intervals are taken
    as independent. None without a window of two intervals.
    """
    from scipy import stats as sps  # noqa: PLC0415 - 0.6 s to import; the registry imports this module

    t0 = np.asarray(t_start, dtype=np.float64)
    t1 = np.asarray(t_end, dtype=np.float64)
    if len(t0) == 0:
        return None
    secs = t1 - t0
    r = rates_of(np.asarray(nbytes, dtype=np.float64), secs)
    k = np.floor(((t0 + t1) / 2.0 - t0[0]) / window).astype(np.int64)
    cover = np.bincount(k, weights=secs)
    ok = [w for w in range(len(cover)) if cover[w] >= CAPACITY_MIN_COVER * window
          and int(np.sum(k == w)) >= 2]
    if not ok:
        return None
    alpha = (1.0 - level) / len(ok)
    bounds = []
    for w in ok:
        x = r[k == w]
        wt = secs[k == w]
        mean = float(np.sum(x * wt) / np.sum(wt))
        tq = float(sps.t.ppf(1.0 - alpha, len(x) - 1))
        bounds.append(mean - tq * float(np.std(x, ddof=1)) / math.sqrt(len(x)))
    return max(bounds)


@dataclass(frozen=True)
class LevelShift:
    """A high→low shift within one series (times in s from the series start)."""

    time_s: float  # interpolated time of the shift
    high_bps: float
    low_bps: float
    high_sd: float  # spread of the interval rates within each level
    low_sd: float
    volume_before_bits: float  # sent before the shift
    first_low: int  # index (in the series) of the first clean low interval
    last_high: int  # index of the last clean high interval
    n_high: int
    n_low: int
    high_rates: FloatArray  # rates of the clean intervals of each level
    low_rates: FloatArray
    t_a: float  # end of the last clean high interval
    t_b: float  # start of the first clean low interval
    bits_a: float  # bits received up to t_a and up to t_b
    bits_b: float


def _best_split(r: FloatArray, min_high: int, min_low: int) -> int | None:
    n = len(r)
    if n < min_high + min_low:
        return None
    c1 = np.concatenate([[0.0], np.cumsum(r)])
    c2 = np.concatenate([[0.0], np.cumsum(r * r)])
    ks = np.arange(min_high, n - min_low + 1)
    left = c2[ks] - c1[ks] ** 2 / ks
    right = (c2[n] - c2[ks]) - (c1[n] - c1[ks]) ** 2 / (n - ks)
    return int(ks[int(np.argmin(left + right))])


def detect_level_shift(t_start: FloatArray, t_end: FloatArray, nbytes: FloatArray,
                       min_drop: float = MIN_DROP, min_high: int = 2, min_low: int = 2,
                       skip_first: bool = True) -> LevelShift | None:
    """The high→low shift of a series, or None (method in the module docstring).

    The search uses full intervals only. ``skip_first`` leaves the first interval
    out of the high level when there are three or more (TCP slow start); it still
    counts in the volumes.
    """
    t0 = np.asarray(t_start, dtype=np.float64)
    t1 = np.asarray(t_end, dtype=np.float64)
    b = np.asarray(nbytes, dtype=np.float64)
    idx = np.flatnonzero(full_mask(t1 - t0))
    r = rates_of(b[idx], (t1 - t0)[idx])
    k = _best_split(r, min_high, min_low)
    if k is None:
        return None
    h0, l0 = float(np.median(r[:k])), float(np.median(r[k:]))
    if not (h0 > 0 and l0 <= (1.0 - min_drop) * h0):
        return None
    mid = (h0 + l0) / 2.0
    # Persistence: apart from the interval(s) at the boundary, each side stays on its side.
    before, after = r[: max(k - 1, 0)], r[k + 1:]
    if len(before) and np.mean(before < mid) > STRAY_SHARE:
        return None
    if len(after) and np.mean(after > mid) > STRAY_SHARE:
        return None
    delta = TRANSITION_BAND * (h0 - l0)

    def between(x: float) -> bool:
        return bool(l0 + delta < x < h0 - delta)

    a = k
    while a > 0 and between(float(r[a - 1])):
        a -= 1
    bb = k
    while bb < len(r) and between(float(r[bb])):
        bb += 1
    if a < 1 or bb >= len(r):
        return None
    hi_sel = np.arange(1 if (skip_first and a >= 3) else 0, a)
    high_rates, low_rates = r[hi_sel], r[bb:]
    h = _weighted_mean(r[hi_sel], (t1 - t0)[idx][hi_sel])
    lo = _weighted_mean(r[bb:], (t1 - t0)[idx][bb:])
    cum = np.concatenate([[0.0], np.cumsum(b * 8.0)])
    ia, ib = int(idx[a - 1]) + 1, int(idx[bb])  # series positions: end of last high, first low
    t_a, t_b = float(t1[ia - 1]), float(t0[ib])
    bits_a, bits_b = float(cum[ia]), float(cum[ib])
    tau = float(shift_time(t_a, t_b, bits_a, bits_b, h, lo)[0])
    return LevelShift(
        time_s=tau - float(t0[0]), high_bps=h, low_bps=lo,
        high_sd=float(np.std(high_rates, ddof=1)) if len(high_rates) > 1 else 0.0,
        low_sd=float(np.std(low_rates, ddof=1)) if len(low_rates) > 1 else 0.0,
        volume_before_bits=bits_a + h * (tau - t_a),
        first_low=ib, last_high=ia - 1, n_high=len(high_rates), n_low=len(low_rates),
        high_rates=high_rates, low_rates=low_rates, t_a=t_a, t_b=t_b, bits_a=bits_a, bits_b=bits_b,
    )


def shift_time(t_a: float, t_b: float, bits_a: float, bits_b: float, high: FloatArray | float,
               low: FloatArray | float) -> FloatArray:
    """When the rate fell from ``high`` to ``low`` between t_a and t_b, given the
    bits received in between: t_a + (ΔV − low·Δt) / (high − low), kept in [t_a, t_b]
    (t_a where high ≤ low). ``high`` and ``low`` may be arrays of levels (a bootstrap's
    draws); the result is an array of their shape, at least one element."""
    h = np.atleast_1d(np.asarray(high, dtype=np.float64))
    lo = np.atleast_1d(np.asarray(low, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = t_a + ((bits_b - bits_a) - lo * (t_b - t_a)) / (h - lo)
    return np.asarray(np.where(h > lo, np.clip(tau, t_a, t_b), t_a))


def _weighted_mean(rates: FloatArray, seconds: FloatArray) -> float:
    total = float(np.sum(seconds))
    if total <= 0:
        return math.nan
    return float(np.sum(rates * seconds) / total)


@dataclass(frozen=True)
class Asymmetry:
    """Forward against reverse throughput of a pair: ratio, log2 ratio and relative difference."""
    forward_bps: float
    reverse_bps: float
    ratio: float  # forward / reverse
    log2_ratio: float
    relative_difference: float  # |f − r| / max(f, r)


def asymmetry(forward_bps: float, reverse_bps: float) -> Asymmetry:
    """Compare the forward and the reverse rate of a pair (a zero reverse rate gives an infinite ratio)."""
    f, r = float(forward_bps), float(reverse_bps)
    ratio = f / r if r > 0 else math.inf
    top = max(f, r)
    return Asymmetry(f, r, ratio, math.log2(ratio) if 0 < ratio < math.inf else math.nan,
                     abs(f - r) / top if top > 0 else 0.0)


def cv_rmse(x: FloatArray | list[float], y: FloatArray | list[float]) -> float:
    """Persico et al. (footnote 5): √E[(X−Y)²] / mean(E[X], E[Y]) of paired samples."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xa.shape != ya.shape or len(xa) == 0:
        raise ValueError(f"CV_RMSE needs paired samples of equal length (got {len(xa)}, {len(ya)})")
    denom = (float(xa.mean()) + float(ya.mean())) / 2.0
    if denom == 0:
        return math.nan
    return float(np.sqrt(np.mean((xa - ya) ** 2)) / denom)


@dataclass(frozen=True)
class Trend:
    """Mann-Kendall trend of a series' rates, with the Theil-Sen drop over the series."""
    n: int
    tau: float
    p: float
    relative_drop: float  # Theil–Sen slope × (n − 1) / median (negative when falling)
    falling: bool


def falling_trend(values: FloatArray | list[float], alpha: float = 0.05,
                  min_drop: float = 0.05) -> Trend | None:
    """One-sided Kendall tau of values vs their order (scipy, exact for small n),
    with the Theil–Sen slope; ``falling`` when p < alpha and the fitted drop over
    the run is at least ``min_drop`` of the median. None below n = 4 (no p-value
    under 0.05 is possible with three points)."""
    from scipy import stats as sps  # noqa: PLC0415 - 0.6 s to import; the registry imports this module

    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if n < 4 or np.ptp(x) == 0:
        return None
    order = np.arange(n, dtype=np.float64)
    res = sps.kendalltau(order, x, alternative="less")
    slope = float(sps.theilslopes(x, order).slope)
    med = float(np.median(x))
    drop = slope * (n - 1) / abs(med) if med != 0 else math.nan
    falling = bool(res.pvalue < alpha and math.isfinite(drop) and drop <= -min_drop)
    return Trend(n, float(res.statistic), float(res.pvalue), drop, falling)


def binned_rates(t_start: FloatArray, t_end: FloatArray, nbytes: FloatArray, origin: float,
                 max_points: int = 600) -> tuple[FloatArray, FloatArray]:
    """A rate series cut to at most ``max_points`` for a figure: (bin mid times in s after
    ``origin``, bit/s). Consecutive intervals are merged into bins of equal count; a bin's
    rate is its bytes over its seconds (time-weighted, so a merged bin keeps the volume)."""
    t0 = np.asarray(t_start, dtype=np.float64)
    t1 = np.asarray(t_end, dtype=np.float64)
    b = np.asarray(nbytes, dtype=np.float64)
    n = len(t0)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    edges = np.unique(np.linspace(0, n, min(n, max_points) + 1).astype(np.int64))
    starts, ends = edges[:-1], edges[1:] - 1
    seconds = np.add.reduceat(t1 - t0, starts)
    bits = 8.0 * np.add.reduceat(np.nan_to_num(b), starts)
    mid = (t0[starts] + t1[ends]) / 2.0 - origin
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(seconds > 0, bits / seconds, np.nan)
    return mid, rate
