"""Level shifts and spikes in latency time series (StormCloud's Lesson 11: "jagged").

Method, written from the algorithm descriptions (no external package):

1. The series is a window statistic (the median RTT of each window: a level
   shift moves it, one slow reply does not; a group's series is the median of its
   pairs' window medians, :func:`group_series`).
2. Noise scale σ: the MAD of first differences / √2, scaled by 1.4826 to a
   standard deviation (consistent for Gaussian noise). Differences cancel the
   level, so the steps being sought barely bias it.
3. Spikes: runs of at most ``max_spike`` windows more than ``spike_k``·σ above
   a running median (width 2·max_spike+3), with the same level on both sides;
   each is reported and replaced by the running median, so steps are sought
   in a series without them.
4. Steps: PELT (Killick, Fearnhead & Eckley, JASA 2012) — the exact minimum of
   the squared-error cost of piecewise-constant means plus ``penalty`` per
   change point, with pruning. Default penalty ``penalty_k``·σ²·ln n (a BIC-like
   choice, raised from 2 to 4 because window medians have heavier tails than a
   Gaussian); segments have at least ``min_segment`` windows.
5. A step must be significant: two-sided Mann–Whitney U (scipy) between the
   windows of the segment before and after, under ``alpha`` (default 1e-3; the
   windows are taken as independent). With fewer than
   :func:`step_windows_needed` windows (14 at 1e-3) no split can reach it, and
   no step is sought (the echo report says "steps not testable: N windows,
   needs M"). A step's size is the median of the segment after minus the median of the
   segment before; steps smaller than ``step_k``·σ, ``min_size`` or ``min_rel``
   (default 1.5 %) of the lower level are dropped and their segments merged: on
   a quiet path σ is microseconds, and a 1 % drift from host load is not the
   network's weather; StormCloud's smallest jagged shifts were ≈ 1.5 % of the
   RTT (0.75 ms of 50 ms), its largest ≈ 10 %. A step's time is the start of its first window,
   so a change inside a window is placed within one window of when it happened.

Periodic variation (a slow sine) is not a step: PELT cuts it into a staircase,
so read steps in a series that also swings as approximations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from scipy import ndimage
from scipy import stats as sps

MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class Shift:
    kind: Literal["step", "spike"]
    index: int  # step: first window of the new level; spike: first window of the spike
    time_s: float
    size: float  # step: after − before; spike: peak departure from the running level
    before: float
    after: float
    windows: int = 1  # spike length in windows (1 for steps)
    p_value: float = math.nan  # steps: Mann–Whitney U between the segments' windows

    def to_row(self, **labels: Any) -> dict[str, Any]:
        return {**labels, "kind": self.kind, "time_s": self.time_s, "size": self.size,
                "before": self.before, "after": self.after, "windows": self.windows,
                "p_value": self.p_value if math.isfinite(self.p_value) else None}


@lru_cache(maxsize=64)
def step_windows_needed(alpha: float) -> int:
    """Fewest windows with which a step test (two-sided Mann–Whitney U between the windows
    before and after) can reach ``alpha`` at all: its smallest p-value, two fully
    separated halves (scipy's exact distribution). 14 at 1e-3."""
    n = 4
    while n < 200:
        k = n // 2
        p = float(sps.mannwhitneyu(np.arange(k), np.arange(k, n), alternative="two-sided",
                                   method="exact").pvalue)
        if p < alpha:
            return n
        n += 1
    return n


def step_p(before: np.ndarray, after: np.ndarray) -> float:
    """Two-sided Mann–Whitney U p-value between two segments' window values (scipy)."""
    return float(sps.mannwhitneyu(before, after, alternative="two-sided").pvalue)


def robust_sigma(y: np.ndarray) -> float:
    """Noise scale from first differences: 1.4826 · median|Δy| / √2."""
    d = np.diff(np.asarray(y, dtype=float))
    d = d[np.isfinite(d)]
    if len(d) == 0:
        return 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0))


