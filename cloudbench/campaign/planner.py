"""The slots of a scheduled campaign: when each run starts, seeded and recorded.

``cover: none`` puts slot *i* at ``start + i·every`` plus a seeded offset in
``[0, spread)``. ``cover: hour-of-day | hour-of-week`` is stratified planning:
the window (``count·every`` from the start, or up to ``until``) is cut into the
cells of the cycle (the hours of the day or of the week, in the schedule's time
zone), every cell that occurs in the window gets a quota of ``n / cells`` runs
(the remainder to cells drawn by the seed), and each cell's runs are spread over
its occurrences by systematic sampling with a seeded start — so each hour gets
its share instead of a fixed interval drifting (or not) across the day.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cloudbench.spec.schedule import COVER_CELLS, ScheduleModel


@dataclass(frozen=True)
class Slot:
    """One planned run: its index, grid time, planned start (offset included) and cell."""

    index: int
    base: datetime  # the slot's time before the spread offset (UTC)
    planned: datetime  # when the run should start (UTC)
    spread_s: float  # planned - base
    cell: int  # hour of the day or week it covers (-1 with cover: none)
    seed: int  # seed of the run's trial order


def slot_seed(seed: int, index: int) -> int:
    """The trial-order seed of a slot: stable across processes, different for every slot."""
    return int.from_bytes(hashlib.sha256(f"cloudbench-slot:{seed}:{index}".encode()).digest()[:4], "big")


def cycle_position(schedule: ScheduleModel, t: datetime) -> float:
    """Seconds since the start of the cycle (local midnight; Monday 00:00 for weeks)."""
    off = t.astimezone(schedule.zone()).utcoffset() or timedelta(0)
    local = t.timestamp() + off.total_seconds()
    if schedule.cover == "hour-of-week":
        local -= 4 * schedule.day  # 1970-01-01 was a Thursday
    return local % schedule.cycle_s


def cell_of(schedule: ScheduleModel, t: datetime) -> int:
    """The ``cover`` cell (hour of the day or week) of the time ``t``."""
    cells = COVER_CELLS[schedule.cover]
    width = schedule.cycle_s / cells
    return min(int(cycle_position(schedule, t) // width), cells - 1)


def plan_slots(schedule: ScheduleModel, created: datetime, seed: int) -> list[Slot]:
    """Every slot of the campaign, in start order (``created``: when `campaign start` ran)."""
    if created.tzinfo is None:
        raise ValueError("created must be an aware datetime")
    rng = random.Random(f"cloudbench-schedule:{seed}")
    start = schedule.resolve(schedule.start, created)
    every = timedelta(seconds=schedule.every)
    if schedule.count is not None:
        n = schedule.count
        end = start + n * every
    else:
        assert schedule.until is not None
        end = schedule.resolve(schedule.until, start)
        if end <= start:
            raise ValueError(f"until ({end:%Y-%m-%dT%H:%M:%SZ}) is not after the start "
                             f"({start:%Y-%m-%dT%H:%M:%SZ})")
        n = max(1, math.ceil((end - start) / every - 1e-9))
    if schedule.cover == "none":
        grid = [(start + i * every, schedule.spread) for i in range(n)]
    else:
        grid = _stratified(schedule, start, end, n, rng)
    out: list[tuple[datetime, datetime, float]] = []
    for base, room in grid:
        off = rng.uniform(0.0, room) if room > 0 else 0.0
        out.append((base, base + timedelta(seconds=off), off))
    out.sort(key=lambda x: x[1])
    cells = schedule.cover != "none"
    return [Slot(i, b.astimezone(UTC), p.astimezone(UTC), round(off, 6),
                 cell_of(schedule, b + timedelta(seconds=1e-3)) if cells else -1, slot_seed(seed, i))
            for i, (b, p, off) in enumerate(out)]


def _stratified(schedule: ScheduleModel, start: datetime, end: datetime, n: int,
                rng: random.Random) -> list[tuple[datetime, float]]:
    """(base time, room for the spread) of ``n`` slots with a quota per cell."""
    ncells = COVER_CELLS[schedule.cover]
    width = schedule.cycle_s / ncells
    # Occurrences of each cell inside the window: cell boundaries from the first one at or
    # after the start, stepped in UTC (local offsets change by whole cells of an hour).
    first = start + timedelta(seconds=(-cycle_position(schedule, start)) % width)
    occ: dict[int, list[datetime]] = defaultdict(list)
    b = first
    while b + timedelta(seconds=width) <= end + timedelta(microseconds=1):
        occ[cell_of(schedule, b + timedelta(seconds=width / 2))].append(b)
        b += timedelta(seconds=width)
    if not occ:
        raise ValueError(f"the window from {start:%Y-%m-%dT%H:%M:%SZ} to {end:%Y-%m-%dT%H:%M:%SZ} holds "
                         f"no whole cell of {schedule.cover} ({width:g}s); lengthen it or use cover: none")
    cells = sorted(occ)
    quota = dict.fromkeys(cells, n // len(cells))
    extra = list(cells)
    rng.shuffle(extra)
    for c in extra[: n % len(cells)]:
        quota[c] += 1
    # One seeded start for every cell, shifted by the cell's rank in a seeded order: the
    # cells' samples fall on different days (a Latin arrangement), not bunched on a few.
    u0 = rng.random()
    order = list(cells)
    rng.shuffle(order)
    rank = {c: i for i, c in enumerate(order)}
    out: list[tuple[datetime, float]] = []
    for c in cells:
        k, times = quota[c], occ[c]
        if k == 0:
            continue
        m = len(times)
        per = [0] * m
        if k <= m:  # systematic sampling over the cell's occurrences
            u = (u0 + rank[c] / len(cells)) % 1.0
            for j in range(k):
                per[min(int((j + u) * m / k), m - 1)] += 1
        else:
            for j in range(m):
                per[j] = k // m
            for j in rng.sample(range(m), k % m):
                per[j] += 1
        for t, g in zip(times, per, strict=True):
            sub = width / g if g else width
            for j in range(g):
                out.append((t + timedelta(seconds=j * sub), min(schedule.spread, sub)))
    return out
