"""The slot planner and the `schedule:` section: quotas per cell, seeds, errors with lines."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from cloudbench.campaign.planner import cell_of, plan_slots
from cloudbench.errors import SpecError
from cloudbench.spec.schedule import ScheduleModel
from cloudbench.workloads import parse_spec
from tests.paths import QUICKSTART

T0 = datetime(2026, 11, 23, 9, 17, 0, tzinfo=UTC)  # a Monday


def sched(**kw: object) -> ScheduleModel:
    return ScheduleModel.model_validate(kw)


def test_plain_interval_with_seeded_spread_inside_each_slot() -> None:
    s = sched(every="1h", count=5, spread="10m")
    a = plan_slots(s, T0, seed=1)
    assert [x.base for x in a] == [T0 + timedelta(hours=i) for i in range(5)]
    assert all(0 <= x.spread_s < 600 and x.planned == x.base + timedelta(seconds=x.spread_s) for x in a)
    assert plan_slots(s, T0, seed=1) == a  # same seed, same plan
    assert [x.spread_s for x in plan_slots(s, T0, seed=2)] != [x.spread_s for x in a]
    assert len({x.seed for x in a}) == 5  # each slot its own trial order


def test_a_daily_interval_that_would_hit_one_hour_is_spread_over_every_hour_with_cover() -> None:
    plain = plan_slots(sched(every="24h", count=48), T0, seed=3)
    assert len({x.planned.hour for x in plain}) == 1  # what "every 24h" alone does
    s = sched(every="24h", count=48, cover="hour-of-day")
    slots = plan_slots(s, T0, seed=3)
    assert len(slots) == 48
    per_cell = Counter(x.cell for x in slots)
    assert set(per_cell) == set(range(24)) and set(per_cell.values()) == {2}  # the quota of every hour
    assert all(cell_of(s, x.planned) == x.cell for x in slots)
    assert slots == sorted(slots, key=lambda x: x.planned)
    days = Counter(x.planned.date() for x in slots)
    assert max(days.values()) <= 2 and len(days) >= 30  # spread over the days, not bunched


def test_hour_of_week_gives_each_hour_of_the_week_its_quota_in_the_local_zone() -> None:
    s = sched(every="1h", count=168 * 2, cover="hour-of-week", timezone="America/New_York")
    slots = plan_slots(s, T0, seed=4)
    cells = Counter(x.cell for x in slots)
    assert set(cells) == set(range(168)) and set(cells.values()) == {2}
    for x in slots[:50]:
        local = x.planned.astimezone(s.zone())
        assert x.cell == local.weekday() * 24 + local.hour


def test_uneven_quota_and_compressed_day() -> None:
    s = sched(every="1s", count=50, cover="hour-of-day", day="60s", start="+10s")
    slots = plan_slots(s, T0, seed=5)
    counts = Counter(x.cell for x in slots)
    assert sum(counts.values()) == 50 and max(counts.values()) - min(counts.values()) <= 1
    assert slots[0].planned >= T0 + timedelta(seconds=10)


def test_until_relative_and_absolute() -> None:
    a = plan_slots(sched(every="10m", until="+1h"), T0, seed=1)
    assert len(a) == 6
    b = plan_slots(sched(every="10m", until="2026-11-23T10:17:00Z"), T0, seed=1)
    assert [x.planned for x in a] == [x.planned for x in b]
    with pytest.raises(ValueError, match="not after the start"):
        plan_slots(sched(every="10m", until="2026-11-22T00:00:00Z"), T0, seed=1)


@pytest.mark.parametrize(("schedule", "field", "words"), [
    ("every: 1h\n  count: 3\n  timezone: Mars/Olympus", "schedule.timezone", "unknown time zone"),
    ("every: 1h\n  start: tomorrow\n  count: 3", "schedule.start", "bad start"),
    ("every: 1h", "schedule", "exactly one of `count` and `until`"),
    ("every: 1h\n  count: 2\n  spread: 2h", "schedule", "spread"),
    ("every: 1h\n  count: 2\n  cover: hour-of-month", "schedule.cover", "hour-of-day"),
    ("every: 1h\n  count: 2\n  catchup: once", "schedule.catchup", "unknown key"),
])
def test_schedule_errors_name_file_line_and_field(schedule: str, field: str, words: str) -> None:
    text = QUICKSTART.read_text() + "schedule:\n  " + schedule + "\n"
    with pytest.raises(SpecError) as e:
        parse_spec(text, "q.yaml")
    msg = str(e.value)
    first_line = len(QUICKSTART.read_text().splitlines()) + 1
    assert msg.startswith("q.yaml:") and int(msg.split(":")[1]) >= first_line, msg
    assert f"[{field}]" in msg and words in msg, msg
