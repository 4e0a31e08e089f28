"""The spec's ``wan:`` section and its semantics: link delays and their weather.

A spec's ``wan:`` joins the regions of the netns testbed by one emulated long-haul
link per pair of regions (how: :mod:`cloudbench.providers.netns.wan`).

Delay of a link (one-way, both directions): ``delay:`` if given, else the
geodesic distance between the regions' ``location`` at ``fibre_speed`` · c plus
``overhead``. Its weather, in seconds after the WAN came up (the *epoch*,
recorded in the cluster facts as CLOCK_MONOTONIC ns): ``steps`` (a new delay from
a time on), ``periodic`` (a sine added), ``spikes`` (extra delay for a while).
:func:`delay_at` is the reference of these semantics; both forwarders implement it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from cloudbench.core.geo import FIBRE_FRACTION, geodesic_m, propagation_s
from cloudbench.spec.fields import Duration, Model


class WanStep(Model):
    """From ``at`` on, the link's base one-way delay is ``delay``."""

    at: Duration
    delay: Duration


class WanPeriodic(Model):
    """``amplitude``·sin(2π(t − phase)/period) added to the one-way delay."""

    amplitude: Duration
    period: Duration = Field(gt=0)
    phase: Duration = 0.0


class WanSpike(Model):
    """``extra`` one-way delay while ``at`` ≤ t < ``at`` + ``duration``."""

    at: Duration
    duration: Duration = Field(gt=0)
    extra: Duration


class WanLinkModel(Model):
    """One region pair: its delay (else from the regions' locations) and weather."""

    between: tuple[str, str] = Field(description="the two regions the link joins")
    delay: Duration | None = Field(None, description="one-way delay (default: from locations)")
    ecmp: int | None = Field(None, ge=1, le=4, description="parallel branches (default: wan.ecmp)")
    hops: int | None = Field(None, ge=1, le=3, description="routers per branch (default: wan.hops)")
    steps: list[WanStep] = Field(default_factory=list)
    periodic: list[WanPeriodic] = Field(default_factory=list)
    spikes: list[WanSpike] = Field(default_factory=list)


class WanModel(Model):
    """Emulated wide-area links between the regions of the netns testbed."""

    fibre_speed: float = Field(FIBRE_FRACTION, gt=0, le=1,
                               description="speed of light in the links, as a fraction of c")
    overhead: Duration = Field(0.0, description="one-way delay added to distance-derived delays")
    ecmp: int = Field(1, ge=1, le=4, description="parallel per-flow branches of every link")
    hops: int = Field(1, ge=1, le=3, description="routers on each branch")
    forwarder: Literal["auto", "c", "python"] = Field(
        "auto", description="delay line: the C helper (built with gcc) or the Python fallback")
    realtime: bool = Field(False, description="run the C delay line with SCHED_FIFO (tighter timing)")
    links: list[WanLinkModel] = Field(default_factory=list,
                                      description="per region pair settings; other pairs use defaults")


@dataclass(frozen=True)
class WanLink:
    """One resolved region-pair link (delays in seconds, times after the epoch)."""

    a: str
    b: str
    delay_s: float
    origin: str  # "configured" or "geodesic"
    ecmp: int
    hops: int
    distance_m: float | None = None
    steps: tuple[tuple[float, float], ...] = ()  # (at, delay)
    periodic: tuple[tuple[float, float, float], ...] = ()  # (amplitude, period, phase)
    spikes: tuple[tuple[float, float, float], ...] = ()  # (at, duration, extra)


def delay_at(link: WanLink, t: float) -> float:
    """One-way delay of ``link`` for a packet arriving ``t`` seconds after the epoch."""
    v = link.delay_s
    best = -math.inf
    for at, d in link.steps:
        if at <= t and at >= best:
            best, v = at, d
    for amp, period, phase in link.periodic:
        v += amp * math.sin(2.0 * math.pi * (t - phase) / period)
    for at, dur, extra in link.spikes:
        if at <= t < at + dur:
            v += extra
    return max(v, 0.0)


def resolve_links(wan: WanModel, regions: list[str],
                  coords: dict[str, tuple[float, float]]) -> list[WanLink]:
    """Every pair of ``regions`` as a link, with its delay and weather resolved."""
    by_pair = {frozenset(lm.between): lm for lm in wan.links}
    out: list[WanLink] = []
    for i, a in enumerate(regions):
        for b in regions[i + 1:]:
            lm = by_pair.get(frozenset((a, b)))
            dist = geodesic_m(coords[a], coords[b]) if a in coords and b in coords else None
            if lm is not None and lm.delay is not None:
                delay, origin = lm.delay, "configured"
            elif dist is not None:
                delay, origin = propagation_s(dist, wan.fibre_speed) + wan.overhead, "geodesic"
            else:
                raise ValueError(f"no delay for the link {a} ↔ {b}: give it a `delay` under "
                                 "wan.links or a `location` to both regions")
            out.append(WanLink(
                a, b, delay, origin,
                ecmp=(lm.ecmp if lm is not None and lm.ecmp is not None else wan.ecmp),
                hops=(lm.hops if lm is not None and lm.hops is not None else wan.hops),
                distance_m=dist,
                steps=tuple((s.at, s.delay) for s in lm.steps) if lm else (),
                periodic=tuple((p.amplitude, p.period, p.phase) for p in lm.periodic) if lm else (),
                spikes=tuple((s.at, s.duration, s.extra) for s in lm.spikes) if lm else (),
            ))
    return out
