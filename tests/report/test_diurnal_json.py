"""diurnal's result serializes itself: ``diurnal --json`` read back gives the same result, and
the document it writes is the one :func:`diurnal` returns."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from cloudbench.report.diurnal import DiurnalResult, SeriesRow, diurnal, diurnal_result
from cloudbench.testing.fake_results import FakeRun, make_campaign

SCHEDULE = {"every": 3600.0, "count": 48, "timezone": "UTC", "day": 86400.0}


def _campaign(tmp_path: Path) -> Path:
    """48 hourly runs of two repetitions with a daily sine in one series, a flat series, and a
    series with 4 runs only (skipped)."""
    rng = np.random.default_rng(5)
    runs = []
    for i in range(48):
        v = 1000 + 30 * math.sin(2 * math.pi * ((10 + i) % 24 + 0.25) / 24) + rng.normal(0, 5)
        vals = {("rtt_p50_us", "same_zone"): [v, v + 1.0], ("rtt_p99_us", "same_zone"): [2000 + rng.normal(0, 5)]}
        if i < 4:
            vals[("rtt_p50_us", "rare")] = [5.0]
        runs.append(FakeRun(vals, schedule=SCHEDULE))
    return make_campaign(tmp_path, "hourly", runs)


def test_the_result_round_trips_and_a_changed_number_does_not(tmp_path: Path) -> None:
    res = diurnal_result(_campaign(tmp_path))
    kinds = {(r.skipped is not None, r.analysis is not None and r.analysis.fit is not None) for r in res.series}
    assert kinds == {(True, False), (False, True), (False, False)}  # skipped, fitted, tested without a fit
    doc = json.loads(json.dumps(res.to_json()))
    back = DiurnalResult.from_json(doc)
    assert back == res
    assert json.loads(json.dumps(back.to_json())) == doc
    assert json.dumps(diurnal(Path(res.path))) == json.dumps(res.to_json())

    fitted = next(i for i, r in enumerate(res.series) if r.analysis is not None and r.analysis.fit is not None)
    for where, key, value in (("fit", "period_s", 1.0), ("row", "p_holm", 0.5), ("row", "notes", ["x"]),
                              ("top", "verdict", "no effect")):
        other: Any = copy.deepcopy(doc)
        target = {"top": other, "row": other["series"][fitted], "fit": other["series"][fitted]["fit"]}[where]
        target[key] = value
        assert DiurnalResult.from_json(other) != res, (where, key)


def test_a_skipped_row_has_only_its_key_and_why() -> None:
    row = SeriesRow("echo", "rtt_p50_us", "rare", "us", 4, 4, skipped="4 runs (needs 6)")
    doc = row.to_json()
    assert list(doc) == ["workload", "metric", "group", "unit", "n", "n_values", "skipped"]
    assert SeriesRow.from_json(doc) == row
