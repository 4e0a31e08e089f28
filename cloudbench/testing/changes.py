"""Flat and stepped series of run values for the change-point tests and bench/bench_changes.py.

The generators do not share the search's model (a mean shift in AR(1) noise): a week of
hourly runs (168 by default), each run reduced to its repetitions' median as the analysis
does, with one kind of trouble each:

* ``run_effects``: 2–3 repetitions per run sharing a per-run effect (no day effect: a new level each day is a change)
  (:func:`cloudbench.testing.adversarial.hourly_campaign`);
* ``ar1``: runs correlated over hours, AR(1) with φ = 0.6 across runs;
* ``heavy``: Student-t (3 degrees of freedom) run values, AR(1) φ = 0.3 innovations;
* ``diurnal``: a daily sine of 1.5 noise SDs with AR(1) φ = 0.3 noise and no change;
* ``slow_noise`` (:data:`LIMIT_KINDS`, a known limit): conditions that wander over hours (AR(1)
  φ = 0.6) under independent per-run noise of the same SD, an ARMA(1,1) that an autoregression
  of a week's runs under-fits.

:func:`stepped` adds a step of ``size`` (in µs) at a given run.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.diurnal import run_values
from cloudbench.testing.adversarial import MONDAY, ar1, hourly_campaign

FLAT_KINDS = ("run_effects", "ar1", "heavy", "diurnal")
LIMIT_KINDS = ("slow_noise",)
LEVEL = 1000.0  # µs
SD = 20.0  # µs, the run-to-run spread of every kind


def flat_runs(rng: np.random.Generator, kind: str, runs: int = 168
              ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(run times in UTC epoch seconds, one value per run) of a series without a change."""
    t = MONDAY + np.arange(runs) * 3600.0 + rng.uniform(0, 360.0, runs)
    if kind == "run_effects":
        days = -(-runs // 24)
        c = hourly_campaign(rng, 1, days=days, level=LEVEL, rep_sd=SD * 0.7, run_sd=SD * 0.7, day_sd=0.0)
        keep = c.present[0] & (c.run < runs)
        tt, y, _ = run_values(c.t[keep], c.values[0][keep], c.run[keep])
        return tt, y
    if kind == "ar1":
        return t, LEVEL + ar1(rng, (1, runs), 0.6, SD)[0]
    if kind == "heavy":
        return t, LEVEL + ar1(rng, (1, runs), 0.3, SD, df=3.0)[0]
    if kind == "diurnal":
        sine = 1.5 * SD * np.sin(2 * np.pi * t / 86400.0 + rng.uniform(0, 2 * np.pi))
        return t, LEVEL + sine + ar1(rng, (1, runs), 0.3, SD)[0]
    if kind == "slow_noise":
        return t, LEVEL + ar1(rng, (1, runs), 0.6, SD * 0.7)[0] + rng.normal(0.0, SD * 0.7, runs)
    raise ValueError(f"unknown kind {kind!r} (one of {', '.join(FLAT_KINDS + LIMIT_KINDS)})")


def stepped(rng: np.random.Generator, kind: str, size: float, at: int | None = None, runs: int = 168
            ) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    """A flat series of ``kind`` with ``size`` added from run ``at`` (default: half-way) on."""
    t, y = flat_runs(rng, kind, runs)
    k = y.size // 2 if at is None else at
    y = y.copy()
    y[k:] += size
    return t, y, k
