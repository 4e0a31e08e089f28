"""Simulated scheduled campaigns for the time-of-day analysis (tests and bench/bench_diurnal.py).

The generator does not share the estimator's model (:mod:`cloudbench.analysis.diurnal`
fits a sinusoid with AR(1) errors in run order to one value per run): here every
repetition's value is

    level + shared day effect + regime + slow drift (continuous time) + run effect
          + repetition noise [+ sine], rounded to 1 µs,

with

* a **per-run effect** shared by the run's 2–3 repetitions (t with 3 degrees of
  freedom, scaled to ``run_sd``): what makes repetitions of one run look alike;
* a **day-level effect** per calendar day (normal, ``day_sd``), common to every
  series of the campaign (the same cloud that day);
* **regime switches**: a two-state Markov chain over the runs (a busy spell lasting
  ``regime_runs`` runs on average, ``regime_shift`` higher), common to the campaign;
* a **slow component** in continuous time (an Ornstein–Uhlenbeck process of time
  constant ``tau_s`` sampled at the irregular run times, not an AR(1) in run order);
* **heavy-tailed repetition noise** (t with 3 degrees of freedom, ``rep_sd``) and a
  retransmission-timeout-like outlier in 1 % of repetitions (+``outlier``);
* **irregular times**: each run starts up to 10 minutes after its slot, repetitions 5
  minutes apart, 3 % of slots missed;
* optionally a true **sine** of period ``period_s`` (random phase per series) of
  ``amplitude`` × ``run_sd``.

Seeded: the same generator state gives the same campaign.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

MONDAY = 1764547200.0  # 2025-12-01T00:00:00Z, a Monday
DAY = 86400.0


@dataclass(frozen=True)
class CampaignModel:
    """The truth a simulated campaign is drawn from (values in µs)."""

    days: int = 7
    every_s: float = 3600.0
    reps: tuple[int, int] = (2, 3)  # repetitions per run, inclusive range
    level: float = 1000.0
    rep_sd: float = 20.0
    run_sd: float = 20.0  # the per-run effect: as large as the repetition noise
    day_sd: float = 10.0
    regime_shift: float = 20.0
    regime_runs: float = 12.0  # mean length of a regime, in runs
    slow_sd: float = 10.0
    tau_s: float = 3 * 3600.0
    outlier: float = 200.0
    outlier_rate: float = 0.01
    miss: float = 0.03
    amplitude: float = 0.0  # of a true sine, in units of run_sd
    period_s: float = DAY
    day_s: float = DAY  # the length of a (compressed) day
    start: float = MONDAY


@dataclass
class SimSeries:
    """One series: every repetition's value, its time (UTC epoch s) and its run's index."""

    t: NDArray[np.float64]
    values: NDArray[np.float64]
    run: NDArray[np.int64]


def _t3(rng: np.random.Generator, size: int | tuple[int, ...]) -> NDArray[np.float64]:
    return np.asarray(rng.standard_t(3, size), dtype=np.float64) / math.sqrt(3.0)  # unit SD


def simulate_campaign(rng: np.random.Generator, model: CampaignModel, series: int = 8) -> list[SimSeries]:
    """``series`` series measured by the same runs (one campaign): shared slots, day effects and
    regimes; each series its own run effects, slow component, noise and (random) sine phase."""
    slots = round(model.days * model.day_s / model.every_s)
    kept = np.flatnonzero(rng.random(slots) >= model.miss)
    starts = model.start + kept * model.every_s + rng.uniform(0, min(600.0, model.every_s / 6), kept.size)
    reps = rng.integers(model.reps[0], model.reps[1] + 1, kept.size)
    run = np.repeat(np.arange(kept.size), reps)
    within = np.concatenate([np.arange(r) for r in reps]) if kept.size else np.zeros(0)
    t = starts[run] + within * min(300.0, model.every_s / 12)
    days = np.floor((t - model.start) / model.day_s).astype(np.int64)
    day_eff = rng.normal(0, model.day_sd, model.days + 1)[np.minimum(days, model.days)]
    regime = np.zeros(kept.size)
    busy = rng.random() < 0.5
    for i in range(kept.size):
        if rng.random() < 1.0 / model.regime_runs:
            busy = not busy
        regime[i] = model.regime_shift if busy else 0.0
    out = []
    for _ in range(series):
        slow = np.empty(kept.size)
        x = rng.normal(0, model.slow_sd)
        for i in range(kept.size):  # Ornstein-Uhlenbeck at the run times
            if i:
                decay = math.exp(-(starts[i] - starts[i - 1]) / model.tau_s)
                x = decay * x + rng.normal(0, model.slow_sd * math.sqrt(1 - decay * decay))
            slow[i] = x
        run_eff = model.run_sd * _t3(rng, kept.size)
        noise = model.rep_sd * _t3(rng, t.size)
        noise += np.where(rng.random(t.size) < model.outlier_rate, model.outlier, 0.0)
        sine = model.amplitude * model.run_sd * np.sin(2 * np.pi * (t - rng.uniform(0, model.period_s))
                                                       / model.period_s)
        y = model.level + day_eff + regime[run] + slow[run] + run_eff[run] + noise + sine
        out.append(SimSeries(t, np.round(y), run))
    return out
