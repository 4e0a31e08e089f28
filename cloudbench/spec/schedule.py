"""The spec's ``schedule:`` section: when the runs of a scheduled campaign start.

::

    schedule:
      every: 1h            # one run per slot of this length
      count: 168           # or  until: 2026-12-01T00:00:00Z  /  until: +7d
      start: +5m           # now (default), +<duration> after `campaign start`, or ISO 8601
      spread: 10m          # seeded random start offset inside each slot (recorded)
      slip: 20m            # a start later than this after its planned time is "missed"
      cover: hour-of-week  # hour-of-day | hour-of-week | none: a quota of runs per cell
      timezone: Europe/Paris   # IANA name: the hours of the analysis and of `cover`
      catch_up: skip       # skip | once: after an outage, missed slots stay missed (or one runs)
      day: 24h             # a shorter "day" compresses the cycle (tests on the testbed)

The slots themselves are planned by :mod:`cloudbench.campaign.planner`. A
compressed day (``day`` other than 24 h) counts from the UTC epoch and ignores
``timezone``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator

from cloudbench.core.units import parse_duration
from cloudbench.spec.fields import Duration, Model

DAY_S = 86400.0
COVER_CELLS = {"hour-of-day": 24, "hour-of-week": 168, "none": 1}


def _check_when(value: str, field: str) -> str:
    v = value.strip()
    if v == "now":
        return v
    if v.startswith("+"):
        parse_duration(v[1:])  # raises ValueError with the units
        return v
    try:
        datetime.fromisoformat(v)
    except ValueError:
        raise ValueError(f"bad {field} {value!r}: write `now`, `+<duration>` (e.g. `+10m`, `+7d`) "
                         "or an ISO 8601 time (e.g. `2026-12-01T08:00:00Z`)") from None
    return v


class ScheduleModel(Model):
    """When the runs of a campaign start (``cloudbench campaign``)."""

    every: Duration = Field(gt=0, description="one run per slot of this length")
    count: int | None = Field(None, ge=1, description="number of slots (or give `until`)")
    until: str | None = Field(None, description="end: `+<duration>` after the start, or an ISO 8601 time")
    start: str = Field("now", description="`now`, `+<duration>` after `campaign start`, or ISO 8601")
    spread: Duration = Field(0.0, ge=0, description="seeded random start offset inside each slot")
    slip: Duration | None = Field(None, ge=0, description="how late a run may start before its slot is "
                                  "recorded as missed (default: half of `every`)")
    cover: Literal["hour-of-day", "hour-of-week", "none"] = Field(
        "none", description="place slots so each hour of the day (or week) gets its quota of runs")
    timezone: str = Field("UTC", description="IANA time zone of the hours (analysis and `cover`)")
    catch_up: Literal["skip", "once"] = Field(
        "skip", description="slots missed while nothing ran: all stay missed, or one runs late")
    day: Duration = Field(DAY_S, gt=0, description="length of a day (shorter compresses the cycle)")

    @field_validator("until")
    @classmethod
    def _until(cls, v: str | None) -> str | None:
        return None if v is None else _check_when(v, "until")

    @field_validator("start")
    @classmethod
    def _start(cls, v: str) -> str:
        return _check_when(v, "start")

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r}: give an IANA name such as UTC, Europe/Paris, "
                             "America/New_York") from None
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ScheduleModel:
        if (self.count is None) == (self.until is None):
            raise ValueError("give exactly one of `count` and `until`")
        if self.spread >= self.every:
            raise ValueError(f"spread ({self.spread:g}s) must be shorter than every ({self.every:g}s)")
        if self.cover != "none":
            cell = self.cycle_s / COVER_CELLS[self.cover]
            if self.spread >= cell:
                raise ValueError(f"spread ({self.spread:g}s) must be shorter than a cell of {self.cover} "
                                 f"({cell:g}s)")
        return self

    # -- semantics --------------------------------------------------------------------
    @property
    def slip_s(self) -> float:
        return self.every / 2 if self.slip is None else self.slip

    @property
    def cycle_s(self) -> float:
        """Length of the cycle ``cover`` fills: a day, or a week."""
        return self.day * (7 if self.cover == "hour-of-week" else 1)

    @property
    def compressed(self) -> bool:
        return not math.isclose(self.day, DAY_S)

    def zone(self) -> ZoneInfo:
        return ZoneInfo("UTC" if self.compressed else self.timezone)

    def resolve(self, when: str, ref: datetime) -> datetime:
        """``start`` or ``until`` as an aware UTC time (``+<duration>`` counts from ``ref``)."""
        if when == "now":
            return ref
        if when.startswith("+"):
            return ref + timedelta(seconds=parse_duration(when[1:]))
        t = datetime.fromisoformat(when)
        if t.tzinfo is None:  # a local time of the schedule's zone
            t = t.replace(tzinfo=self.zone())
        return t.astimezone(UTC)
