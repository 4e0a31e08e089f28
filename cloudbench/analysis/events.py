"""Spikes and steps of one pair's raw round-trip times, and which of them the host caused.

Window medians hide anything shorter than half a window, so events are
sought in the raw RTTs of each pair. Written from the method descriptions (no
external package); tests are scipy's.

Interface (what a workload hands in, per ordered pair, as numpy arrays)::

    detect_pair_events(t_s, rtt, round_interval_s, window_s, round_index=None)

``t_s`` is each echo's send time in seconds (UTC seconds; at least one clock for
all pairs of one source, e.g. seconds after the worker's start), ``rtt`` its round-trip time in
any unit (NaN for a timeout; sizes come back in the same unit),
``round_interval_s`` the time between the worker's rounds (1 / rate), and
``window_s`` the report's window. ``round_index`` (the worker's round number of
each echo; or a function that returns them, called only when an event asks) lets the
detector see rounds that left late: the worker's late-round counter, per echo. Then
:func:`label_host_events` takes every pair's events and labels those the measuring host caused.

Method
------
1. **Level**: a running median of the raw RTTs over ``2·max_spike + 1`` echoes
   (``max_spike`` the echoes of ``max_spike_s``, so a spike up to that long does not
   move it; a step does, at its edge), never wider than half the series, its ends
   mirrored (edge padding pinned the level at the first echo). **Jitter**: the
   residuals from the level; the noise scale ``σ`` is their MAD (× 1.4826), taken
   after leaving out the gross departures of a first pass; the *p99 jitter* is the
   99th percentile of ``|residual|`` outside the reported spikes (bursts of host
   noise included: they are jitter).
2. **Spikes** are one-sided (RTT up: a queue or a detour adds delay; an RTT cannot
   fall far below the path's own): runs of consecutive echoes (one quiet echo
   tolerated inside) whose residual exceeds ``thr = max(spike_k·σ, jitter_k·p99)``,
   at least ``min_samples`` long and at most ``max_spike_s``. The size reported —
   the median of the run's echoes minus the median of the ``max_spike`` echoes
   either side (robust to the half-size echoes at its edges, which crossed the
   link only one way during the spike) — is the size tested: it must be at least
   ``size_k`` × the p99 jitter of the rest of the series (largest first; each
   accepted spike leaves the rest). Significance — a *Markov run test*: neighbouring
   echoes are not independent (AR(1) jitter, a TCP retransmission holding the
   echoes behind it), so the exceedances of the rest of the series are fitted with
   a two-state Markov chain (``P(above)``, ``P(above | above)``,
   ``P(above | below)``, each with half a count added), and the run's pattern of
   above/below echoes gets its probability under that chain, times the ``n``
   positions it could start at and the ways its quiet echoes could sit inside it
   (Bonferroni). Reported when under ``alpha``. Time: the first echo with at least
   ``FULL_SHARE`` of the size (it went out during the spike); duration: from it to
   the last echo of the run, plus one round.
3. **Steps**: the spikes replaced by the level, PELT on the window medians
   (:func:`cloudbench.analysis.levelshift.pelt`, penalty ``penalty_k·σ_w²·ln n``),
   each change point then placed on the raw echoes (within the window before
   and the one after, the split that puts fewest echoes on the wrong side of
   the mid-level). Size: the 10th percentile (``STEP_Q``) of the raw echoes
   after minus before, each side up to the next change point (queueing and CPU
   contention only add delay: a low quantile follows the path). Significance
   (:func:`cloudbench.analysis.levelshift.step_p`, ``step_pvalues``): the max-CUSUM of the
   window medians with an AR(1) long-run scale, its null from an AR(1) sieve bootstrap that
   repeats the split search, first on the whole series (the gate), then on each change point's
   stretch — window medians, not raw echoes, since consecutive echoes are not independent, and
   the bootstrap keeps the windows' own dependence; reported when under ``alpha`` and at least
   ``step_k·σ_w`` and ``min_rel`` of the level. With fewer than
   :func:`step_windows_needed` windows no split can reach ``alpha`` (the report
   says "steps not testable: N windows, needs M").
4. **Intervals** of a spike's size (median of its echoes minus the median of
   the echoes around it) and of a step's: the difference of the two sides'
   exact order-statistic CIs of the median (spike) or 10th percentile (step),
   each at √0.95, so 95 % together. A spike too short for an exact 95 % CI of
   its median (fewer than 7 echoes) gets the widest interval it can have, its
   echoes' min–max, with that interval's own coverage (1 − 2·0.5^m for m echoes)
   reported beside it (``size_level``); a side with no interval at all gives
   none (``n/a``), never NaN. Both treat the echoes of one side as independent:
   they under-cover when neighbouring echoes are strongly dependent.
5. **Host events** (:func:`label_host_events`): an event is the host's, not the
   link's, when every pair measured from its source host (at least two) has an
   event of the same kind at the same time, when one of its hosts has one with
   two or more other hosts at once, or when most of its echoes were sent in
   late rounds (the worker was short of CPU).

Speed: the level is counted per value for RTTs on a grid (``events_median``: whole µs), the
candidates' size tests use bounds of the rest's p99 from one partial sort (the exact
percentile only near them), the jitter's medians of a long series are a compiled radix
select and its p99s come from the top alone (``events_jitter``), the run test subtracts the
ranges left out from the whole series' counts, late rounds are worked out only for an event,
the step search's windows are found by bisection and its gate is a bootstrap that stops once
it cannot end under ``alpha``; the event list is the same as the plain implementation's
(``tests/analysis/events_reference.py``, the tests' oracle; ARCHITECTURE.md, "Observations
out of core").

False alarms: with the defaults, at most 0.01 link events per series-hour
(the 95 % upper bound measured by ``bench/bench_events.py`` on simulated quiet
pairs with AR(1) jitter, heavy tails and retransmission-timeout outliers; see
the README's "Events on quiet links").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.events_jitter import Late, LateRounds, MarkovChain, RoundIndex, median, percentile
from cloudbench.analysis.events_jitter import RestPercentile as _RestPercentile
from cloudbench.analysis.events_jitter import dilate as _dilate
from cloudbench.analysis.events_jitter import late_rounds as late_rounds  # the events' own names, as before
from cloudbench.analysis.events_jitter import markov_run_p as markov_run_p
from cloudbench.analysis.events_median import (
    finite_and_ordered,
    level_and_residuals,
    level_between,
    pelt,
    quiet_residuals,
    scratch_array,
    window_medians,
)
from cloudbench.analysis.levelshift import (
    MAD_TO_SIGMA,
    robust_sigma,
    step_p,
    step_pvalues,
    step_windows_needed,
)
from cloudbench.analysis.levelshift import STEP_TEST as WINDOW_STEP_TEST
from cloudbench.analysis.orderstats import window_stats
from cloudbench.analysis.stats import quantile_ci, rank_coverage

FloatArray = NDArray[np.float64]
# Step sizes compare this quantile of the echoes on each side: queueing and CPU
# contention only add delay, so a low quantile follows the path, not the load.
STEP_Q = 0.1
# A spike's time and duration count the echoes with at least this share of its size.
FULL_SHARE = 0.75

SPIKE_TEST = ("run test: the run's above/below pattern under a Markov chain of the rest's "
              "exceedances, × n positions (Bonferroni)")
STEP_TEST = "PELT on window medians; " + WINDOW_STEP_TEST


@dataclass(frozen=True)
class EventParams:
    """Thresholds of :func:`detect_pair_events` (defaults: see the README's false-alarm rate)."""

    max_spike_s: float | None = None  # default: one window
    spike_k: float = 6.0  # sample threshold in σ
    jitter_k: float = 1.5  # sample threshold in p99 jitter
    size_k: float = 4.0  # a spike's median excess, in p99 jitter of the rest of the series
    min_samples: int = 3
    alpha: float = 1e-3
    penalty_k: float = 4.0
    step_k: float = 4.0
    min_rel: float = 0.015
    late_share: float = 0.5  # share of an event's echoes in late rounds that makes it the host's


@dataclass(frozen=True)
class Event:
    """One spike or step of one pair (times in the caller's clock, sizes in its RTT unit)."""

    kind: Literal["spike", "step"]
    time_s: float
    duration_s: float  # spikes: last − first echo + one round; steps: 0
    size: float  # spike: median excess over the level; step: after − before
    before: float
    after: float
    samples: int  # echoes in the spike (steps: echoes after the step up to the next one)
    p_value: float
    test: str
    jitter_p99: float  # the pair's p99 jitter (|residual from the level|)
    late_share: float = math.nan  # share of the event's echoes sent in late rounds
    origin: Literal["link", "host"] = "link"
    reason: str = ""
    size_low: float = math.nan  # interval of the size (see spike_size_interval); NaN: none
    size_high: float = math.nan
    size_level: float = math.nan  # the interval's coverage (0.95, or less for short spikes)

    def to_row(self, **labels: Any) -> dict[str, Any]:
        return {**labels, "kind": self.kind, "time_s": self.time_s, "duration_s": self.duration_s,
                "size": self.size, "before": self.before, "after": self.after,
                "samples": self.samples, "p_value": self.p_value, "test": self.test,
                "jitter_p99": self.jitter_p99, "origin": self.origin, "reason": self.reason,
                "size_ci_low": _or_none(self.size_low), "size_ci_high": _or_none(self.size_high),
                "size_ci_level": _or_none(self.size_level)}


def _or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


LEVEL = 0.95


def median_interval(x: FloatArray, level: float) -> tuple[float, float, float]:
    """``(lower, upper, coverage)`` for the median of ``x``: the exact order-statistic
    CI at ``level`` when ``x`` has enough values, else the widest one it has,
    ``[min, max]``, with its own coverage ``1 − 2·0.5^n`` (Le Boudec, Thm. 2.1);
    NaNs with fewer than two values (no interval)."""
    ci = quantile_ci(x, 0.5, level)
    if ci.lower is not None and ci.upper is not None:
        return ci.lower, ci.upper, level
    n = len(x)
    if n < 2:
        return math.nan, math.nan, math.nan
    return float(np.min(x)), float(np.max(x)), rank_coverage(n, 0.5, 1, n)


def spike_interval(inside: FloatArray, around: FloatArray | None = None,
                   level: float = LEVEL) -> tuple[float, float, float]:
    """Interval of a spike's size, ``median(inside) − median(around)``, and its coverage.

    Each median's exact order-statistic CI at √level (:func:`median_interval`;
    a short spike's min–max with its smaller coverage), differenced: both hold
    at once with probability ≥ the product of their coverages (independent
    sides), which is returned. Without ``around`` (the level taken as known),
    the interval of ``median(inside)`` at ``level``. NaNs when a side has no
    interval."""
    if around is None:
        return median_interval(np.asarray(inside, dtype=np.float64), level)
    a_lo, a_hi, a_cov = median_interval(np.asarray(inside, dtype=np.float64), math.sqrt(level))
    b_lo, b_hi, b_cov = median_interval(np.asarray(around, dtype=np.float64), math.sqrt(level))
    if not (math.isfinite(a_cov) and math.isfinite(b_cov)):
        return math.nan, math.nan, math.nan
    cov = level if a_cov == b_cov == math.sqrt(level) else a_cov * b_cov
    return a_lo - b_hi, a_hi - b_lo, cov


def spike_size_interval(inside: FloatArray, around: FloatArray | None = None,
                        level: float = LEVEL) -> tuple[float, float]:
    """The bounds of :func:`spike_interval` (NaN when there is none)."""
    lo, hi, _ = spike_interval(inside, around, level)
    return lo, hi


def step_size_interval(before: FloatArray, after: FloatArray, q: float = STEP_Q,
                       level: float = LEVEL) -> tuple[float, float]:
    """CI of ``quantile_q(after) − quantile_q(before)``: each side's exact CI at level
    √level, so both hold at once with probability ≥ level (independent sides);
    the difference of the bounds then covers the difference of the quantiles."""
    a = quantile_ci(after, q, math.sqrt(level))
    b = quantile_ci(before, q, math.sqrt(level))
    if a.lower is None or a.upper is None or b.lower is None or b.upper is None:
        return math.nan, math.nan
    return a.lower - b.upper, a.upper - b.lower


def _runs(flag: NDArray[np.bool_], gap: int = 1, min_len: int = 1) -> list[tuple[int, int]]:
    """[start, end) of runs of True, bridging up to ``gap`` False values inside a run, of
    ``min_len`` values or more (chosen before the runs become Python tuples: a 6-hour pair has
    ~6,500 runs over its threshold and ~25 of the length a spike needs)."""
    idx = np.flatnonzero(flag)
    if len(idx) == 0:
        return []
    cut = np.flatnonzero(np.diff(idx) > gap + 1)
    starts = np.concatenate([[idx[0]], idx[cut + 1]])
    ends = np.concatenate([idx[cut], [idx[-1]]]) + 1
    if min_len > 1:
        long = ends - starts >= min_len
        starts, ends = starts[long], ends[long]
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _abs_outside(resid: FloatArray, ranges: list[tuple[int, int]]) -> FloatArray:
    """``|resid|`` outside the disjoint ``[start, end)`` ranges, in order, in the thread's scratch
    (valid until its next call): ``np.abs(resid[rest])`` for the mask ``rest`` of the ranges,
    without the mask, the gathered copy and its absolute values, each a fresh full-length array."""
    n = len(resid)
    out = scratch_array("outside", n)
    at = start = 0
    for a, b in [*sorted(ranges), (n, n)]:
        if a > start:
            np.abs(resid[start:a], out=out[at:at + a - start])
            at += a - start
        start = max(start, b)
    return out[:at]


def _window_medians(t: FloatArray, y: FloatArray, window_s: float) -> tuple[FloatArray, FloatArray, NDArray[np.int64]]:
    """Window starts, medians, and each window's first echo (``bounds``, one more: ``len(t)``
    last); ``t`` ascending, ``y`` finite."""
    found = window_medians(t, y, window_s)
    if found is not None:
        keys, bounds, med = found
        return t[0] + keys * window_s, med, bounds
    w = np.floor((t - t[0]) / window_s).astype(np.int64)
    keys, counts, _, med = window_stats(y, w)  # every echo counts: no mask, no copy
    return t[0] + keys * window_s, med, np.concatenate([[0], np.cumsum(counts)])


def detect_pair_events(t_s: FloatArray, rtt: FloatArray, round_interval_s: float, window_s: float,
                       round_index: RoundIndex | None = None,
                       params: EventParams | None = None) -> list[Event]:
    """Spikes and steps of one pair's raw RTTs (see the module docstring)."""
    p = params or EventParams()
    if round_interval_s <= 0 or window_s <= 0:
        raise ValueError("round interval and window must be positive")
    t, y, late = _in_time_order(t_s, rtt, round_index, round_interval_s)
    n = len(y)
    if n < 4 * p.min_samples:
        return []
    max_spike_s = p.max_spike_s if p.max_spike_s is not None else window_s
    # the level's filter spans at most half the series: wider, it is one median of everything
    max_spike = min(max(p.min_samples, round(max_spike_s / round_interval_s)), (n - 1) // 4)
    level, resid, absr, sigma, p99_quiet = _jitter(y, 2 * max_spike + 1, p.spike_k)

    def level_at(a: int, b: int) -> FloatArray:  # off the grid: written; on it: worked out
        return level[a:b] if level is not None else level_between(y, 2 * max_spike + 1, a, b)

    thr = max(p.spike_k * sigma, p.jitter_k * max(p99_quiet, sigma))
    # one-sided (delay is added, never taken away); the thread's scratch, as resid is
    above = np.greater(resid, thr, out=scratch_array("above", n, np.bool_))
    events: list[Event] = []
    runs = []
    for a, b in _runs(above, min_len=p.min_samples):
        dur = float(t[b - 1] - t[a]) + round_interval_s
        # longer than a spike: a step pair, left to the step search
        if b - a >= p.min_samples and dur <= max_spike_s + round_interval_s:
            around = np.concatenate([y[max(0, a - max_spike):a], y[b:b + max_spike]])
            if len(around) >= p.min_samples:
                lvl = float(np.median(around))
            else:
                lvl, around = float(np.median(level_at(a, b))), np.empty(0)
            # the size against the level around the run (the running median inside it
            # is pulled up by the spike's own echoes): the size reported and tested
            runs.append((a, b, float(np.median(y[a:b])) - lvl, lvl, around))
    # largest first; each is measured against the jitter of everything but itself and
    # the spikes already accepted (bursts of host noise are jitter, not events)
    # (runs are disjoint: the rest leaves out the spikes accepted and the run, no more)
    bounds = _RestPercentile(absr, 99.0, n - sum(b - a for a, b, *_ in runs))
    spiked = 0
    chain, accepted = MarkovChain(above), list[tuple[int, int]]()
    for a, b, size, lvl, around in sorted(runs, key=lambda r: -r[2]):
        m = n - spiked - (b - a)
        clear = bounds.exceeds(size / p.size_k, m, sigma) if p.size_k > 0 else None
        if clear is False:
            continue  # decided by bounds that hold for any rest of this size: as below
        if clear is None and size < p.size_k * max(
                percentile(_abs_outside(resid, [*accepted, (a, b)]), 99, inplace=True), sigma):
            continue
        pval = chain.p(above[a:b], [*accepted, (a, b)])
        if pval >= p.alpha:
            continue
        spiked += b - a
        accepted.append((a, b))
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
                            b - a, pval, SPIKE_TEST, math.nan, _share(late, a, b),
                            size_low=lo, size_high=hi, size_level=cov))
    p99 = max(percentile(_abs_outside(resid, accepted), 99, inplace=True) if spiked else bounds.whole(), sigma)
    events = [replace(e, jitter_p99=p99) for e in events]
    clean = y.copy() if spiked else y  # the spikes replaced by the level
    for a, b in accepted:
        clean[a:b] = level_at(a, b)
    events += _steps(t, clean, window_s, p, p99, late)
    return sorted(events, key=lambda e: (e.time_s, e.kind))


