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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import bottleneck as bn
import numpy as np

MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class Shift:
    """A level shift found in one window series: a step to a new level or a spike and back."""
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


# Steps: a max-type CUSUM statistic, its null by an AR(1) sieve bootstrap (see step_p).
WINSOR_K = 3.0  # residuals winsorised at this many robust SDs (heavy tails, RTO windows)
PHI_SE = 2.0
GEN_RAW = True  # the raw series' lag 1 as a floor of the null's coefficient (measured: needed for AR(1) 0.8)
PHI_MAX = 0.95  # the largest window-to-window autocorrelation the null is drawn with
STEP_TEST = ("max-CUSUM of the windows (AR(1) long-run scale), p from an AR(1) sieve bootstrap "
             "that repeats the search")


def median_rows(x: np.ndarray) -> np.ndarray:
    """``np.median(x, axis=1)`` of a 2-D array, the same values (NaN for a row with one), from a
    sort of the rows: 7.4-7.7x faster on the bootstrap's 3,000 rows of 20-60 windows (1.6x at
    360), where ``np.median`` partitions one row at a time."""
    n = x.shape[1]
    s = np.sort(x, axis=1)  # NaNs last
    k = n // 2
    # np.median's value: the mean of the middle one (odd n) or two, a sum that starts at +0.0
    # (so -0.0 comes back as 0.0)
    med = s[:, k] + 0.0 if n % 2 else (s[:, k - 1] + s[:, k] + 0.0) / 2.0
    return np.where(np.isnan(s[:, -1]), np.nan, med)


