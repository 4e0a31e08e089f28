"""The per-pair event detector's jitter statistics (:mod:`cloudbench.analysis.events`).

The noise scale and thresholds of a pair's residuals from its level: medians and 99th
percentiles, each a compiled radix select of the values' bits for a long series (numpy's
partition without a compiler), or a single-point partition (in place where the caller owns
the array); a high percentile of a long series among the values over a threshold guessed
from a sample (:func:`_top_from`), the 99th percentiles of the rest of the series from that
top sorted once (:class:`RestPercentile`); the Markov run test of a
candidate spike; which echoes left in late rounds, worked out only when an event asks.
Every value is numpy's (``np.median``, ``np.percentile``), as the tests check.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.events_median import select

FloatArray = NDArray[np.float64]


def lerp(a: float, b: float, gamma: float) -> float:
    """numpy's percentile interpolation between neighbouring order statistics ``a ≤ b``
    (``_lerp``: from the nearer end of the interval), bit for bit."""
    diff = b - a
    return float(b - diff * (1 - gamma)) if gamma >= 0.5 else float(a + diff * gamma)


def percentile(x: FloatArray, q: float, inplace: bool = False) -> float:
    """``np.percentile(x, q)`` of a non-empty 1-D finite ``x`` (the same value: numpy's linear
    method, its virtual index ``(n − 1)·q/100``), from one single-point partition instead of
    numpy's partition at four points (from :data:`SELECT_MIN` values on, the two order
    statistics by the compiled select); ``inplace``: ``x`` may be reordered (a copy the caller owns)."""
    n = len(x)
    v = (n - 1) * np.true_divide(q, 100)
    if v >= n - 1:
        return float(np.max(x))
    i = math.floor(v)
    top = _top_from(x, i) if n >= TAIL_MIN and n - i <= n // TAIL_SHARE else None
    if top is not None:  # the values from a threshold under the i-th on: ranks i - (n - len(top)) ... there
        j = i - (n - len(top))
        top.partition(j)
        return lerp(top[j], top[j + 1:].min(), float(v - i))
    picked = select(x, i, two=True) if n >= SELECT_MIN else None
    if picked is not None:
        return lerp(*picked, float(v - i))
    if inplace:
        x.partition(i)
        part = x
    else:
        part = np.partition(x, i)
    return lerp(part[i], part[i + 1:].min(), float(v - i))


TAIL_MIN = 1 << 16
"""Series of this many values or more take a high percentile from their top alone (:func:`_top_from`)."""
TAIL_SHARE = 50
"""... when the rank lies in the top 1/TAIL_SHARE of the values (the 99th percentile does)."""


def _top_from(x: FloatArray, i: int) -> FloatArray | None:
    """The values of ``x`` at or above a threshold that lies at or under its ``i``-th smallest
    (0-based), or None when the threshold guessed leaves too few (then the caller partitions
    the whole). The threshold is a lower quantile of every 64th value, a little under the
    rank's own share; two passes (a comparison and a gather of ~1.5 % of the values) and a
    small partition, against a partition of all of them (4-5 ms for a 6-hour pair's 2.16 M
    |residuals|): the same order statistics, so the same percentile."""
    n = len(x)
    sample = np.array(x[::64])
    # the sample's rank for the i-th, less a margin of ~3 binomial SDs of the sample's count above it
    above = (n - 1 - i) / n * len(sample)
    k = len(sample) - 1 - int(above + 3.0 * math.sqrt(above + 1.0)) - 1
    if k < 0:
        return None
    sample.partition(k)
    top = x[x >= sample[k]]
    return top if n - len(top) <= i else None


def late_rounds(t_s: FloatArray, round_index: NDArray[np.integer], round_interval_s: float) -> NDArray[np.bool_]:
    """Echoes sent late: more than min(1 ms, half a round) after their round's schedule.

    The schedule is ``round · interval`` plus the offset of the earliest send
    (the worker's own rule, from its send times)."""
    lag = np.asarray(t_s, dtype=np.float64) - np.asarray(round_index, dtype=np.float64) * round_interval_s
    if len(lag) == 0:
        return np.zeros(0, dtype=bool)
    return np.asarray(lag - float(np.min(lag)) > min(1e-3, round_interval_s / 2.0))


RoundIndex = NDArray[np.integer] | Callable[[], NDArray[np.integer]]


class LateRounds:
    """:func:`late_rounds` of a whole series, worked out on the first slice asked for: a pair
    without events never needs it (nor its round numbers, when they come as a function)."""

    def __init__(self, t_s: FloatArray, round_index: RoundIndex, round_interval_s: float) -> None:
        self._args = (t_s, round_index, round_interval_s)
        self._late: NDArray[np.bool_] | None = None

    def __getitem__(self, at: slice) -> NDArray[np.bool_]:
        if self._late is None:
            t_s, round_index, interval = self._args
            rounds = round_index() if callable(round_index) else round_index
            if np.shape(rounds) != np.shape(t_s):
                raise ValueError(f"round numbers and send times differ in length ({len(rounds)}, {len(t_s)})")
            self._late = late_rounds(t_s, rounds, interval)
        return self._late[at]


Late = NDArray[np.bool_] | LateRounds


def median(x: FloatArray, inplace: bool = False) -> float:
    """``np.median`` of finite ``x`` (the same value: the middle order statistic, or the mean
    of the two middle ones). From :data:`SELECT_MIN` values on, by the compiled radix select
    (:func:`cloudbench.analysis.events_median.select`: both middles in two or three passes,
    ~4 ms for a 6-hour pair's 2.16 M residuals against numpy's partition's ~24); else (and
    without a compiler) one single-point partition: with an even count the lower middle is
    the largest value left of the upper one (numpy's own two-point partition costs three
    times as much). ``inplace``: ``x`` may be reordered (a copy the caller owns), else it is
    left as it was."""
    n = len(x)
    if n == 0:
        return math.nan
    h = n // 2
    picked = select(x, h - 1 + n % 2, two=n % 2 == 0) if n >= SELECT_MIN else None
    if picked is not None:
        low, high = picked
        return low if n % 2 else float((low + high) / 2)
    part = x if inplace else np.partition(x, h)
    if inplace:
        part.partition(h)
    if n % 2:
        return float(part[h])
    return float((part[:h].max() + part[h]) / 2)


SELECT_MIN = 1 << 13
"""Series of this many values or more take their medians from the compiled radix select: measured
against one np.partition of |normal| values, 44 µs against 67 at 8,000, 72 against 192 at
16,000; at 4,000 the partition (37 µs) is ahead. The select's fixed cost: clearing and scanning
its 65,536 counts per level."""


class RestPercentile:
    """Bounds of ``np.percentile(x[rest], q)`` for any ``rest`` of ``m ≥ m_min`` values, from
    the top of ``x`` sorted once: the ``i``-th smallest of a subset missing ``n − m`` values
    lies between the ``i``-th and the ``(i + n − m)``-th smallest of ``x``, and numpy's
    linear interpolation stays between its two order statistics. A spike's size far from
    the bounds is decided without the percentile of the rest (a partition of the whole
    series per candidate run: most of the detector's time on a 6-hour pair); near them
    the exact percentile decides, so the result is the same."""

    # slack for the interpolation's rounding (a few ulps) on either side
    MARGIN = 1e-9

    def __init__(self, x: FloatArray, q: float, m_min: int = 0) -> None:
        n = len(x)
        # only ranks from the smallest rest's index on are ever read: sort those alone
        self.start = min(max(math.floor(q / 100.0 * (max(m_min, 1) - 1)) - 2, 0), max(n - 1, 0))
        # the values at or over a threshold at or under the start-th: those ranks and ties of the threshold under them
        top = _top_from(x, self.start) if n >= TAIL_MIN else None
        if top is None and n >= SELECT_MIN and (picked := select(x, self.start)) is not None:
            top = x[x >= picked[0]]
        if top is None:
            top = np.partition(x, self.start)[self.start:] if n else np.empty(0)
        self.top = np.sort(top)[len(top) - (n - self.start):]
        self.n = n
        self.q = q

    def whole(self) -> float:
        """``np.percentile(x, q)`` of the whole ``x`` (the same value), from the sorted top."""
        n = self.n
        v = (n - 1) * np.true_divide(self.q, 100)
        if v >= n - 1:
            return float(self.top[-1])
        i = math.floor(v)
        return lerp(self.top[i - self.start], self.top[i + 1 - self.start], float(v - i))

    def exceeds(self, value: float, m: int, floor: float) -> bool | None:
        """False: ``value < max(percentile, floor)`` for certain; True: ``value ≥`` it for
        certain; None: too close to tell."""
        n = self.n
        if m < 1 or m > n:
            return None
        # numpy's virtual index q·(m − 1), rounded its own way: one order statistic either side
        i = math.floor(self.q / 100.0 * (m - 1))
        if i - 1 < self.start:
            return None  # a rest smaller than the one the top was sorted for
        low = max(float(self.top[i - 1 - self.start]), floor)
        high = max(float(self.top[min(i + 2 + n - m, n - 1) - self.start]), floor)
        if value < low * (1.0 - self.MARGIN):
            return False
        if value >= high * (1.0 + self.MARGIN):
            return True
        return None


def _run_p(run: NDArray[np.bool_], n: int, n_up: float, n_rest: float, n_uu: int, n_du: int,
           n_from_up: int, n_both: int) -> float:
    """The run test's p-value from the rest's counts (see :func:`markov_run_p`)."""
    q = (n_up + 0.5) / (n_rest + 1.0)
    q_uu = (float(n_uu) + 0.5) / (float(n_from_up) + 1.0)
    q_du = (float(n_du) + 0.5) / (float(n_both - n_from_up) + 1.0)
    r = np.asarray(run, dtype=bool)
    prev, nxt = r[:-1], r[1:]
    logp = (math.log(q) + float((prev & nxt).sum()) * math.log(q_uu)
            + float((prev & ~nxt).sum()) * math.log1p(-q_uu)
            + float((~prev & nxt).sum()) * math.log(q_du)
            + float((~prev & ~nxt).sum()) * math.log1p(-q_du))
    gaps = int((~r).sum())
    ways = math.log(math.comb(max(len(r) - 2, 0), gaps)) if gaps else 0.0
    return min(1.0, math.exp(math.log(n) + ways + logp))


def markov_run_p(run: NDArray[np.bool_], above: NDArray[np.bool_], rest: NDArray[np.bool_]) -> float:
    """P-value of a run of echoes above the threshold (``run``: its above/below pattern,
    first and last above) under a two-state Markov chain of the exceedances
    (``above``) of the ``rest`` of the series: the pattern's probability times the
    ``n`` positions where it could start and the ways its below echoes could sit
    inside it (Bonferroni; see the module docstring)."""
    # counts only (no boolean-indexed copies of the series: a candidate's test is a few passes)
    both = rest[:-1] & rest[1:]  # transitions inside the rest
    from_up = above[:-1] & both
    n_from_up, n_both = np.count_nonzero(from_up), np.count_nonzero(both)
    n_uu = np.count_nonzero(from_up & above[1:])
    n_du = np.count_nonzero(above[1:] & both) - n_uu
    return _run_p(run, len(above), float(np.count_nonzero(above & rest)), float(np.count_nonzero(rest)),
                  int(n_uu), int(n_du), int(n_from_up), int(n_both))


class MarkovChain:
    """:func:`markov_run_p` for a rest that is the whole series but a few ranges of echoes (the
    spikes accepted and the run tested): the whole series' counts once (four passes), then
    per test only the echoes and transitions that touch the ranges left out, subtracted. The
    counts are integers, so the p-value is the same to the last bit."""

    def __init__(self, above: NDArray[np.bool_]) -> None:
        self.above = above
        self.n = len(above)
        self._whole: tuple[int, int, int, int] | None = None  # counted on the first test

    def p(self, run: NDArray[np.bool_], out: list[tuple[int, int]]) -> float:
        """The p-value of ``run`` with the rest = every echo outside the disjoint ranges
        ``out`` (``[start, end)``)."""
        n, above = self.n, self.above
        if self._whole is None:
            self._whole = (int(np.count_nonzero(above)), int(np.count_nonzero(above[:-1])),
                           int(np.count_nonzero(above[1:])), int(np.count_nonzero(above[:-1] & above[1:])))
        all_up, all_from_up, all_to_up, all_uu = self._whole
        spans = sorted((max(a, 0), min(b, n)) for a, b in out if min(b, n) > max(a, 0))
        n_out = sum(b - a for a, b in spans)
        up_out = sum(int(np.count_nonzero(above[a:b])) for a, b in spans)
        # transitions i -> i + 1 with an end left out: i from a − 1 to b − 1 for each range, merged
        pairs: list[list[int]] = []
        for a, b in spans:
            lo, hi = max(a - 1, 0), min(b - 1, n - 2)  # inclusive
            if lo > hi:
                continue
            if pairs and lo <= pairs[-1][1] + 1:
                pairs[-1][1] = max(pairs[-1][1], hi)
            else:
                pairs.append([lo, hi])
        n_pairs = sum(hi - lo + 1 for lo, hi in pairs)
        from_up = sum(int(np.count_nonzero(above[lo:hi + 1])) for lo, hi in pairs)
        to_up = sum(int(np.count_nonzero(above[lo + 1:hi + 2])) for lo, hi in pairs)
        uu = sum(int(np.count_nonzero(above[lo:hi + 1] & above[lo + 1:hi + 2])) for lo, hi in pairs)
        n_uu = all_uu - uu
        return _run_p(run, n, float(all_up - up_out), float(n - n_out), n_uu, all_to_up - to_up - n_uu,
                      all_from_up - from_up, max(n - 1, 0) - n_pairs)


def dilate(mask: NDArray[np.bool_], k: int) -> NDArray[np.bool_]:
    """Each True widened by ``k`` values either side (scipy's binary dilation with its 1-D
    structure, ``k`` iterations; in numpy, which lets other threads run)."""
    out = mask
    for _ in range(k if mask.any() else 0):
        grown = out.copy()
        grown[1:] |= out[:-1]
        grown[:-1] |= out[1:]
        out = grown
    return out