def _jitter(y: FloatArray, width: int,
            spike_k: float) -> tuple[FloatArray | None, FloatArray, FloatArray, float, float]:
    """``(level, residuals, |residuals| (reordered where no compiler), σ, p99 of the quiet |residuals|)``.

    The 17 MB arrays of a 6-hour pair are the thread's, kept for its next pair (page faults);
    the level is written only off the grid (None: ``level_between`` gives the ranges asked for)."""
    level, resid, absr = level_and_residuals(y, width, scratch=True)
    # first pass: leave out gross departures before measuring the jitter
    sigma0 = MAD_TO_SIGMA * median(absr, inplace=True)
    base, abs_base = _quiet(resid, max(spike_k * sigma0, 1e-12))  # not resid: partitioned in place
    dev = np.subtract(base, median(base, inplace=True), out=base)
    sigma = max(MAD_TO_SIGMA * median(np.abs(dev, out=dev), inplace=True), 1e-12)
    return level, resid, absr, sigma, percentile(abs_base, 99, inplace=True)


def _quiet(resid: FloatArray, cut: float) -> tuple[FloatArray, FloatArray]:
    """The residuals, and their absolute values, of the echoes with no ``|residual| > cut`` at
    themselves or either neighbour (all of them when fewer than 10 are), as arrays apart from
    ``resid`` (the thread's scratch on the kernel's path: valid until its next pair)."""
    found = quiet_residuals(resid, cut, scratch=True)
    if found is None:  # no kernel
        abs_resid = np.abs(resid)
        quiet = ~_dilate(abs_resid > cut, 1)
        found = resid[quiet], abs_resid[quiet]
    return found if len(found[0]) >= 10 else (resid.copy(), np.abs(resid))


