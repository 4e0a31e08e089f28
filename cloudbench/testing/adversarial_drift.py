"""The per-pair event detector on quiet links that are not flat: false link steps when the
level drifts (a ramp, a random walk, a slow sine) or the route flaps between two paths, and the
share of real route changes found (suites ``drift`` and ``drift-hour``, registered in
:mod:`cloudbench.testing.adversarial_suite`; generators in :mod:`cloudbench.testing.adversarial`,
written apart from the detector). The detector is reached through
``adversarial_rows.adapt_pair_events``, as every events row reaches it."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from cloudbench.testing import adversarial as gen
from cloudbench.testing import adversarial_rows as rows

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class LinkDrift:
    """How much a quiet-but-not-flat link of one base RTT moves (µs): the amounts of its drift
    rows (keywords of :func:`cloudbench.testing.adversarial.drift_level` per kind) and its
    flapping route's second path."""

    name: str
    base_us: float
    drifts: dict[gen.DriftKind, tuple[str, dict[str, Any]]]
    gap_us: float = 40.0


LINKS: tuple[LinkDrift, ...] = (
    # a cross-region path: its level moves by tens of µs
    LinkDrift("base 70 ms", 70_000.0, {
        "ramp": ("linear ramp of ±10-50 µs over the series", {"ramp_us": (10.0, 50.0)}),
        "walk": ("random walk, SD 10 µs per 10 min", {"walk_us": 10.0, "walk_s": 600.0}),
        "sine": ("sine of amplitude 50 µs, period 4 h, random phase", {"sine_us": 50.0, "period_s": 4 * 3600.0}),
    }),
    # one zone (the quiet row's base): a few µs
    LinkDrift("base 100 µs", 100.0, {
        "ramp": ("linear ramp of ±5-20 µs over the series", {"ramp_us": (5.0, 20.0)}),
        "walk": ("random walk, SD 5 µs per 10 min", {"walk_us": 5.0, "walk_s": 600.0}),
        "sine": ("sine of amplitude 10 µs, period 4 h, random phase", {"sine_us": 10.0, "period_s": 4 * 3600.0}),
    }),
)


def _route_changes(t: FloatArray, state: NDArray[np.bool_],
                   window_s: float) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
    """A series' switches of state: times, signs, and whether each is a clean one to find
    (at least two windows in the old and the new state, and from the series' ends)."""
    at = np.flatnonzero(np.diff(state.astype(np.int8)) != 0) + 1
    times = t[at]
    signs = np.where(state[at], 1.0, -1.0)
    edges = np.concatenate([[t[0]], times, [t[-1]]])
    clean = (np.diff(edges)[:-1] >= 2 * window_s) & (np.diff(edges)[1:] >= 2 * window_s)
    return times, signs, clean


