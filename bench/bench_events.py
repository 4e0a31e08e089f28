"""False alarms of the per-pair event detector on quiet simulated pairs.

The stated rate is **≤ 0.01 link events per series-hour** (a series is one ordered
pair). This bench runs :func:`cloudbench.analysis.events.detect_pair_events` with
its defaults on ≥ 300 series-hours of quiet pairs and prints the count, the rate
and its exact 95 % upper bound (Poisson, Garwood); it exits 1 when the bound is
over the stated rate. With no event in 300 series-hours the bound is 2.996 / 300
= 0.00999, so the full run must see none.

The generator shares nothing with the detector's model (a level plus independent
residuals measured by a MAD): each series has its own base RTT, a multiplicative
AR(1) jitter (φ 0.5–0.95) driven by heavy-tailed innovations (Student t, 3 df, or
lognormal), a slow swing of ±0.5 % (20 min period), retransmission-timeout
outliers (1 echo in 10,000 takes +200 ms; a third of them hold the next echo too,
+190 ms), and RTTs rounded to 1 µs. Scenarios (cycled): LAN 100 rounds/s at
60–150 µs, WAN 50 rounds/s at 5–50 ms. Each series lasts ``--minutes`` (default
10) and uses the report's default window for that duration (duration/10, at most
30 s).

A power check beside it: the same quiet series with one spike of +10 × the
series' p99 jitter for 0.5 s, whose share found is printed (the detector is not
quiet by being blind).

Run: ``.venv/bin/python bench/bench_events.py [--hours 300] [--minutes 10] [--seed 23] [--jobs 2]``
(about 2 minutes on a free core). The README quotes its output.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import signal
from scipy import stats as sps

from cloudbench.analysis.events import detect_pair_events
from cloudbench.workloads.echo.params import window_of

STATED_RATE = 0.01  # link events per series-hour (README, "Events on quiet links")
RTO_SHARE = 1e-4
RTO_S = 0.2


@dataclass(frozen=True)
class Scenario:
    name: str
    rate: float  # rounds per second
    base_us: tuple[float, float]  # range of the series' base RTT
    jitter: float  # scale of the multiplicative jitter (share of the base)
    phi: float  # AR(1) coefficient of the jitter
    tails: str  # "t3" or "lognormal" innovations


SCENARIOS = (
    Scenario("LAN, φ 0.5, t3", 100.0, (60.0, 150.0), 0.10, 0.5, "t3"),
    Scenario("LAN, φ 0.9, lognormal", 100.0, (60.0, 150.0), 0.10, 0.9, "lognormal"),
    Scenario("WAN, φ 0.8, t3", 50.0, (5_000.0, 50_000.0), 0.01, 0.8, "t3"),
    Scenario("WAN, φ 0.95, lognormal", 50.0, (5_000.0, 50_000.0), 0.01, 0.95, "lognormal"),
)


def quiet_series(sc: Scenario, seconds: float,
                 rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Send times (s) and RTTs (µs) of one quiet simulated pair (see the module docstring)."""
    n = int(seconds * sc.rate)
    t = np.arange(n) / sc.rate
    if sc.tails == "t3":
        eps = rng.standard_t(3, n) / math.sqrt(3.0)  # unit variance
    else:
        eps = rng.lognormal(0.0, 0.8, n)
        eps = (eps - eps.mean()) / eps.std()
    ar = signal.lfilter([math.sqrt(1.0 - sc.phi**2)], [1.0, -sc.phi], eps)
    base = rng.uniform(*sc.base_us)
    swing = 1.0 + 0.005 * np.sin(2 * math.pi * t / 1200.0 + rng.uniform(0, 2 * math.pi))
    # delay is added, never taken away: the jitter lifts the RTT above the path's floor
    y = base * swing * (1.0 + sc.jitter * np.log1p(np.exp(2.0 * ar)))
    rto = np.flatnonzero(rng.random(n) < RTO_SHARE)
    y[rto] += RTO_S * 1e6
    held = rto[(rng.random(len(rto)) < 1 / 3) & (rto + 1 < n)] + 1  # the echo behind it waits too
    y[held] += (RTO_S - 1.0 / sc.rate) * 1e6
    return t, np.round(y)