def _in_time_order(t_s: FloatArray, rtt: FloatArray, round_index: RoundIndex | None,
                   round_interval_s: float) -> tuple[FloatArray, FloatArray, Late | None]:
    """The finite echoes in send order (a stable sort; none when already so, as a scan's
    rounds are), and which left in late rounds (None without ``round_index``)."""
    t_all = np.asarray(t_s, dtype=np.float64)
    y_all = np.asarray(rtt, dtype=np.float64)
    if t_all.shape != y_all.shape:
        raise ValueError(f"times and RTTs differ in length ({len(t_all)}, {len(y_all)})")
    # finite and in order, as a scan's pairs are (one pass, no copy): the late rounds when asked
    if t_all.ndim == 1 and finite_and_ordered(t_all, y_all):
        if round_index is None:
            return t_all, y_all, None
        if callable(round_index) or np.shape(round_index) == t_all.shape:
            return t_all, y_all, LateRounds(t_all, round_index, round_interval_s)
    ri = round_index() if callable(round_index) else round_index
    ok = np.isfinite(y_all) & np.isfinite(t_all)
    late = late_rounds(t_all, np.asarray(ri), round_interval_s) if ri is not None else None
    if not ok.all() or (t_all[1:] < t_all[:-1]).any():
        order = np.argsort(t_all[ok], kind="stable")
        t_all, y_all = t_all[ok][order], y_all[ok][order]
        late = late[ok][order] if late is not None else None
    return t_all, y_all, late


