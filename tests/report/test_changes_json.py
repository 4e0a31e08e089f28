"""``compare DIR --changes``'s result serializes itself: its ``--json`` read back gives the same
result, and :func:`changes` returns that document."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np

from cloudbench.report.changes import ChangeRow, ChangesResult, SeriesRow, changes, changes_result
from cloudbench.testing.fake_results import FakeRun, make_campaign

SCHEDULE = {"every": 3600.0, "count": 48, "timezone": "UTC", "day": 86400.0}


def _campaign(tmp_path: Path) -> Path:
    """48 hourly runs: a 30 % step at run 24 in one series, a flat one, and one of 5 runs (not searched)."""
    rng = np.random.default_rng(3)
    runs = []
    for i in range(48):
        p50 = 1000 + (300.0 if i >= 24 else 0.0) + rng.normal(0, 20) + rng.normal(0, 20, 3)
        vals = {("rtt_p50_us", "same_zone"): list(p50),
                ("rtt_p99_us", "same_zone"): list(2000 + rng.normal(0, 40) + rng.normal(0, 40, 3))}
        if i < 5:
            vals[("rtt_p50_us", "short")] = [1.0]
        runs.append(FakeRun(vals, schedule=SCHEDULE))
    return make_campaign(tmp_path, "weekly", runs)


def _edit(doc: dict[str, Any], where: str, key: str, value: object) -> dict[str, Any]:
    other = copy.deepcopy(doc)
    (other if where == "top" else other[where][0])[key] = value
    return other


def test_the_result_round_trips_and_a_changed_number_does_not(tmp_path: Path) -> None:
    res = changes_result(_campaign(tmp_path))
    assert len(res.changes) == 1 and {s.p_first is None for s in res.series} == {True, False}
    doc = json.loads(json.dumps(res.to_json()))
    back = ChangesResult.from_json(doc)
    assert back == res
    assert json.loads(json.dumps(back.to_json())) == doc
    assert json.dumps(changes(Path(res.path))) == json.dumps(res.to_json())
    for where, key, value in (("changes", "size", 0.5), ("changes", "time_utc", "2026-01-01T00:00:00Z"),
                              ("series", "small", 3), ("series", "notes", ["x"]), ("top", "threshold", "1%")):
        assert ChangesResult.from_json(_edit(doc, where, key, value)) != res, (where, key)  # type: ignore[arg-type]


def test_a_change_and_a_series_round_trip_alone() -> None:
    c = ChangeRow("echo", "rtt_p50_us", "g", "us", "2026-11-23T10:20:00Z", "2026-11-23T09:20:00Z", None, None,
                  -3.5, (-4.0, -3.0), 10.0, 6.5, 12, 12, 1e-4, 2e-4)
    assert ChangeRow.from_json(json.loads(json.dumps(c.to_json()))) == c
    s = SeriesRow("echo", "rtt_p50_us", "g", "us", 30, 0.01, 1, 0, True, 0.002, 0.3, ("a note",))
    assert SeriesRow.from_json(json.loads(json.dumps(s.to_json()))) == s
