"""The per-pair event detector as it was before its fast path: the oracle that
:func:`cloudbench.analysis.events.detect_pair_events` must equal, event for event.

Each candidate spike here takes the 99th percentile of the rest of the series afresh
(a partition of the whole series per candidate run) and the level's running median is
scipy's; the spike part is kept as it was, do not optimise it. The step search is the
detector's own (``events._steps``) with the gate's bootstrap drawn in full
(``gate=False``): what the fast path changed there is that early stop, so that is
what the comparison checks, and the window medians' bookkeeping (no masked copy, each
echo's window by subtraction), which ``test_events_fast`` compares with the plain one; the
steps' own logic is checked against the truth by the coverage and adversarial suites. The
Markov run test is kept here as first written (the detector's counts in place).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage

from cloudbench.analysis.events import (
    FULL_SHARE,
    SPIKE_TEST,
    Event,
    EventParams,
    FloatArray,
    _runs,
    _share,
    _steps,
    late_rounds,
    spike_interval,
)
from cloudbench.analysis.events_jitter import RoundIndex
from cloudbench.analysis.levelshift import (
    MAD_TO_SIGMA,
)


def markov_run_p(run: NDArray[np.bool_], above: NDArray[np.bool_], rest: NDArray[np.bool_]) -> float:
    """``events.markov_run_p`` as first written: the rest's transitions taken out by boolean
    indexing, then counted (the detector's counts them in place)."""
    n = len(above)
    both = rest[:-1] & rest[1:]
    prev_up, next_up = above[:-1][both], above[1:][both]
    n_up, n_rest = float(above[rest].sum()), float(rest.sum())
    q = (n_up + 0.5) / (n_rest + 1.0)
    q_uu = (float((prev_up & next_up).sum()) + 0.5) / (float(prev_up.sum()) + 1.0)
    q_du = (float((~prev_up & next_up).sum()) + 0.5) / (float((~prev_up).sum()) + 1.0)
    r = np.asarray(run, dtype=bool)
    prev, nxt = r[:-1], r[1:]
    logp = (math.log(q) + float((prev & nxt).sum()) * math.log(q_uu)
            + float((prev & ~nxt).sum()) * math.log1p(-q_uu)
            + float((~prev & nxt).sum()) * math.log(q_du)
            + float((~prev & ~nxt).sum()) * math.log1p(-q_du))
    gaps = int((~r).sum())
    ways = math.log(math.comb(max(len(r) - 2, 0), gaps)) if gaps else 0.0
    return min(1.0, math.exp(math.log(n) + ways + logp))


def _dilate(mask: NDArray[np.bool_], k: int) -> NDArray[np.bool_]:
    return np.asarray(ndimage.binary_dilation(mask, iterations=k)) if mask.any() else mask


def running_median(y: np.ndarray, width: int) -> np.ndarray:
    """The level's running median as it was: scipy's median filter, ends mirrored."""
    y = np.asarray(y, dtype=float)
    half = max(0, min(width // 2, (len(y) - 1) // 2))
    return np.asarray(ndimage.median_filter(y, size=2 * half + 1, mode="mirror"))


def detect_pair_events(t_s: FloatArray, rtt: FloatArray, round_interval_s: float, window_s: float,
                       round_index: RoundIndex | None = None,
                       params: EventParams | None = None) -> list[Event]:
    """Spikes and steps of one pair's raw RTTs (see the module docstring)."""
    p = params or EventParams()
    if callable(round_index):  # the detector's interface: round numbers from a function
        round_index = round_index()
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
    events += _steps(t, clean, window_s, p, p99, late, gate=False)
    return sorted(events, key=lambda e: (e.time_s, e.kind))
