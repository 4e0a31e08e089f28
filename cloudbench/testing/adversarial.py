"""Data that break the estimators' assumptions, for the adversarial coverage suite.

Written apart from the estimators: these generators know nothing of how
cloudbench computes an interval or a p-value, only of how real measurements
misbehave. Each draws many data sets in one call (vectorised over a leading
``datasets`` axis) from a seeded :class:`numpy.random.Generator` and returns the
truth next to the data, so that coverage and false-alarm rates are one
comparison each (:mod:`cloudbench.testing.adversarial_suite` holds the harness).

What they put in, none of it in the estimators' models:

* **per-run random effects** — repetitions of one run share its conditions
  (host placement, neighbours), so they are not independent draws
  (:func:`hourly_campaign`, :func:`repetitions` ``"run_effects"``);
* **day-level effects** — every run of one calendar day shares a level;
* **regime switches** — a Markov chain between two levels (30 % apart), or the
  series' halves at different levels;
* **AR(1)** — repetitions, jitter or byte-count noise correlated with the
  previous one (:func:`ar1`);
* **drift** — a level falling by a share per repetition;
* **heavy tails with retransmission-timeout outliers** — Student-t jitter and
  1 echo in 10,000 delayed by +200 ms (:func:`rtt_series`, :func:`window_stats`);
* **slow drift of a link's RTT** — a linear ramp, a random walk or a slow sine of the
  level under the quiet jitter, with no step (:func:`rtt_drift`);
* **route flapping** — a link switching between two RTT levels as a Markov chain with
  exponential sojourns of seconds (a bimodal jitter) or minutes (real level changes)
  (:func:`rtt_regimes`);
* **coarse sampling** — drain byte counters read every 0.25, 0.5 or 1 s, the
  reading time jittered (bytes cross interval edges) and the last interval
  partial, holding only the data of its own length (:func:`drain_counters`);
* **values rounded to 1 µs** as the echo worker stores them (:func:`round_us`).

Nothing in the package imports this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, signal
from scipy import stats as sps

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

RTO_RATE = 1e-4  # one echo in 10,000 ...
RTO_US = 200_000.0  # ... waits for a 200 ms retransmission timeout (Linux's minimum RTO)


def round_us(x: FloatArray) -> FloatArray:
    """Values in µs rounded to whole µs, as the echo worker stores them."""
    return np.asarray(np.round(x), dtype=np.float64)


def ar1(rng: np.random.Generator, shape: tuple[int, ...], phi: float, sd: float = 1.0,
        df: float | None = None) -> FloatArray:
    """Stationary AR(1) noise along the last axis, marginal SD ``sd``.

    ``x[t] = phi·x[t-1] + e[t]``; the first value is drawn from the stationary
    distribution (no burn-in). ``df``: Student-t innovations with ``df`` degrees
    of freedom (scaled to unit variance; needs df > 2) instead of normal ones.
    """
    if not -1.0 < phi < 1.0:
        raise ValueError(f"phi must be in (-1, 1), got {phi}")
    e = rng.standard_normal(shape) if df is None else rng.standard_t(df, shape) / math.sqrt(df / (df - 2.0))
    innov = math.sqrt(1.0 - phi * phi)
    e[..., 1:] *= innov  # the first is already stationary (variance 1)
    x = signal.lfilter([1.0], [1.0, -phi], e, axis=-1)
    return np.asarray(x * sd, dtype=np.float64)


# --------------------------------------------------------------- repetitions


RepetitionKind = Literal["iid", "heavy", "run_effects", "two_regimes", "halves", "drift", "ar1"]
REPETITION_KINDS: tuple[RepetitionKind, ...] = ("iid", "heavy", "run_effects", "two_regimes", "halves",
                                                "drift", "ar1")


@dataclass(frozen=True)
class Repetitions:
    """``values[d, i]``: repetition i of data set d, in run order; ``median[d]`` the true
    median of the distribution a repetition is drawn from (NaN under drift: no single one)."""

    kind: RepetitionKind
    values: FloatArray
    median: FloatArray


def _mixture_median(mu: tuple[float, float], sd: tuple[float, float], w: float) -> float:
    def cdf(x: float) -> float:
        return float(w * sps.norm.cdf(x, mu[0], sd[0]) + (1 - w) * sps.norm.cdf(x, mu[1], sd[1]))

    return float(optimize.brentq(lambda x: cdf(x) - 0.5, mu[0] - 10 * sd[0], mu[1] + 10 * sd[1]))


def repetitions(rng: np.random.Generator, datasets: int, n: int, kind: RepetitionKind, *,
                level: float = 100.0, cv: float = 0.1, run_size: int = 3, regime_gap: float = 0.3,
                stay: float = 0.9, drift: float = -0.01, phi: float = 0.9) -> Repetitions:
    """One summary value per repetition (e.g. a p50 RTT), ``datasets`` series of ``n``.

    ``iid``: normal, SD ``cv``·level (the estimators' own assumption: the control).
    ``heavy``: Student-t with 3 degrees of freedom, same SD.
    ``run_effects``: runs of ``run_size`` repetitions share a normal run effect as
    large as the repetition noise (each SD ``cv``·level/√2).
    ``two_regimes``: a Markov chain that stays in its regime with probability
    ``stay``, the second level ``regime_gap`` higher (and its noise as much wider).
    ``halves``: the first half at ``level``, the second ``regime_gap`` higher.
    ``drift``: the level falls by ``drift`` (a share) per repetition.
    ``ar1``: stationary AR(1) repetitions with coefficient ``phi``.
    """
    sd = cv * level
    med = np.full(datasets, level)
    if kind == "iid":
        x = level + sd * rng.standard_normal((datasets, n))
    elif kind == "heavy":
        x = level + sd * rng.standard_t(3, (datasets, n)) / math.sqrt(3.0)
    elif kind == "run_effects":
        runs = -(-n // run_size)
        eff = np.repeat(rng.standard_normal((datasets, runs)), run_size, axis=1)[:, :n]
        x = level + sd / math.sqrt(2.0) * (eff + rng.standard_normal((datasets, n)))
    elif kind in ("two_regimes", "halves"):
        hi = level * (1.0 + regime_gap)
        if kind == "halves":
            state = np.broadcast_to(np.arange(n) >= n // 2, (datasets, n))
            w = 1.0 - (n - n // 2) / n
        else:
            flips = rng.random((datasets, n)) > stay
            flips[:, 0] = rng.random(datasets) < 0.5  # start in either regime (stationary: 1/2 each)
            state = np.cumsum(flips, axis=1) % 2 == 1
            w = 0.5
        x = np.where(state, hi + sd * (1.0 + regime_gap) * rng.standard_normal((datasets, n)),
                     level + sd * rng.standard_normal((datasets, n)))
        med[:] = _mixture_median((level, hi), (sd, sd * (1.0 + regime_gap)), w)
    elif kind == "drift":
        x = level * (1.0 + drift) ** np.arange(n) + sd * rng.standard_normal((datasets, n))
        med[:] = math.nan
    elif kind == "ar1":
        x = level + ar1(rng, (datasets, n), phi, sd)
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return Repetitions(kind, np.asarray(x, dtype=np.float64), med)


# ------------------------------------------------------------ a week of runs


@dataclass(frozen=True)
class Campaign:
    """Hourly runs of a scheduled campaign, every repetition's value of ``datasets`` series.

    Flat arrays over the repetitions of all runs (the same times for every series):
    ``t`` UTC epoch seconds of each repetition, ``run`` and ``day`` its run's and
    calendar day's index, ``values[d, i]`` repetition i of series d. ``present[d, i]``
    is False for a third repetition a run did not have (runs have 2–3 repetitions)."""

    t: FloatArray
    run: IntArray
    day: IntArray
    values: FloatArray
    present: BoolArray
    period_s: float
    amplitude: float


# 2024-01-01 00:00 UTC was a Monday: campaigns start there, so weekday = day % 7.
MONDAY = 1_704_067_200.0


def hourly_campaign(rng: np.random.Generator, datasets: int, *, days: int = 7, runs_per_day: int = 24,
                    reps: tuple[int, int] = (2, 3), rep_gap_s: float = 120.0, level: float = 100.0,
                    rep_sd: float = 5.0, run_sd: float = 5.0, day_sd: float = 0.0, amplitude: float = 0.0,
                    period_s: float = 86400.0, phase: float | None = None, start: float = MONDAY,
                    start_jitter: float = 0.1) -> Campaign:
    """A campaign of ``days`` × ``runs_per_day`` runs, each with 2–3 repetitions ``rep_gap_s``
    apart, and ``datasets`` independent series measured in them.

    Value = level + day effect (SD ``day_sd``) + run effect (SD ``run_sd``) +
    repetition noise (SD ``rep_sd``) + ``amplitude``·sin(2π(t − phase)/``period_s``),
    phase uniform per series when not given. With ``amplitude = 0`` there is no
    time-of-day effect: any test for one is under its null. Runs start at ``start``
    (UTC epoch s; default a Monday 00:00), one every ``86400/runs_per_day`` s, each up to
    ``start_jitter`` of that gap late."""
    n_runs = days * runs_per_day
    starts = start + np.arange(n_runs) * (days * 86400.0 / n_runs)
    # a scheduler's start jitter: up to ``start_jitter`` of the gap between runs
    starts = starts + rng.uniform(0.0, start_jitter * 86400.0 / runs_per_day, n_runs)
    m = reps[1]
    t = (starts[:, None] + rep_gap_s * np.arange(m)[None, :]).ravel()
    run = np.repeat(np.arange(n_runs), m)
    day = (np.floor(t / 86400.0) - math.floor(start / 86400.0)).astype(np.int64)  # UTC calendar days
    k = rng.integers(reps[0], reps[1] + 1, (datasets, n_runs))
    present = (np.arange(m)[None, None, :] < k[:, :, None]).reshape(datasets, -1)
    ph = rng.uniform(0.0, period_s, (datasets, 1)) if phase is None else np.full((datasets, 1), phase)
    y = (level
         + day_sd * rng.standard_normal((datasets, int(day.max()) + 1))[:, day]
         + run_sd * rng.standard_normal((datasets, n_runs))[:, run]
         + rep_sd * rng.standard_normal((datasets, t.size))
         + amplitude * np.sin(2.0 * np.pi * (t[None, :] - ph) / period_s))
    return Campaign(t, run, day, np.asarray(y, dtype=np.float64), present, period_s, amplitude)


# ----------------------------------------------------------------- raw RTTs


def rtt_series(rng: np.random.Generator, datasets: int, seconds: float, rate_hz: float, *,
               base_us: float = 100.0, jitter_us: float = 5.0, phi: float = 0.5, df: float = 4.0,
               rto_rate: float = RTO_RATE, rto_us: float = RTO_US) -> tuple[FloatArray, FloatArray]:
    """Quiet links: ``datasets`` series of raw echo RTTs (µs) at ``rate_hz`` for ``seconds``.

    No event at all: base + |AR(1)| jitter with Student-t innovations (queueing only
    adds delay), one echo in ``1/rto_rate`` held for a retransmission timeout, rounded
    to 1 µs. Returns send times in s (shared) and RTTs ``(datasets, n)``."""
    n = round(seconds * rate_hz)
    t = np.arange(n) / rate_hz
    jit = np.abs(ar1(rng, (datasets, n), phi, jitter_us, df=df))
    y = base_us + jit
    y += np.where(rng.random((datasets, n)) < rto_rate, rto_us, 0.0)
    return t, round_us(y)


DriftKind = Literal["ramp", "walk", "sine"]


def drift_level(rng: np.random.Generator, datasets: int, t: FloatArray, kind: DriftKind, *,
                ramp_us: tuple[float, float] = (10.0, 50.0), walk_us: float = 10.0, walk_s: float = 600.0,
                sine_us: float = 50.0, period_s: float = 4 * 3600.0) -> FloatArray:
    """A slowly moving RTT level ``(datasets, len(t))`` in µs, 0 at the series' start, no step.

    ``ramp``: a straight line over the series to a total change uniform in ``ramp_us``,
    up or down at random. ``walk``: Brownian motion (Gaussian increments per round) whose
    SD after ``walk_s`` seconds is ``walk_us``. ``sine``: ``sine_us``·sin(2π t/``period_s``
    + phase) minus its start value, the phase uniform per series (a time-of-day swing
    seen through a window of it)."""
    span = float(t[-1] - t[0]) if len(t) > 1 else 1.0
    u = (t - t[0])[None, :]
    if kind == "ramp":
        total = rng.uniform(*ramp_us, (datasets, 1)) * rng.choice([-1.0, 1.0], (datasets, 1))
        return np.asarray(total * u / span, dtype=np.float64)
    if kind == "walk":
        dt = np.diff(t, prepend=t[0])
        steps = rng.standard_normal((datasets, len(t))) * (walk_us * np.sqrt(dt / walk_s))[None, :]
        return np.asarray(np.cumsum(steps, axis=1), dtype=np.float64)
    if kind == "sine":
        ph = rng.uniform(0.0, 2.0 * np.pi, (datasets, 1))
        return np.asarray(sine_us * (np.sin(2.0 * np.pi * u / period_s + ph) - np.sin(ph)), dtype=np.float64)
    raise ValueError(f"unknown drift kind {kind!r}")


def rtt_drift(rng: np.random.Generator, datasets: int, seconds: float, rate_hz: float, kind: DriftKind, *,
              base_us: float = 70_000.0, **level_kw: Any) -> tuple[FloatArray, FloatArray]:
    """Quiet links whose level drifts: :func:`rtt_series` (its jitter and RTO outliers)
    plus :func:`drift_level` of ``kind`` (keywords ``level_kw``), rounded to 1 µs."""
    t, y = rtt_series(rng, datasets, seconds, rate_hz, base_us=base_us)
    return t, round_us(y + drift_level(rng, datasets, t, kind, **level_kw))


def markov_states(rng: np.random.Generator, datasets: int, t: FloatArray, sojourn_s: float) -> BoolArray:
    """Two-state Markov chains sampled at times ``t`` (``(datasets, len(t))``, True: the
    second state): exponential sojourns of mean ``sojourn_s`` in either state (a switch
    between two rounds with probability 1 − exp(−Δt/``sojourn_s``)), the first state
    either with probability 1/2 (stationary)."""
    dt = np.diff(t)
    p = -np.expm1(-dt / sojourn_s)
    flips = np.empty((datasets, len(t)), dtype=bool)
    flips[:, 0] = rng.random(datasets) < 0.5
    flips[:, 1:] = rng.random((datasets, len(t) - 1)) < p[None, :]
    return np.asarray(np.cumsum(flips, axis=1) % 2 == 1)


def rtt_regimes(rng: np.random.Generator, datasets: int, seconds: float, rate_hz: float, *,
                gap_us: float = 40.0, sojourn_s: float = 2.0,
                base_us: float = 70_000.0) -> tuple[FloatArray, FloatArray, BoolArray]:
    """A route flapping between two paths ``gap_us`` apart: :func:`rtt_series` (its jitter
    and RTO outliers) plus ``gap_us`` while :func:`markov_states` (mean sojourn
    ``sojourn_s`` in each) is in its second state, rounded to 1 µs. Sojourns of seconds are
    a bimodal jitter with no sustained change; sojourns of minutes are real level changes.
    Returns send times (s), RTTs ``(datasets, n)`` and the states."""
    t, y = rtt_series(rng, datasets, seconds, rate_hz, base_us=base_us)
    state = markov_states(rng, datasets, t, sojourn_s)
    return t, round_us(y + gap_us * state), state


def window_stats(rng: np.random.Generator, datasets: int, windows: int, per_window: int, *,
                 base_us: float = 100.0, jitter_us: float = 5.0, phi: float = 0.5, df: float = 4.0,
                 rto_rate: float = RTO_RATE, rto_us: float = RTO_US,
                 step_us: float = 0.0) -> tuple[FloatArray, FloatArray]:
    """Window means and medians ``(datasets, windows)`` of quiet echo series as
    :func:`rtt_series` (``per_window`` echoes per window); ``step_us`` added from the
    middle window on (0: no shift, the null)."""
    _t, y = rtt_series(rng, datasets, windows * per_window, 1.0, base_us=base_us, jitter_us=jitter_us,
                      phi=phi, df=df, rto_rate=rto_rate, rto_us=rto_us)
    y = y.reshape(datasets, windows, per_window)
    if step_us:
        y[:, windows // 2:, :] += step_us
    return np.asarray(y.mean(axis=2)), np.asarray(np.median(y, axis=2))


# --------------------------------------------------------------- bucket drains


@dataclass(frozen=True)
class Drain:
    """One simulated drain: interval starts, ends (s) and bytes, read from a counter;
    ``empty_s`` when the bucket ran dry (s after ``t_start[0]``), ``tokens_left`` at the end."""

    t_start: FloatArray
    t_end: FloatArray
    nbytes: FloatArray
    empty_s: float
    tokens_left: float


def drain_counters(rng: np.random.Generator, high: FloatArray, low: FloatArray, tokens: FloatArray,
                   seconds: FloatArray, dt: float, *, noise: Literal["iid", "ar1"] = "iid",
                   rate_cv: float = 0.01, phi: float = 0.7, read_jitter: float = 0.01,
                   ramp_s: float = 0.3, t_offset: FloatArray | None = None,
                   step: float = 1e-3) -> list[Drain]:
    """Token-bucket drains of several buckets at once, read every ``dt`` seconds.

    A fluid bucket on a ``step`` grid (bit/s and bits): the sender ramps from half
    to the full ``high`` over ``ramp_s`` (slow start); while tokens last it sends at
    its own rate, then at ``low``; tokens refill at ``low``. The rate carries
    multiplicative noise per ``step`` whose per-interval mean has CV ``rate_cv``
    (``ar1``: AR(1) over intervals with ``phi``). The counter is read at ``dt``
    multiples, each read late by a normal time error of ``read_jitter``·``dt`` (its
    bytes land in the next interval: the cumulative count's noise). The series ends
    at ``seconds`` (not a multiple of ``dt``): the last interval is partial and
    holds only the data of its own length.
    """
    k = len(high)
    t_max = float(np.max(seconds))
    grid = np.arange(0.0, t_max + dt + step / 2, step)
    send = high[:, None] * np.minimum(1.0, 0.5 + 0.5 * grid[None, :] / ramp_s)
    # tokens: the sender uses its own rate while the bucket holds any
    left = tokens[:, None] + low[:, None] * grid[None, :] - np.cumsum(send, axis=1) * step
    rate = np.where(left > 0, send, low[:, None])
    n_int = math.ceil(t_max / dt) + 1
    if noise == "ar1":
        mult = 1.0 + ar1(rng, (k, n_int), phi, rate_cv)
    else:
        mult = 1.0 + rate_cv * rng.standard_normal((k, n_int))
    idx = np.minimum((grid / dt).astype(np.int64), n_int - 1)
    rate = rate * mult[:, idx]
    cum = np.concatenate([np.zeros((k, 1)), np.cumsum(rate, axis=1) * step], axis=1)  # bits at grid edges
    edges = np.concatenate([grid, [grid[-1] + step]])
    empty = np.argmax(left <= 0, axis=1)
    out = []
    for i in range(k):
        end = float(seconds[i])
        reads = np.arange(0.0, end, dt)[1:]
        reads = np.concatenate([[0.0], reads, [end]])
        # the counter is read a little late: by up to a few ms at random
        late = np.clip(rng.normal(0.0, read_jitter * dt, len(reads)), 0.0, None)
        late[0] = 0.0
        late[-1] = 0.0
        c = np.interp(reads + late, edges, cum[i])
        nb = np.maximum(np.diff(c), 0.0) / 8.0
        off = 0.0 if t_offset is None else float(t_offset[i])
        t0 = off + reads[:-1]
        t1 = off + reads[1:]
        e = float(grid[empty[i]]) if left[i, empty[i]] <= 0 else math.inf
        left_end = float(np.interp(end, grid, left[i]))
        out.append(Drain(np.asarray(t0), np.asarray(t1), np.asarray(nb), e, max(left_end, 0.0)))
    return out