def upper95(k: int, hours: float) -> float:
    """Exact (Garwood) one-sided 95 % upper bound of a Poisson rate: k events in ``hours``."""
    return float(sps.chi2.ppf(0.95, 2 * (k + 1)) / 2.0 / hours)


def quiet_run(args: tuple[int, int, float, float]) -> tuple[str, list[tuple[Any, ...]]]:
    """Series ``i`` of the quiet runs (its own seed: the result does not depend on ``--jobs``):
    its scenario and its events."""
    seed, i, seconds, window = args
    sc = SCENARIOS[i % len(SCENARIOS)]
    t, y = quiet_series(sc, seconds, np.random.default_rng([seed, i]))
    return sc.name, [(i, sc.name, e.kind, round(e.time_s, 2), round(e.size, 1), e.samples, e.p_value)
                     for e in detect_pair_events(t, y, 1.0 / sc.rate, window)]


def power_run(args: tuple[int, int, float, float]) -> bool:
    """Series ``i`` of the power check: one 0.5 s spike of +10 × its p99 jitter; found?"""
    seed, i, seconds, window = args
    sc = SCENARIOS[i % len(SCENARIOS)]
    rng = np.random.default_rng([seed, 1 << 20, i])
    t, y = quiet_series(sc, seconds, rng)
    floor = float(np.median(y))
    p99 = float(np.percentile(np.abs(y - floor), 99))
    at = rng.uniform(0.2, 0.8) * seconds
    y[(t >= at) & (t < at + 0.5)] += 10.0 * p99
    return any(e.kind == "spike" and abs(e.time_s - at) <= 0.5
               for e in detect_pair_events(t, y, 1.0 / sc.rate, window))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=float, default=300.0, help="series-hours to simulate")
    ap.add_argument("--minutes", type=float, default=10.0, help="length of one series")
    ap.add_argument("--power", type=int, default=200, help="series with one injected spike")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--jobs", type=int, default=1, help="processes")
    a = ap.parse_args(argv)
    seconds = a.minutes * 60.0
    window = window_of({"duration": seconds, "window": None})
    n_series = math.ceil(a.hours * 60.0 / a.minutes)
    hours = n_series * seconds / 3600.0
    started = time.perf_counter()
    per: dict[str, list[int]] = {sc.name: [0, 0] for sc in SCENARIOS}  # series, events
    alarms: list[tuple[Any, ...]] = []
    with ProcessPoolExecutor(a.jobs) as pool:
        for name, evs in pool.map(quiet_run, [(a.seed, i, seconds, window) for i in range(n_series)],
                                  chunksize=8):
            per[name][0] += 1
            per[name][1] += len(evs)
            alarms += evs
        took = time.perf_counter() - started
        found = sum(pool.map(power_run, [(a.seed, i, seconds, window) for i in range(a.power)], chunksize=8))
    k = len(alarms)
    bound = upper95(k, hours)
    print(f"quiet pairs: {n_series} series of {a.minutes:g} min ({hours:.1f} series-hours), window "
          f"{window:g} s, in {took:.0f} s")
    for name, (ns, ne) in per.items():
        print(f"  {name}: {ns} series, {ne} events")
    for al in alarms:
        print("  event:", al)
    print(f"link events: {k} in {hours:.1f} series-hours = {k / hours:.4f} per series-hour; "
          f"95 % upper bound {bound:.4f} (stated ≤ {STATED_RATE:g})")
    if a.power:
        print(f"power: a 0.5 s spike of +10 × the p99 jitter found in {found} of {a.power} series")
    return 0 if bound <= STATED_RATE else 1


if __name__ == "__main__":
    sys.exit(main())