def drift_rows(scale: float = 1.0, seed: int = 17, hours: float = 1000.0, hz: float = 10.0,
               series_s: float = 600.0, sojourns: Sequence[float] = (2.0, 10.0),
               long_sojourn_s: float | None = 300.0, links: Sequence[LinkDrift] = LINKS) -> list[rows.Row]:
    """False link steps on quiet links that are not flat (the quiet row's jitter and RTO
    outliers, at each of ``links``' base RTTs): the level drifts (a ramp, a random walk, a slow
    sine: no step), or the route flaps between two paths ``gap_us`` apart with Markov sojourns
    of ``sojourns`` seconds (a bimodal jitter, no sustained change). Each rate over ``hours``
    series-hours (not scaled, as the quiet row) of series of ``series_s`` at ``hz`` rounds/s.
    Flapping with sojourns of ``long_sojourn_s`` is a real level change: its row is the share
    of clean route changes found as a step (power), on ``1000 × scale`` series (None: no such row)."""
    rng = np.random.default_rng(seed)
    out = []
    n_series = math.ceil(hours * 3600.0 / series_s)
    h = n_series * series_s / 3600.0
    w = rows.default_window_s(series_s)
    for link in links:
        tail = f"{link.name}, AR(1) t4 jitter + RTO, {hz:g} rounds/s, {w:g} s window"
        for kind, (desc, kw) in link.drifts.items():
            drifting = functools.partial(gen.rtt_drift, rng, seconds=series_s, rate_hz=hz, kind=kind,
                                         base_us=link.base_us, **kw)
            out.append(_rate_row(f"drift: {desc}, {tail}", *rows.link_event_counts(drifting, n_series, hz, w)[:2], h))
        flap = f"route flapping +0/+{link.gap_us:g} µs, Markov, mean sojourn"
        for soj in sojourns:
            def flapping(k: int, soj: float = soj, link: LinkDrift = link) -> tuple[FloatArray, FloatArray]:
                return gen.rtt_regimes(rng, k, series_s, hz, gap_us=link.gap_us, sojourn_s=soj,
                                       base_us=link.base_us)[:2]

            counts = rows.link_event_counts(flapping, n_series, hz, w)
            out.append(_rate_row(f"{flap} {soj:g} s, {tail}", *counts[:2], h))
        if long_sojourn_s is not None:
            m = rows.n_of(1000, scale)
            found, clean_n, stray = _changes_found(rng, link, m, series_s, hz, long_sojourn_s, w)
            out.append(rows.Row(
                "events: route change found as a step", f"{flap} {long_sojourn_s:g} s, {tail}", "power", 0.8,
                found, clean_n, unit="windows",
                note=f"{found} of {clean_n} clean changes (≥ 2 windows each side) found within a window, "
                     f"right sign; {stray} steps near no change in {m} series of {series_s:g} s"))
    return out


def _rate_row(generator: str, spikes: int, steps: int, hours: float) -> rows.Row:
    return rows.Row("events: link steps per series-hour", generator, "rate", 0.01, steps, hours, unit="windows",
                     note=f"{steps} steps ({spikes} spikes) in {hours:.0f} series-hours; "
                          "pass: 95 % upper bound ≤ 0.01")


def _changes_found(rng: np.random.Generator, link: LinkDrift, m: int, series_s: float, hz: float,
                   sojourn_s: float, w: float) -> tuple[int, int, int]:
    """Route changes (sojourns of ``sojourn_s``) on ``m`` series: the clean ones found as a step of
    the right sign within a window, the clean ones, and the steps near no change."""
    found = clean_n = stray = 0
    for start in range(0, m, 50):
        t, y, state = gen.rtt_regimes(rng, min(50, m - start), series_s, hz, gap_us=link.gap_us,
                                      sojourn_s=sojourn_s, base_us=link.base_us)
        for v, s in zip(y, state, strict=True):
            times, signs, clean = _route_changes(t, s, w)
            steps = [e for e in rows.adapt_pair_events(t, v, 1.0 / hz, w)
                     if e.origin == "link" and e.kind == "step"]
            near = np.array([[abs(e.time_s - tc) <= w and np.sign(e.size) == sg
                              for tc, sg in zip(times, signs, strict=True)] for e in steps],
                            dtype=bool).reshape(len(steps), len(times))
            clean_n += int(clean.sum())
            found += int((near.any(axis=0) & clean).sum())
            stray += int((~near.any(axis=1)).sum())
    return found, clean_n, stray


def drift_hour_rows(scale: float = 1.0, seed: int = 18) -> list[rows.Row]:
    """:func:`drift_rows` on hour-long series at 1 round/s, where a walk or a slow sine moves
    further than in 10 min: 300 series-hours (the fewest that can show 0.01; the detector takes
    about 0.4 s an hour-long drifting series) on the 100 µs link only (at 70 ms, ``min_rel``
    hides every change of these sizes)."""
    return drift_rows(scale=scale, seed=seed, hours=300.0, hz=1.0, series_s=3600.0, links=LINKS[1:])