def running_median(y: np.ndarray, width: int) -> np.ndarray:
    """Median of each value and the ``width // 2`` either side, the ends mirrored
    (``c b | a b c …``: padding with the edge value would pin the level at the first
    and last value); the width is cut to the series' (``y`` finite; scipy's median
    filter: no n × width copy)."""
    y = np.asarray(y, dtype=float)
    half = max(0, min(width // 2, (len(y) - 1) // 2))
    return np.asarray(ndimage.median_filter(y, size=2 * half + 1, mode="mirror"))


def pelt(y: np.ndarray, penalty: float, min_segment: int = 2) -> list[int]:
    """Change points of a piecewise-constant mean (indices where new segments start)."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    if n < 2 * min_segment:
        return []
    cs = np.concatenate([[0.0], np.cumsum(y)])
    cs2 = np.concatenate([[0.0], np.cumsum(y * y)])
    f = np.full(n + 1, np.inf)
    f[0] = -penalty
    last = np.zeros(n + 1, dtype=np.int64)
    cands = np.array([0], dtype=np.int64)  # ascending: appended in order, pruned in place
    for t in range(1, n + 1):
        k = int(np.searchsorted(cands, t - min_segment, side="right"))  # the starts a segment can end at t
        if k:
            ok = cands[:k]
            seg = cs[t] - cs[ok]
            fc = f[ok] + ((cs2[t] - cs2[ok]) - seg * seg / (t - ok))  # start's cost + segment's
            j = int(np.argmin(fc))
            f[t], last[t] = fc[j] + penalty, ok[j]
            # PELT pruning: a start that is already worse by the penalty never wins later
            cands = np.concatenate((ok[fc <= f[t]], cands[k:]))
        if t <= n - min_segment:
            cands = np.append(cands, t)
    cps: list[int] = []
    t = n
    while t > 0 and np.isfinite(f[t]):
        s = int(last[t])
        if s > 0:
            cps.append(s)
        t = s
    return sorted(cps)


def detect(times: np.ndarray, values: np.ndarray, *, penalty_k: float = 4.0, step_k: float = 4.0,
           spike_k: float = 6.0, max_spike: int = 2, min_segment: int = 2,
           min_size: float = 0.0, min_rel: float = 0.015, alpha: float = 1e-3) -> list[Shift]:
    """Steps and spikes of one series (``times`` are window starts, ascending); a step is
    kept when its segments' windows differ at ``alpha`` (none with fewer windows than
    :func:`step_windows_needed`)."""
    t = np.asarray(times, dtype=float)
    y = np.asarray(values, dtype=float)
    keep = np.isfinite(y)
    t, y = t[keep], y[keep]
    n = len(y)
    if n < 3:
        return []
    sigma = robust_sigma(y)
    floor = max(min_size, 1e-12)
    out: list[Shift] = []
    base = running_median(y, 2 * max_spike + 3)
    resid = y - base
    thr = max(spike_k * sigma, floor)
    flagged = resid > thr  # one-sided, as the per-pair events: delay is added, never taken away
    clean = y.copy()
    i = 0
    while i < n:
        if not flagged[i]:
            i += 1
            continue
        j = i
        while j < n and flagged[j]:
            j += 1
        left, right = y[max(0, i - 3):i], y[j:j + 3]
        same_level = (len(left) and len(right)
                      and abs(float(np.median(left) - np.median(right))) <= thr)
        big = bool(np.max(np.abs(resid[i:j])) >= min_rel * abs(float(np.median(base[i:j]))))
        if j - i <= max_spike and same_level and big:
            peak = i + int(np.argmax(np.abs(resid[i:j])))
            level = float(np.median(np.concatenate([left, right])))
            out.append(Shift("spike", i, float(t[i]), float(y[peak] - level), level, level, j - i))
            clean[i:j] = base[i:j]
        i = j
    step_thr = max(step_k * sigma, floor)
    testable = n >= step_windows_needed(alpha)
    cps = pelt(clean, penalty_k * max(sigma, 1e-12) ** 2 * np.log(n), min_segment) if testable else []
    pvals: list[float] = []
    while True:  # drop the smallest step below threshold or not significant, merge, re-measure
        bounds = [0, *cps, n]
        sizes = [float(np.median(clean[bounds[k + 1]:bounds[k + 2]]) - np.median(clean[bounds[k]:bounds[k + 1]]))
                 for k in range(len(cps))]
        levels = [float(np.median(clean[bounds[k]:bounds[k + 1]])) for k in range(len(bounds) - 1)]
        pvals = [step_p(clean[bounds[k]:bounds[k + 1]], clean[bounds[k + 1]:bounds[k + 2]])
                 for k in range(len(cps))]
        small = [k for k, s in enumerate(sizes)
                 if abs(s) < max(step_thr, min_rel * min(abs(levels[k]), abs(levels[k + 1])))
                 or pvals[k] >= alpha]
        if not small:
            break
        del cps[min(small, key=lambda k: abs(sizes[k]))]
    bounds = [0, *cps, n]
    for k, cp in enumerate(cps):
        before = float(np.median(clean[bounds[k]:cp]))
        after = float(np.median(clean[cp:bounds[k + 2]]))
        out.append(Shift("step", cp, float(t[cp]), after - before, before, after, p_value=pvals[k]))
    return sorted(out, key=lambda s: (s.time_s, s.kind))


Series = tuple[int, str, str, str, np.ndarray, np.ndarray]
"""(repetition, trial, series name, group, window starts in s, window values) of one series."""

GROUP_STATISTIC = "median of the pairs' window medians"


def group_series(pair_series: Sequence[Series]) -> list[Series]:
    """Each latency group's series per (repetition, trial): in every window, the median of
    its pairs' window medians (self-loops left out).

    Window medians, not means: one retransmission timeout (+200 ms on a 100 µs LAN
    RTT) lifts a 1 s window's mean of 100 echoes 20-fold and reads as a level
    shift; the median does not move. The median over pairs keeps one
    pair's own event (reported per pair, on raw RTTs) from moving the group."""
    by: dict[tuple[int, str, str], dict[float, list[float]]] = {}
    for r, trial, _name, group, ts, vs in pair_series:
        if group in ("self", ""):
            continue
        windows = by.setdefault((r, trial, group), {})
        for t, v in zip(np.asarray(ts, dtype=float).tolist(), np.asarray(vs, dtype=float).tolist(), strict=True):
            if np.isfinite(v):
                windows.setdefault(t, []).append(v)
    out: list[Series] = []
    for (r, trial, group), windows in sorted(by.items()):
        starts = np.array(sorted(windows))
        out.append((r, trial, f"group:{group}", group, starts,
                    np.array([float(np.median(windows[t])) for t in starts.tolist()])))
    return out


def level_shift_rows(pair_series: Sequence[Series], **params: Any) -> list[dict[str, Any]]:
    """Level shifts of every pair's window medians and of every group's (:func:`group_series`).

    ``pair_series``: per pair (self-loops excluded) its window medians.
    """
    rows: list[dict[str, Any]] = []
    for r, trial, name, group, ts, vs in pair_series:
        for s in detect(ts, vs, **params):
            rows.append(s.to_row(repetition=r, trial=trial, series=name, group=group,
                                 statistic="window median"))
    for r, trial, name, group, ts, vs in group_series(pair_series):
        for s in detect(ts, vs, **params):
            rows.append(s.to_row(repetition=r, trial=trial, series=name, group=group,
                                 statistic=GROUP_STATISTIC))
    return rows
