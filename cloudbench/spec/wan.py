"""The spec's ``wan:`` section and its semantics: link delays and their weather.

A spec's ``wan:`` joins the regions of the netns testbed by one emulated long-haul
link per pair of regions (how: :mod:`cloudbench.providers.netns.wan`).

Delay of a link (one-way, both directions): ``delay:`` if given, else the
geodesic distance between the regions' ``location`` at ``fibre_speed`` · c plus
``overhead``. Its weather, in seconds after the WAN came up (the *epoch*,
recorded in the cluster facts as CLOCK_MONOTONIC ns): ``steps`` (a new delay from
a time on), ``periodic`` (a sine added), ``spikes`` (extra delay for a while).
An item with ``anchor: utc`` counts its times (``at``, ``phase``) from the UTC
epoch (1970-01-01T00:00:00Z) instead, so successive testbeds of a scheduled
campaign — fresh hosts every run — see one continuous day rather than a day that
restarts with every run. :func:`delay_at` is the reference of these semantics; both
forwarders implement it (anchored items are turned into times after the WAN's epoch
when the delay line starts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from cloudbench.core.geo import FIBRE_FRACTION, geodesic_m, propagation_s
from cloudbench.spec.fields import Duration, Model

Anchor = Literal["wan", "utc"]
_ANCHOR_DOC = "times count from the WAN's start (wan) or from the UTC epoch (utc)"


class WanStep(Model):
    """From ``at`` on, the link's base one-way delay is ``delay``."""

    at: Duration
    delay: Duration
    anchor: Anchor = Field("wan", description=_ANCHOR_DOC)


class WanPeriodic(Model):
    """``amplitude``·sin(2π(t − phase)/period) added to the one-way delay."""

    amplitude: Duration
    period: Duration = Field(gt=0)
    phase: Duration = 0.0
    anchor: Anchor = Field("wan", description=_ANCHOR_DOC)


class WanSpike(Model):
    """``extra`` one-way delay while ``at`` ≤ t < ``at`` + ``duration``."""

    at: Duration
    duration: Duration = Field(gt=0)
    extra: Duration
    anchor: Anchor = Field("wan", description=_ANCHOR_DOC)


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
    # the same, anchored to the UTC epoch (times in seconds since 1970-01-01T00:00:00Z)
    utc_steps: tuple[tuple[float, float], ...] = ()
    utc_periodic: tuple[tuple[float, float, float], ...] = ()
    utc_spikes: tuple[tuple[float, float, float], ...] = ()

    def relative_to(self, epoch_utc: float) -> WanLink:
        """This link with its UTC-anchored items as times after a WAN epoch at ``epoch_utc``.

        Steps already in the past collapse into the latest one, from 0; spikes over are
        dropped and one under way is cut to what is left; a phase is taken modulo its period.
        """
        past = [(at, d) for at, d in self.utc_steps if at <= epoch_utc]
        steps = [*self.steps, *([(0.0, max(past)[1])] if past else []),
                 *((at - epoch_utc, d) for at, d in self.utc_steps if at > epoch_utc)]
        periodic = [*self.periodic, *((a, p, math.fmod(ph - epoch_utc, p) % p) for a, p, ph in self.utc_periodic)]
        spikes = list(self.spikes)
        for at, dur, x in self.utc_spikes:
            start, end = at - epoch_utc, at + dur - epoch_utc
            if end > 0:
                spikes.append((max(start, 0.0), end - max(start, 0.0), x))
        return WanLink(self.a, self.b, self.delay_s, self.origin, self.ecmp, self.hops, self.distance_m,
                       tuple(steps), tuple(periodic), tuple(spikes))


def delay_at(link: WanLink, t: float, epoch_utc: float | None = None) -> float:
    """One-way delay of ``link`` for a packet arriving ``t`` seconds after the epoch.

    ``epoch_utc``: the epoch as UTC seconds, needed when the link has UTC-anchored items.
    """
    if link.utc_steps or link.utc_periodic or link.utc_spikes:
        if epoch_utc is None:
            raise ValueError("the link has items anchored to UTC: give the WAN epoch as UTC seconds")
        link = link.relative_to(epoch_utc)
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
                steps=tuple((s.at, s.delay) for s in (lm.steps if lm else []) if s.anchor == "wan"),
                periodic=tuple((p.amplitude, p.period, p.phase) for p in (lm.periodic if lm else [])
                               if p.anchor == "wan"),
                spikes=tuple((s.at, s.duration, s.extra) for s in (lm.spikes if lm else []) if s.anchor == "wan"),
                utc_steps=tuple((s.at, s.delay) for s in (lm.steps if lm else []) if s.anchor == "utc"),
                utc_periodic=tuple((p.amplitude, p.period, p.phase) for p in (lm.periodic if lm else [])
                                   if p.anchor == "utc"),
                utc_spikes=tuple((s.at, s.duration, s.extra) for s in (lm.spikes if lm else [])
                                 if s.anchor == "utc"),
            ))
    return out