def _share(late: Late | None, a: int, b: int) -> float:
    return float(np.mean(late[a:b])) if late is not None and b > a else math.nan


def _steps(t: FloatArray, y: FloatArray, window_s: float, p: EventParams, p99: float,
           late: Late | None, gate: bool = True) -> list[Event]:
    """The per-pair steps. ``gate``: the whole series' bootstrap stops once its p-value cannot
    come under alpha (its value is used only when it does); False draws it in full (the
    oracle's way, tests/analysis/events_reference.py, which checks the two agree)."""
    starts, med, win_bounds = _window_medians(t, y, window_s)
    nw = len(med)
    if nw < max(4, step_windows_needed(p.alpha)):  # no split could reach alpha
        return []
    sigma_w = max(robust_sigma(med), 1e-12)
    # PELT, then the gate (the series' step test): no change point, no step; the gate costs more
    cps = pelt(med, p.penalty_k * sigma_w**2 * math.log(nw), 2)
    p_all = step_p(med, p.alpha, 2, seed=nw, gate=gate) if cps else 1.0
    if not cps or p_all >= p.alpha:
        return []
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

    while True:  # drop the weakest change point that fails a criterion, re-test the rest
        stats = seg_sizes(cps)
        weak = [k for k, (s, pv, lvl) in enumerate(stats)
                if pv >= p.alpha or abs(s) < max(p.step_k * sigma_w, p.min_rel * lvl)]
        if weak:
            del cps[min(weak, key=lambda k: abs(stats[k][0]))]
            continue
        # a step inside a window leaves that window half-way: change points two windows or less
        # apart are one step, kept where the size is larger; the merged point is tested again
        kept: list[tuple[int, float]] = []
        for c, (size, _, _) in zip(cps, stats, strict=True):
            if kept and c - kept[-1][0] <= 2:
                if abs(size) > abs(kept[-1][1]):
                    kept[-1] = (c, size)
                continue
            kept.append((c, size))
        if len(kept) == len(cps):
            break
        cps = [c for c, _ in kept]
    out: list[Event] = []
    bounds_t = [t[0], *[starts[c] for c in cps], t[-1] + window_s]
    for k, (c, (_, pv, _)) in enumerate(zip(cps, stats, strict=True)):
        lo_t, hi_t = bounds_t[k], bounds_t[k + 2]
        # place the change on the raw echoes: window before the change point and the one at it
        near = np.arange(win_bounds[max(c - 1, 0)], win_bounds[c + 1])
        before_all = y[(t >= lo_t) & (t < starts[c])]
        after_all = y[(t >= starts[c]) & (t < hi_t)]
        # np.median's values (the compiled select for long segments), each taken once
        med_before, med_after = median(before_all), median(after_all)
        mid = (med_before + med_after) / 2.0
        split = _split_on_echoes(t, y, near, mid, med_after > med_before, float(starts[c]))
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


