"""Coverage by simulation of every interval the report prints.

Each function simulates ``datasets`` data sets with a known truth, runs the
analysis the report runs, and returns how often its interval held the truth,
next to the level it claims. Used by ``tests/analysis/coverage/`` (which
assert the levels) and ``bench/coverage_table.py`` (which prints the README's
table). Seeded: the same call gives the same numbers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray
from scipy import stats as sps
from scipy.signal import lfilter

from cloudbench.analysis.confirm import evaluate_target
from cloudbench.analysis.convergence import convergence
from cloudbench.analysis.events import detect_pair_events, spike_size_interval, step_size_interval
from cloudbench.analysis.prediction import SLOPE_BOOT_SIZES, SLOPE_LEVEL, slope_bootstrap
from cloudbench.analysis.stats import fit_sqrt_law, quantile_ci_ranks
from cloudbench.analysis.throughput import capacity_lower_bound_95
from cloudbench.analysis.tokenbucket import Method, estimate_drain, estimate_refill

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Coverage:
    """How often an interval held the truth over simulated data sets."""

    interval: str
    nominal: float
    covered: int
    datasets: int
    seconds: float = 0.0
    note: str = ""
    median_width: float = math.nan  # of the interval, relative to the truth (where one applies)
    old_median_width: float = math.nan  # of the interval it replaced, on the same data

    @property
    def achieved(self) -> float:
        return self.covered / self.datasets if self.datasets else math.nan

    @property
    def se(self) -> float:
        """Binomial standard error of ``achieved`` at the nominal level."""
        return math.sqrt(self.nominal * (1.0 - self.nominal) / max(self.datasets, 1))


def _timed(fn: Callable[[], list[Coverage]]) -> list[Coverage]:
    t0 = time.perf_counter()
    out = fn()
    dt = (time.perf_counter() - t0) / max(len(out), 1)
    return [replace(c, seconds=dt) for c in out]


# ------------------------------------------------------------------ quantile CIs


def quantile_cis(datasets: int = 2000, seed: int = 0) -> list[Coverage]:
    """Exact order-statistic CIs (analysis.stats) of quantiles of a lognormal."""

    def run() -> list[Coverage]:
        rng = np.random.default_rng(seed)
        out = []
        for p, n in ((0.5, 12), (0.5, 100), (0.9, 60), (0.99, 500)):
            r = quantile_ci_ranks(n, p, 0.95)
            assert r is not None
            xs = np.sort(rng.lognormal(0.0, 1.0, (datasets, n)), axis=1)
            truth = math.exp(float(sps.norm.ppf(p)))
            ok = (xs[:, r.j - 1] <= truth) & (truth <= xs[:, r.k - 1])
            out.append(Coverage(f"quantile CI, p{p * 100:g}, n={n}", 0.95, int(ok.sum()), datasets,
                                note=f"exact level {r.coverage:.4f}"))
        return out

    return _timed(run)


# ------------------------------------------------------------- token-bucket drains


DRAIN_INTERVALS_S: tuple[float, ...] = (0.25, 0.5, 1.0)
DRAIN_NOISES: tuple[str, ...] = ("iid", "ar1")
DRAIN_QUANTITIES: tuple[str, ...] = ("high rate", "low rate", "time to empty", "budget", "refill")
FINE_S = 1e-3  # the fluid simulation's grid


def ar1_noise(rng: np.random.Generator, n: int, step: float, sd: float,
              corr_s: float) -> FloatArray:
    """A stationary Ornstein–Uhlenbeck process sampled every ``step`` s: SD ``sd``,
    correlation time ``corr_s`` (lag-k correlation exp(−k·step/corr_s)).

    It lives on the fine grid, not on the sampling intervals, so the correlation of
    interval means depends on the interval length, as it does for cross traffic or a
    scheduler: nothing here knows how the estimator cuts or models the series."""
    phi = math.exp(-step / corr_s)
    innov = rng.normal(0.0, sd * math.sqrt(1.0 - phi * phi), n)
    innov[0] = rng.normal(0.0, sd)
    # x_j = phi x_{j-1} + innov_j, as a linear filter
    return np.asarray(lfilter([1.0], [1.0, -phi], innov), dtype=np.float64)


def simulate_drain(rng: np.random.Generator, high: float, low: float, tokens: float, dt: float,
                   seconds: float, t_offset: float = 0.0, ramp_s: float = 0.3,
                   noise: float = 0.01, noise_kind: str = "iid",
                   corr_s: float = 0.5) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """A fluid token bucket on a 1 ms grid: a sender that ramps from half to the
    full high rate over ``ramp_s`` (slow start), the bucket refilling at ``low``;
    whole intervals of ``dt`` (``seconds`` rounded up to a whole number of them)
    with noise on the measured bytes and bytes spilled across interval edges.

    ``noise_kind="iid"``: each interval's bytes × N(1, ``noise``). ``"ar1"``: the
    rate × (1 + an Ornstein–Uhlenbeck process of SD 2 × ``noise`` and correlation
    time ``corr_s``) on the 1 ms grid, summed into the intervals. Returns starts,
    ends, bytes and the tokens left at the end."""
    n = max(1, math.ceil(seconds / dt - 1e-9))
    per = max(1, round(dt / FINE_S))
    t = np.arange(n * per) * (dt / per)
    step = dt / per
    send = high * np.minimum(1.0, 0.5 + 0.5 * t / ramp_s)
    left = tokens + low * t - np.cumsum(send) * step
    rate = np.where(left > 0, send, low)
    if noise_kind == "ar1":
        rate = rate * (1.0 + ar1_noise(rng, len(t), step, 2.0 * noise, corr_s))
        fluid = rate.reshape(n, per).sum(axis=1) * step
    elif noise_kind == "iid":
        fluid = rate.reshape(n, per).sum(axis=1) * step * rng.normal(1.0, noise, n)
    else:
        raise ValueError(f"noise_kind must be one of {DRAIN_NOISES}, not {noise_kind!r}")
    spill = rng.normal(0.0, noise, n + 1) * low * dt
    bits = fluid + spill[1:] - spill[:-1]
    t0 = np.asarray(t_offset + np.arange(n) * dt, dtype=np.float64)
    return t0, t0 + dt, np.asarray(np.maximum(bits, 0.0) / 8.0, dtype=np.float64), max(float(left[-1]), 0.0)


def drain_cell(dt: float, noise_kind: str, datasets: int = 1000, seed: int = 1,
               n_boot: int = 1000, method: Method = "t") -> list[Coverage]:
    """High and low rate, time to empty, budget and refill intervals
    (analysis.tokenbucket) against the simulated bucket, at one sampling interval
    ``dt`` and one noise kind. A data set whose drain gives no interval of a quantity
    is left out of the coverage and counted in the note (coverage is that of the
    intervals printed). ``median_width`` is relative to the truth. ``method="bootstrap"``
    runs the percentile-bootstrap intervals they replaced (what those missed)."""

    def run() -> list[Coverage]:
        rng = np.random.default_rng([seed, round(dt * 1000), DRAIN_NOISES.index(noise_kind)])
        hits = dict.fromkeys(DRAIN_QUANTITIES, 0)
        widths: dict[str, list[float]] = {q: [] for q in DRAIN_QUANTITIES}
        for i in range(datasets):
            high = rng.uniform(100e6, 400e6)
            low = high * rng.uniform(0.1, 0.45)
            tau = rng.uniform(1.5, 6.0)
            tokens = tau * (high - low)
            rest = rng.uniform(0.2, 0.8) * tokens / low
            a = simulate_drain(rng, high, low, tokens, dt, tau + 6.0, noise_kind=noise_kind)
            first = estimate_drain(a[0], a[1], a[2], window_intervals=max(1, round(2 / dt)),
                                   n_boot=n_boot, seed=i, method=method)
            # the second drain starts after the rest with what the bucket refilled
            start2 = float(a[1][-1]) + rest
            b = simulate_drain(rng, high, low, low * rest, dt, rest * low / (high - low) + 4.0,
                               t_offset=start2, noise_kind=noise_kind)
            second = estimate_refill(first, b[0], b[1], b[2], start2 - float(a[1][-1]),
                                     n_boot=n_boot, seed=i)
            for name, est, truth in (("high rate", first.high, high), ("low rate", first.low, low),
                                     ("time to empty", first.time_to_empty, tau),
                                     ("budget", first.budget, tokens),
                                     ("refill", second.refill, low)):
                if est is not None and math.isfinite(est.high - est.low):
                    hits[name] += est.low <= truth <= est.high
                    widths[name].append((est.high - est.low) / truth)
        out = []
        for q in DRAIN_QUANTITIES:
            w = float(np.median(widths[q])) if widths[q] else math.nan
            missing = datasets - len(widths[q])
            out.append(Coverage(f"drain: {q}, every {dt:g} s, {noise_kind}", 0.95, hits[q],
                                len(widths[q]), median_width=w,
                                note=f"{missing} of {datasets} without an interval" if missing
                                else ""))
        return out

    return _timed(run)


def drains(datasets: int = 1100, seed: int = 1, n_boot: int = 1000) -> list[Coverage]:
    """:func:`drain_cell` at every sampling interval and noise kind, each row with the
    median width and coverage of the replaced percentile-bootstrap intervals on the same data
    beside it.
    1,100 data sets a cell, so that at least 1,000 print each interval (up to 4 % of
    drains sampled every second have a single high interval and print none for it)."""
    out = []
    for dt in DRAIN_INTERVALS_S:
        for kind in DRAIN_NOISES:
            new = drain_cell(dt, kind, datasets, seed, n_boot)
            old = drain_cell(dt, kind, datasets, seed, n_boot, method="bootstrap")
            for c, o in zip(new, old, strict=True):
                note = f"old: {o.achieved:.1%}" + (f"; {c.note}" if c.note else "")
                out.append(replace(c, old_median_width=o.median_width, note=note))
    return out


# ------------------------------------------------------------------ event sizes


def event_sizes(datasets: int = 1000, seed: int = 2) -> list[Coverage]:
    """Spike and step size intervals (analysis.events) of simulated pairs, by the detector."""

    def run() -> list[Coverage]:
        rng = np.random.default_rng(seed)
        dt = 0.02
        t = np.arange(0.0, 20.0, dt)
        spike_hit = step_hit = spikes = steps = 0
        for _ in range(datasets):
            y = 8000.0 + rng.gamma(2.0, 60.0, len(t))
            spike = rng.uniform(2000.0, 20000.0)
            at = rng.uniform(3.0, 7.0)
            y[(t >= at) & (t < at + 0.3)] += spike
            step = rng.choice([-1.0, 1.0]) * rng.uniform(400.0, 2000.0)
            y[t >= rng.uniform(11.0, 15.0)] += step
            for e in detect_pair_events(t, y, dt, 1.0):
                if e.kind == "spike" and abs(e.time_s - at) < 0.1:
                    spikes += 1
                    spike_hit += e.size_low <= spike <= e.size_high
                elif e.kind == "step":
                    steps += 1
                    step_hit += e.size_low <= step <= e.size_high
        return [Coverage("spike size (median excess)", 0.95, spike_hit, spikes,
                         note=f"{spikes} of {datasets} spikes found"),
                Coverage("step size (10th percentiles)", 0.95, step_hit, steps,
                         note=f"{steps} of {datasets} steps found")]

    return _timed(run)


def event_size_intervals(datasets: int = 4000, seed: int = 3) -> list[Coverage]:
    """The size intervals alone, on i.i.d. samples with a known shift (no detection)."""

    def run() -> list[Coverage]:
        rng = np.random.default_rng(seed)
        step_hit = spike_hit = 0
        for _ in range(datasets):
            before = rng.gamma(2.0, 60.0, 300)
            shift = rng.uniform(-1000.0, 1000.0)
            after = rng.gamma(2.0, 60.0, 200) + shift
            lo, hi = step_size_interval(before, after)
            step_hit += lo <= shift <= hi
            inside = rng.standard_t(3, 15) * 200.0 + shift
            lo, hi = spike_size_interval(inside, rng.standard_t(3, 100) * 200.0)
            spike_hit += lo <= shift <= hi
        return [Coverage("step size interval alone", 0.95, step_hit, datasets),
                Coverage("spike size interval alone", 0.95, spike_hit, datasets)]

    return _timed(run)


# --------------------------------------------------------------------- capacity


def capacity(datasets: int = 2000, seed: int = 4,
             bound: Callable[..., float | None] = capacity_lower_bound_95) -> list[Coverage]:
    """The 95 % lower bound of UDP capacity (analysis.throughput) on a link at capacity.

    ``bound=capacity_lower_bound`` (the max of window means) shows what it replaces."""

    def run() -> list[Coverage]:
        rng = np.random.default_rng(seed)
        hit = 0
        cap = 100e6
        for _ in range(datasets):
            dt = float(rng.choice([0.5, 1.0]))
            n = round(20.0 / dt)
            spill = rng.normal(0.0, 0.02, n + 1) * cap * dt
            bits = cap * dt * rng.normal(1.0, 0.01, n) + spill[1:] - spill[:-1]
            t0 = np.arange(n) * dt
            b = bound(t0, t0 + dt, bits / 8.0)
            hit += b is not None and b <= cap
        return [Coverage(f"UDP capacity: {bound.__name__}", 0.95, hit, datasets,
                         note="one-sided: the bound is at or under the capacity")]

    return _timed(run)


# ------------------------------------------------------------ confirm predictions


def expected_n_needed(rel_error: float, mu: float, sigma: float, p: float = 0.5,
                      level: float = 0.95, n_max: int = 100_000) -> int:
    """The n at which the exact CI of the median of N(mu, sigma) is within ±e of it
    on average (order statistics by Blom's approximation)."""
    n = np.arange(6, n_max)
    q = mu + sigma * float(sps.norm.ppf(p))
    for m in n:
        r = quantile_ci_ranks(int(m), p, level)
        if r is None:
            continue
        lo = mu + sigma * sps.norm.ppf((r.j - 0.375) / (m + 0.25))
        hi = mu + sigma * sps.norm.ppf((r.k - 0.375) / (m + 0.25))
        if max(hi - q, q - lo) / q <= rel_error:
            return int(m)
    return n_max


def confirm_predictions(datasets: int = 1000, seed: int = 5, n: int = 40,
                        rel_error: float = 0.004) -> list[Coverage]:
    """The 95 % range of a confirm prediction (bootstrap) against the n really needed."""

    def run() -> list[Coverage]:
        rng = np.random.default_rng(seed)
        mu, sigma = 100.0, 5.0
        truth = expected_n_needed(rel_error, mu, sigma)
        data = rng.normal(mu, sigma, (datasets, n))
        curves = convergence(np.sort(data, axis=1), 0.5, 0.95, subsets=100, seed=seed)
        hit = 0
        for i, c in enumerate(curves):
            boot = slope_bootstrap(data[i], 0.5, 0.95, n_boot=30, subsets=50, seed=i)
            t = evaluate_target(c, n, rel_error, 0.5, 0.95, boot)
            pr = t.prediction
            if pr is None:
                continue
            hit += pr.n_low <= truth <= pr.n_high
        # whether a prediction is labelled reliable: bench/bench_confirm_reliable.py
        return [Coverage(f"confirm prediction range (n={n}, needed {truth})", 0.95, hit, datasets)]

    return _timed(run)


def confirm_slope_intervals(datasets: int = 1000, seed: int = 6, n: int = 60, n_boot: int = 50,
                            trials: int = 40) -> list[Coverage]:
    """The slope interval that decides a confirm prediction's ``reliable`` label.

    Truth: the mean free slope of the convergence curve over ``4 * datasets``
    independent i.i.d. normal samples of ``n`` (10 % CV), i.e. the value the
    slope of one sample estimates. Interval: :func:`slope_bootstrap`'s
    moving-block percentile interval at :data:`SLOPE_LEVEL` (here with
    ``n_boot`` resamples and ``trials`` subsets per size; ``confirm`` uses 200 and
    100). The note gives the interval's median width.
    """

    def slopes_of(data: FloatArray, rep_seed: int) -> FloatArray:
        curves = convergence(np.sort(data, axis=1), 0.5, 0.95, subsets=trials, seed=rep_seed,
                             max_sizes=SLOPE_BOOT_SIZES)
        fits = [fit_sqrt_law(c.sizes, c.relative_half_width) for c in curves]
        return np.array([f.slope if f else math.nan for f in fits])

    def run() -> list[Coverage]:
        rng = np.random.default_rng(seed)
        truth = float(np.nanmean(slopes_of(100.0 * (1 + 0.1 * rng.standard_normal((4 * datasets, n))),
                                           seed)))
        hit = 0
        widths = []
        for i in range(datasets):
            x = 100.0 * (1 + 0.1 * rng.standard_normal(n))
            lo, hi = slope_bootstrap(x, 0.5, 0.95, n_boot=n_boot, subsets=trials, seed=i,
                                     max_sizes=SLOPE_BOOT_SIZES).slope_interval()
            hit += lo <= truth <= hi
            widths.append(hi - lo)
        return [Coverage(f"confirm slope interval (n={n}, slope {truth:.3f})", SLOPE_LEVEL, hit,
                         datasets, note=f"median width {float(np.nanmedian(widths)):.3f}")]

    return _timed(run)


ALL: tuple[Callable[[], list[Coverage]], ...] = (
    quantile_cis, drains, event_sizes, event_size_intervals, capacity, confirm_predictions,
    confirm_slope_intervals)