def cusum_stat(y: np.ndarray, min_segment: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``y`` (``(B, n)``): the studentised max-CUSUM ``T``, the residuals' lag-1
    autocorrelation ``r`` (clipped to [0, PHI_MAX]) and the winsorised residuals.

    The split with the largest |CUSUM| (each side at least ``min_segment``) gives the
    two side means; residuals from them are winsorised at ``WINSOR_K`` robust SDs
    (MAD); ``T = max_k |Σ_{i≤k}(w_i − w̄)| / (σ_w·√((1+r)/(1−r))·√n)`` for the
    winsorised series ``w`` (side mean + winsorised residual): the CUSUM over the
    series' long-run scale under AR(1) dependence between windows."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    rows, n = y.shape
    lo, hi = min_segment - 1, n - min_segment
    cs = np.cumsum(y, axis=1)
    dev = cs[:, :-1] - cs[:, -1:] * (np.arange(1, n) / n)[None, :]  # Σ_{i≤k}(y_i − ȳ), k = 1..n−1
    ks = np.argmax(np.abs(dev[:, lo:hi]), axis=1) + lo + 1  # values in the first segment
    at = np.arange(rows)
    m1 = cs[at, ks - 1] / ks
    m2 = (cs[:, -1] - cs[at, ks - 1]) / (n - ks)
    fit = np.where(np.arange(n)[None, :] < ks[:, None], m1[:, None], m2[:, None])
    e = y - fit
    scale = MAD_TO_SIGMA * median_rows(np.abs(e - median_rows(e)[:, None]))
    scale = np.where(scale > 0, scale, e.std(axis=1, ddof=1))
    ew = np.clip(e, -WINSOR_K * scale[:, None], WINSOR_K * scale[:, None])
    # the long-run scale from first differences, which a step moves by one value only:
    # under AR(1), Var(Δy) = 2σ²(1 − φ), corr(Δy_t, Δy_t−1) = −(1 − φ)/2, LRV = σ²(1 + φ)/(1 − φ)
    d = np.diff(y, axis=1)
    dd = d - median_rows(d)[:, None]
    dscale = MAD_TO_SIGMA * median_rows(np.abs(dd))
    # most differences exactly zero (window medians at the 1 µs resolution): their MAD is 0 and
    # their SD is the step's own jump; the residuals' SD (√2 of it for a difference) is the noise
    dscale = np.where(dscale > 0, dscale, math.sqrt(2.0) * e.std(axis=1, ddof=1))
    dw = np.clip(dd, -WINSOR_K * dscale[:, None], WINSOR_K * dscale[:, None])
    dc = dw - dw.mean(axis=1, keepdims=True)
    ss = np.sum(dc * dc, axis=1)
    safe = np.where(ss > 0, ss, 1.0)
    rho_d = np.where(ss > 0, np.sum(dc[:, :-1] * dc[:, 1:], axis=1) / safe, -0.5)
    r_d = np.clip(1.0 + 2.0 * rho_d, 0.0, PHI_MAX)
    ec = ew - ew.mean(axis=1, keepdims=True)
    se = np.sum(ec * ec, axis=1)
    r_e = np.where(se > 0, np.sum(ec[:, :-1] * ec[:, 1:], axis=1) / np.where(se > 0, se, 1.0), 0.0)
    # the smaller: the split's residuals see a step's series as clean, the differences a wander's
    r = np.clip(np.minimum(r_d, r_e), 0.0, PHI_MAX)
    lrs = np.sqrt(ss / max(n - 2, 1) * (1.0 + r) / (2.0 * (1.0 - r) ** 2))
    w = fit + ew
    wc = np.cumsum(w - w.mean(axis=1, keepdims=True), axis=1)[:, :-1]
    top = np.max(np.abs(wc[:, lo:hi]), axis=1)
    t_stat = np.where(lrs > 0, top / np.where(lrs > 0, lrs, 1.0) / math.sqrt(n), 0.0)
    return t_stat, r, ew


def _lag1(x: np.ndarray) -> float:
    xc = x - x.mean()
    ss = float(np.sum(xc * xc))
    return float(np.sum(xc[:-1] * xc[1:])) / ss if ss > 0 else 0.0


def step_p(values: np.ndarray, alpha: float = 1e-3, min_segment: int = 2, seed: int = 0,
           gate: bool = False) -> float:
    """P-value for "the series' level changed somewhere" (``values``: window statistics in
    time order): the max-CUSUM :func:`cusum_stat`, its null distribution drawn by an
    AR(1) sieve bootstrap that repeats the whole search (split and studentisation)
    on each null series.

    The null series are AR(1) with the residuals' innovations resampled (heavy tails
    kept) and a coefficient chosen to err high: the larger of the residuals'
    bias-corrected lag-1 autocorrelation plus two standard errors and the raw
    series' (which a real step inflates: a clear step stays clear, a wander that
    looks like one does not), at most ``PHI_MAX``. ``ceil(3/alpha)`` draws, stopped
    after 200 when ten already reach the observed value (the p-value is then
    clearly above any α used). Deterministic (``seed``).

    ``gate``: only whether the p-value is under ``alpha`` is wanted. The draws are the
    same, but their statistics are taken in chunks and the count stops once enough
    reach the observed value that the p-value cannot end under ``alpha``; the value
    returned is then at least ``alpha`` (not the p-value), and otherwise the p-value."""
    y = np.asarray(values, dtype=float)
    n = len(y)
    if n < 2 * min_segment + 1:
        return 1.0
    t_arr, _, ew_arr = cusum_stat(y[None, :], min_segment)
    t_obs, ew = float(t_arr[0]), ew_arr[0]
    if t_obs <= 0:
        return 1.0
    d = np.diff(y)
    # φ from the differences' lag-1 (−(1 − φ)/2 for AR(1)); undefined when most differences are
    # exactly zero (window medians of a quiet link at the 1 µs resolution), then left out
    quantized = np.median(np.abs(d - np.median(d))) == 0.0
    r_d = 0.0 if quantized else min(max(1.0 + 2.0 * _lag1(d - np.median(d)), 0.0), PHI_MAX)
    phi = max(r_d, _lag1(ew) + (1.0 + 3.0 * _lag1(ew)) / n)  # Kendall's small-sample bias of lag 1
    phi += PHI_SE * math.sqrt(max(1.0 - phi * phi, 0.0) / n)
    if GEN_RAW:
        raw = _lag1(y)
        phi = max(phi, raw + (1.0 + 3.0 * raw) / n)
    phi = min(max(phi, 0.0), PHI_MAX)
    ec = ew - ew.mean()
    u = ec[1:] - phi * ec[:-1]
    u = u - u.mean()
    # scipy.signal imports scipy.stats (0.6 s in all): imported here, the report's scan starts
    # without waiting for it (its threads load it on a first step)
    from scipy import signal  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    burn = min(200, math.ceil(math.log(1e-3) / math.log(phi))) if phi > 0 else 0
    total = max(200, math.ceil(3.0 / alpha))
    done = hits = 0
    # gate: under alpha needs 1 + hits < alpha·(1 + total); past that count the answer is known
    most = math.ceil(alpha * (1 + total)) - 1
    while done < total:
        if gate and done and hits >= most:  # known from the first draws: the rest are not drawn
            return max(alpha, (1 + hits) / (1 + total))
        b = 200 if done == 0 else total - done
        x = np.asarray(signal.lfilter([1.0], [1.0, -phi], rng.choice(u, size=(b, n + burn)), axis=1)[:, burn:])
        if gate and done:
            for lo in range(0, b, 200):  # each row's statistic is its own: chunks give the same counts
                hits += int(np.sum(cusum_stat(x[lo:lo + 200], min_segment)[0] >= t_obs))
                if hits >= most:
                    return max(alpha, (1 + hits) / (1 + total))
            done += b
            continue
        hits += int(np.sum(cusum_stat(x, min_segment)[0] >= t_obs))
        done += b
        if hits >= 10:
            break
    return (1 + hits) / (1 + done)


STEP_WINDOWS_NEEDED = {1e-3: 15}
""":func:`step_windows_needed` at the α the report uses, as :func:`search_step_windows` finds it
(a test repeats the search): the search costs ~0.3 s of CPU in every report otherwise."""


@lru_cache(maxsize=16)
def step_windows_needed(alpha: float = 1e-3) -> int:
    """Fewest windows with which the step test reaches ``alpha`` on a step clear to the
    eye (:func:`search_step_windows`; :data:`STEP_WINDOWS_NEEDED` where it holds ``alpha``)."""
    known = STEP_WINDOWS_NEEDED.get(alpha)
    return known if known is not None else search_step_windows(alpha)


def search_step_windows(alpha: float) -> int:
    """The shortest series for which two halves 20 noise SDs apart (three seeded normal
    draws) all get a :func:`step_p` under ``alpha``. With fewer windows the null's series,
    drawn with the largest autocorrelation the data allow (near 1), wander as far as such
    a step."""
    for n in range(5, 200):
        ok = True
        for seed in range(3):
            rng = np.random.default_rng(seed)
            y = np.r_[np.zeros(n // 2), np.full(n - n // 2, 20.0)] + rng.standard_normal(n)
            ok = ok and step_p(y, alpha, seed=n) < alpha
        if ok:
            return n
    return 200


def step_pvalues(y: np.ndarray, cps: Sequence[int], alpha: float, p_all: float,
                 cache: dict[tuple[int, int], float], min_segment: int = 2) -> list[float]:
    """Each change point's p-value: :func:`step_p` on the stretch from the change point
    before it to the one after (the search repeated inside it), never below the whole
    series' ``p_all`` (the gate: a flat series gets a step with probability ≤ α);
    a stretch shorter than :func:`step_windows_needed` has ``p_all``."""
    bounds = [0, *cps, len(y)]
    out = []
    for k in range(len(cps)):
        a, b = bounds[k], bounds[k + 2]
        if (a, b) == (0, len(y)) or b - a < step_windows_needed(alpha):
            out.append(p_all)
            continue
        if (a, b) not in cache:
            cache[(a, b)] = step_p(y[a:b], alpha, min_segment, seed=b - a)
        out.append(max(p_all, cache[(a, b)]))
    return out


def robust_sigma(y: np.ndarray) -> float:
    """Noise scale from first differences: 1.4826 · median|Δy| / √2, at least the smallest
    nonzero difference (window medians of a quiet link at the 1 µs resolution are mostly
    equal: the MAD is then 0, and a one-quantum wander is not a change)."""
    d = np.diff(np.asarray(y, dtype=float))
    d = d[np.isfinite(d)]
    if len(d) == 0:
        return 0.0
    quantum = float(np.min(np.abs(d[d != 0]))) if np.any(d != 0) else 0.0
    return max(float(MAD_TO_SIGMA * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0)), quantum)


def running_median(y: np.ndarray, width: int) -> np.ndarray:
    """Median of each value and the ``width // 2`` either side, the ends mirrored
    (``c b | a b c …``: padding with the edge value would pin the level at the first
    and last value); the width is cut to the series' (``y`` finite).

    bottleneck's ``move_median`` (a double heap, O(n log width), no n × width copy) over
    the mirrored series: the same values as scipy's ``median_filter(mode="mirror")``
    (each is one of the window's values, the window odd), which the tests compare it
    with, and it lets other threads run while it works (scipy's holds the GIL: the
    report's senders run their pairs' events in threads). Non-finite values go to scipy."""
    y = np.asarray(y, dtype=float)
    half = max(0, min(width // 2, (len(y) - 1) // 2))
    if half == 0:
        return y.copy()
    if not np.isfinite(y).all():
        from scipy import ndimage  # noqa: PLC0415 - rare, and 0.26 s to import

        return np.asarray(ndimage.median_filter(y, size=2 * half + 1, mode="mirror"))
    mirrored = np.concatenate([y[half:0:-1], y, y[-2:-half - 2:-1]])
    return np.asarray(bn.move_median(mirrored, 2 * half + 1)[2 * half:])


PeltRecursion = Callable[[np.ndarray, np.ndarray, int, float, int], tuple[np.ndarray, np.ndarray]]
"""``(cs, cs2, n, penalty, min_segment) -> (f, last)``: PELT's optimal costs and each end's best start."""


def pelt(y: np.ndarray, penalty: float, min_segment: int = 2,
         recursion: PeltRecursion | None = None) -> list[int]:
    """Change points of a piecewise-constant mean (indices where new segments start).
    ``recursion``: another implementation of :func:`pelt_recursion` (the events' compiled one)."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    if n < 2 * min_segment:
        return []
    cs = np.concatenate([[0.0], np.cumsum(y)])
    cs2 = np.concatenate([[0.0], np.cumsum(y * y)])
    f, last = (recursion or pelt_recursion)(cs, cs2, n, penalty, min_segment)
    cps: list[int] = []
    t = n
    while t > 0 and np.isfinite(f[t]):
        s = int(last[t])
        if s > 0:
            cps.append(s)
        t = s
    return sorted(cps)


def pelt_recursion(cs: np.ndarray, cs2: np.ndarray, n: int, penalty: float,
                   min_segment: int) -> tuple[np.ndarray, np.ndarray]:
    """PELT's recursion over the cumulative sums of y and y·y (a 0 in front): ``f[t]``, the optimal
    cost of ``y[:t]``, and ``last[t]``, the start of its last segment (the first minimum wins)."""
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
    return f, last


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
    # the gate: its value is used only when under alpha (then it is the full count's)
    p_all = step_p(clean, alpha, min_segment, seed=n, gate=True) if n >= step_windows_needed(alpha) else 1.0
    # the gate: no step is sought unless the whole series' level changed at alpha
    cps = pelt(clean, penalty_k * max(sigma, 1e-12) ** 2 * np.log(n), min_segment) if p_all < alpha else []
    pvals: list[float] = []
    cache: dict[tuple[int, int], float] = {}
    while True:  # drop the smallest step below threshold or not significant, merge, re-measure
        bounds = [0, *cps, n]
        sizes = [float(np.median(clean[bounds[k + 1]:bounds[k + 2]]) - np.median(clean[bounds[k]:bounds[k + 1]]))
                 for k in range(len(cps))]
        levels = [float(np.median(clean[bounds[k]:bounds[k + 1]])) for k in range(len(bounds) - 1)]
        pvals = step_pvalues(clean, cps, alpha, p_all, cache, min_segment)
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


PairWindows = tuple[int, str, str, str, np.ndarray, np.ndarray]
"""One host pair's windows: (repetition, trial, pair name, group, window starts in s, window values)."""

GROUP_STATISTIC = "median of the pairs' window medians"


def group_series(pair_series: Sequence[PairWindows]) -> list[PairWindows]:
    """Each latency group's series per (repetition, trial): in every window, the median of
    its pairs' window medians (self-loops left out).

    Window medians, not means: one retransmission timeout (+200 ms on a 100 µs LAN
    RTT) lifts a 1 s window's mean of 100 echoes 20-fold and reads as a level
    shift; the median does not move. The median over pairs keeps one
    pair's own event (reported per pair, on raw RTTs) from moving the group."""
    by: dict[tuple[int, str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    for r, trial, _name, group, ts, vs in pair_series:
        if group in ("self", ""):
            continue
        t, v = np.asarray(ts, dtype=float), np.asarray(vs, dtype=float)
        if len(t) != len(v):
            raise ValueError(f"{_name}: {len(t)} window starts but {len(v)} values")
        by.setdefault((r, trial, group), []).append((t, v))
    out: list[PairWindows] = []
    for (r, trial, group), parts in sorted(by.items(), key=lambda kv: kv[0]):
        t = np.concatenate([p[0] for p in parts])
        v = np.concatenate([p[1] for p in parts])
        finite = np.isfinite(v)
        t, v = t[finite], v[finite]
        order = np.lexsort((v, t))  # by window, then value: each window's values sorted
        t, v = t[order], v[order]
        first = np.flatnonzero(np.r_[True, t[1:] != t[:-1]]) if len(t) else np.empty(0, dtype=np.int64)
        n = np.diff(np.r_[first, len(t)])
        # np.median's value: the middle one (odd n; (x + x) / 2 is x), or the mean of the two
        med = (v[first + (n - 1) // 2] + v[first + n // 2]) / 2.0
        out.append((r, trial, f"group:{group}", group, t[first], med))
    return out


PAIR_STATISTIC = "raw RTTs (the per-pair events)"


def level_shift_rows(pair_series: Sequence[PairWindows], pair_events: Sequence[dict[str, Any]] = (),
                     **params: Any) -> list[dict[str, Any]]:
    """Level shifts of every group's series (:func:`group_series`, sought here) and of every
    pair: the pair's rows are its events (``pair_events``: the rows of
    :func:`cloudbench.analysis.events.detect_pair_events`, with ``repetition``, ``trial``
    and ``series``), found once, on raw RTTs, with their own false-alarm control, not
    sought again in the window medians.

    ``pair_series``: per pair (self-loops excluded) its window medians.
    """
    groups = {(r, trial, name): group for r, trial, name, group, _ts, _vs in pair_series}
    rows: list[dict[str, Any]] = []
    for e in pair_events:
        group = groups.get((e["repetition"], e["trial"], e["series"]), "")
        rows.append({"repetition": e["repetition"], "trial": e["trial"], "series": e["series"], "group": group,
                     "statistic": PAIR_STATISTIC, "kind": e["kind"], "time_s": e["time_s"], "size": e["size"],
                     "before": e["before"], "after": e["after"], "windows": 1, "p_value": e["p_value"]})
    for r, trial, name, group, ts, vs in group_series(pair_series):
        for s in detect(ts, vs, **params):
            rows.append(s.to_row(repetition=r, trial=trial, series=name, group=group,
                                 statistic=GROUP_STATISTIC))
    return rows