def _split_on_echoes(t: FloatArray, y: FloatArray, near: NDArray[np.int64], mid: float, up: bool,
                     start: float) -> int:
    """The echo a change is placed on: among the echoes ``near`` it (the window before the change
    point and the one at it), the split that puts fewest on the wrong side of the mid-level
    ``mid`` (``up``: the level rises); without echoes there, the first at ``start``."""
    seg = y[near]
    wrong_after = (seg < mid) if up else (seg > mid)  # on the before side of mid
    wrong_before = ~wrong_after
    cost = (np.concatenate([[0], np.cumsum(wrong_before)])
            + np.concatenate([np.cumsum(wrong_after[::-1])[::-1], [0]]))
    # cost[i]: the first i echoes of `near` before the change; i = len(near) puts the
    # change on the echo after them
    split = (int(np.append(near, near[-1] + 1)[int(np.argmin(cost))]) if len(near)
             else int(np.searchsorted(t, start)))
    return min(split, len(t) - 1)


def _overlap(a: Event, b: Event, slack: float) -> bool:
    return (a.time_s - slack <= b.time_s + b.duration_s) and (b.time_s - slack <= a.time_s + a.duration_s)


def label_host_events(events: Mapping[tuple[str, str], list[Event]], round_interval_s: float,
                      window_s: float, params: EventParams | None = None) -> dict[tuple[str, str], list[Event]]:
    """The same events, those the measuring host caused labelled ``origin="host"``.

    ``events`` maps every measured (src, dst) pair — also those without events —
    to its events. A spike or step of pair (a, b) is the host's when

    * every pair measured from ``a`` (at least two) has one of the same kind
      within one round (spikes) or one window (steps) of it: one worker, one
      clock; or
    * ``a`` or ``b`` has one, within a window, on pairs (sent or answered) with
      at least two other hosts: a link moves the pairs of its two ends only,
      a stalled host those with everyone (pairs of other sources are on other
      workers' clocks, which start within a fraction of a window of each other).
      With several hosts per region, a link event between two regions moves
      pairs with several hosts too: there, read host labels with care; or
    * at least ``late_share`` of its echoes were sent in late rounds.
    """
    p = params or EventParams()
    by_src: dict[str, list[tuple[str, str]]] = {}
    by_host: dict[str, list[tuple[str, str]]] = {}
    for pair in events:
        by_src.setdefault(pair[0], []).append(pair)
        for h in set(pair):
            by_host.setdefault(h, []).append(pair)

    def moved(e: Event, q: tuple[str, str], slack: float) -> bool:
        return any(o.kind == e.kind and _overlap(e, o, slack) for o in events[q])

    def counterparts(e: Event, host: str) -> set[str]:
        return {q[1] if q[0] == host else q[0] for q in by_host[host] if moved(e, q, window_s)}

    out: dict[tuple[str, str], list[Event]] = {}
    for pair, evs in events.items():
        labelled = []
        for e in evs:
            near = round_interval_s if e.kind == "spike" else window_s
            siblings = by_src[pair[0]]
            hosts = [(h, c) for h in dict.fromkeys(pair) if len(c := counterparts(e, h)) >= 2]
            if len(siblings) >= 2 and all(moved(e, q, near) for q in siblings):
                e = replace(e, origin="host", reason=f"all {len(siblings)} pairs from {pair[0]} "
                            "moved at once")
            elif hosts:
                h, c = hosts[0]
                e = replace(e, origin="host", reason=f"{h}'s pairs with {len(c)} hosts "
                            f"({', '.join(sorted(c))}) moved at once")
            elif math.isfinite(e.late_share) and e.late_share >= p.late_share:
                e = replace(e, origin="host", reason=f"{e.late_share:.0%} of its echoes left in "
                            "late rounds")
            labelled.append(e)
        out[pair] = labelled
    return out
