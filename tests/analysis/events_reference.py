"""The per-pair event detector as it was before its fast path: the oracle that
:func:`cloudbench.analysis.events.detect_pair_events` must equal, event for event.

Each candidate spike here takes the 99th percentile of the rest of the series afresh
(a partition of the whole series per candidate run). Kept verbatim apart from its
imports; do not optimise it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage

from cloudbench.analysis.events import (
    FULL_SHARE,
    LEVEL,
    SPIKE_TEST,
    STEP_Q,
    STEP_TEST,
    Event,
    EventParams,
    FloatArray,
    _runs,
    _share,
    _window_medians,
    late_rounds,
    markov_run_p,
    spike_interval,
    step_size_interval,
)
from cloudbench.analysis.levelshift import (
    MAD_TO_SIGMA,
    pelt,
    robust_sigma,
    step_p,
    step_pvalues,
    step_windows_needed,
)


def _dilate(mask: NDArray[np.bool_], k: int) -> NDArray[np.bool_]:
    return np.asarray(ndimage.binary_dilation(mask, iterations=k)) if mask.any() else mask


def running_median(y: np.ndarray, width: int) -> np.ndarray:
    """The level's running median as it was: scipy's median filter, ends mirrored."""
    y = np.asarray(y, dtype=float)
    half = max(0, min(width // 2, (len(y) - 1) // 2))
    return np.asarray(ndimage.median_filter(y, size=2 * half + 1, mode="mirror"))


def detect_pair_events(t_s: FloatArray, rtt: FloatArray, round_interval_s: float, window_s: float,
                       round_index: NDArray[np.integer] | None = None,
                       params: EventParams | None = None) -> list[Event]:
    """Spikes and steps of one pair's raw RTTs (see the module docstring)."""
    p = params or EventParams()
    t_all = np.asarray(t_s, dtype=np.float64)
    y_all = np.asarray(rtt, dtype=np.float64)
    if t_all.shape != y_all.shape:
        raise ValueError(f"times and RTTs differ in length ({len(t_all)}, {len(y_all)})")
    if round_interval_s <= 0 or window_s <= 0:
        raise ValueError("round interval and window must be positive")
    ok = np.isfinite(y_all) & np.isfinite(t_all)
    order = np.argsort(t_all[ok], kind="stable")
    t, y = t_all[ok][order], y_all[ok][order]
    late = (late_rounds(t_all, np.asarray(round_index), round_interval_s)[ok][order]
            if round_index is not None else None)
    n = len(y)
    if n < 4 * p.min_samples:
        return []
    max_spike_s = p.max_spike_s if p.max_spike_s is not None else window_s
    # the level's filter spans at most half the series: wider, it is one median of everything
    max_spike = min(max(p.min_samples, round(max_spike_s / round_interval_s)), (n - 1) // 4)
    level = running_median(y, 2 * max_spike + 1)
    resid = y - level
    # first pass: leave out gross departures before measuring the jitter
    sigma0 = MAD_TO_SIGMA * float(np.median(np.abs(resid)))
    rough = np.abs(resid) > max(p.spike_k * sigma0, 1e-12)
    quiet = ~_dilate(rough, 1)
    base = resid[quiet] if quiet.sum() >= 10 else resid
    sigma = max(MAD_TO_SIGMA * float(np.median(np.abs(base - np.median(base)))), 1e-12)
    thr = max(p.spike_k * sigma, p.jitter_k * max(float(np.percentile(np.abs(base), 99)), sigma))
    above = resid > thr  # one-sided: delay is added, never taken away
    events: list[Event] = []
    spike_mask = np.zeros(n, dtype=bool)
    runs = []
    for a, b in _runs(above):
        dur = float(t[b - 1] - t[a]) + round_interval_s
        # longer than a spike: a step pair, left to the step search
        if b - a >= p.min_samples and dur <= max_spike_s + round_interval_s:
            around = np.concatenate([y[max(0, a - max_spike):a], y[b:b + max_spike]])
            if len(around) >= p.min_samples:
                lvl = float(np.median(around))
            else:
                lvl, around = float(np.median(level[a:b])), np.empty(0)
            # the size against the level around the run (the running median inside it
            # is pulled up by the spike's own echoes): the size reported and tested
            runs.append((a, b, float(np.median(y[a:b])) - lvl, lvl, around))
    # largest first; each is measured against the jitter of everything but itself and
    # the spikes already accepted (bursts of host noise are jitter, not events)
    for a, b, size, lvl, around in sorted(runs, key=lambda r: -r[2]):
        rest = ~spike_mask
        rest[a:b] = False
        p99_rest = max(float(np.percentile(np.abs(resid[rest]), 99)), sigma)
        if size < p.size_k * p99_rest:
            continue
        pval = markov_run_p(above[a:b], above, rest)
        if pval >= p.alpha:
            continue
        spike_mask[a:b] = True
        if len(around):
            lo, hi, cov = spike_interval(y[a:b], around)
        else:
            lo, hi, cov = spike_interval(resid[a:b])
        # The echoes whose outbound crossing fell in the spike span its duration: they
        # start with the first that took it both ways (full size; the echoes before it
        # met the spike only on their way back) and end with the last of the run (the
        # last ones out in the spike come back after it: half size, still in the run).
        full = a + np.flatnonzero(y[a:b] - lvl >= FULL_SHARE * size)
        t_first = float(t[full[0]]) if len(full) else float(t[a])
        t_last = float(t[b - 1])
        events.append(Event("spike", t_first, t_last - t_first + round_interval_s, size, lvl, lvl,
                            b - a, pval, SPIKE_TEST, p99_rest, _share(late, a, b),
                            size_low=lo, size_high=hi, size_level=cov))
    p99 = max(float(np.percentile(np.abs(resid[~spike_mask]), 99)), sigma)
    events = [replace(e, jitter_p99=p99) for e in events]
    clean = np.where(spike_mask, level, y)
    events += _steps(t, clean, window_s, p, p99, late)
    return sorted(events, key=lambda e: (e.time_s, e.kind))


def _steps(t: FloatArray, y: FloatArray, window_s: float, p: EventParams, p99: float,
           late: NDArray[np.bool_] | None) -> list[Event]:
    starts, med, win = _window_medians(t, y, window_s)
    nw = len(med)
    if nw < max(4, step_windows_needed(p.alpha)):  # no split could reach alpha
        return []
    sigma_w = max(robust_sigma(med), 1e-12)
    # the gate: the whole series' step test (selection and dependence in its null)
    p_all = step_p(med, p.alpha, 2, seed=nw)
    cps = pelt(med, p.penalty_k * sigma_w**2 * math.log(nw), 2) if p_all < p.alpha else []
    cache: dict[tuple[int, int], float] = {}

    def seg_sizes(cps: list[int]) -> list[tuple[float, float, float]]:
        b = [0, *cps, nw]
        pvals = step_pvalues(med, cps, p.alpha, p_all, cache)
        out = []
        for k in range(len(cps)):
            before, after = med[b[k]:b[k + 1]], med[b[k + 1]:b[k + 2]]
            out.append((float(np.median(after) - np.median(before)), pvals[k],
                        min(abs(float(np.median(before))), abs(float(np.median(after))))))
        return out

    while cps:  # drop the weakest change point that fails a criterion, re-test the rest
        stats = seg_sizes(cps)
        weak = [k for k, (s, pv, lvl) in enumerate(stats)
                if pv >= p.alpha or abs(s) < max(p.step_k * sigma_w, p.min_rel * lvl)]
        if not weak:
            break
        del cps[min(weak, key=lambda k: abs(stats[k][0]))]
    # a step inside a window leaves that window half-way: change points two windows or less
    # apart are one step, kept where the size is larger
    kept: list[tuple[int, float]] = []
    for c, (size, _, _) in zip(cps, seg_sizes(cps), strict=True):
        if kept and c - kept[-1][0] <= 2:
            if abs(size) > abs(kept[-1][1]):
                kept[-1] = (c, size)
            continue
        kept.append((c, size))
    cps = [c for c, _ in kept]
    out: list[Event] = []
    bounds_t = [t[0], *[starts[c] for c in cps], t[-1] + window_s]
    for k, (c, (_, pv, _)) in enumerate(zip(cps, seg_sizes(cps), strict=True)):
        lo_t, hi_t = bounds_t[k], bounds_t[k + 2]
        # place the change on the raw echoes: window before the change point and the one at it
        near = np.flatnonzero((win >= c - 1) & (win <= c))
        before_all = y[(t >= lo_t) & (t < starts[c])]
        after_all = y[(t >= starts[c]) & (t < hi_t)]
        mid = (float(np.median(before_all)) + float(np.median(after_all))) / 2.0
        up = np.median(after_all) > np.median(before_all)
        seg = y[near]
        wrong_after = (seg < mid) if up else (seg > mid)  # on the before side of mid
        wrong_before = ~wrong_after
        cost = (np.concatenate([[0], np.cumsum(wrong_before)])
                + np.concatenate([np.cumsum(wrong_after[::-1])[::-1], [0]]))
        # cost[i]: the first i echoes of `near` before the change; i = len(near) puts the
        # change on the echo after them
        split = (int(np.append(near, near[-1] + 1)[int(np.argmin(cost))]) if len(near)
                 else int(np.searchsorted(t, starts[c])))
        split = min(split, len(t) - 1)
        ts = float(t[split])
        before = y[(t >= lo_t) & (t < ts)]
        after = y[(t >= ts) & (t < hi_t)]
        if len(before) == 0 or len(after) == 0:
            continue
        b_med, a_med = float(np.quantile(before, STEP_Q)), float(np.quantile(after, STEP_Q))
        if abs(a_med - b_med) < max(p.step_k * sigma_w, p.min_rel * min(abs(a_med), abs(b_med))):
            continue  # the segments' medians moved, their low quantiles (the path) did not
        j = int(np.searchsorted(t, hi_t))
        lo, hi = step_size_interval(before, after, STEP_Q)
        out.append(Event("step", ts, 0.0, a_med - b_med, b_med, a_med, len(after), pv, STEP_TEST,
                         p99, _share(late, split, min(j, split + max(1, len(after)) // 4 + 1)),
                         size_low=lo, size_high=hi, size_level=LEVEL if math.isfinite(lo) else math.nan))
    return out
