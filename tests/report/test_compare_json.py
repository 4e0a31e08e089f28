"""compare's results serialize themselves: compare.json read back gives the same rows and the
same document, for one comparison and for --by."""

from __future__ import annotations

import json
from pathlib import Path

from cloudbench.analysis.compare import Threshold, compare_samples
from cloudbench.report.compare import CompareResult, compare, compare_by, from_json, to_json
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values

P50 = ("rtt_p50_us", "same_zone")
P99 = ("rtt_p99_us", "cross_zone")


def _sides(tmp_path: Path) -> tuple[Path, Path]:
    a = make_campaign(tmp_path, "a", [FakeRun({P50: normal_values(12, 100, 0.05, seed=1),
                                               P99: normal_values(12, 300, 0.2, seed=2)})])
    b = make_campaign(tmp_path, "b", [FakeRun({P50: normal_values(12, 110, 0.05, seed=3),
                                               P99: normal_values(4, 300, 0.2, seed=4)})])
    return a, b


def test_one_comparison_round_trips(tmp_path: Path) -> None:
    a, b = _sides(tmp_path)
    for threshold in ("5%", "3us"):
        res = compare(a, b, threshold=threshold, metrics=["rtt_p50_us"] if threshold == "3us" else ())
        doc = json.loads(json.dumps(res.to_json()))
        (back,) = from_json(doc)
        assert back.rows == res.rows  # every number, the medians' CIs and the verdicts
        assert back.threshold == res.threshold
        assert json.loads(json.dumps(back.to_json())) == doc


def test_by_round_trips(tmp_path: Path) -> None:
    path = make_campaign(tmp_path, "m", [FakeRun({P50: normal_values(8, 100, 0.01, seed=9)}),
                                         FakeRun({P50: normal_values(8, 103, 0.01, seed=10)}, vm_type="big")])
    results = compare_by([path], "vm_type")
    doc = json.loads(json.dumps(to_json(results, "vm_type")))
    back = from_json(doc)
    assert [r.rows for r in back] == [r.rows for r in results]
    assert [(r.a.label, r.b.label) for r in back] == [("vm_type=big", "vm_type=local")]
    assert json.loads(json.dumps(to_json(back, "vm_type"))) == doc


def test_a_changed_number_is_seen(tmp_path: Path) -> None:
    """The equality the round trip relies on can fail."""
    a, b = _sides(tmp_path)
    doc = json.loads(json.dumps(compare(a, b).to_json()))
    doc["rows"][0]["median_a_ci"][0] -= 1e-9
    (back,) = from_json(doc)
    assert back.rows != compare(a, b).rows
    c = compare_samples([1.0, 2, 3, 4, 5, 6], [2.0, 3, 4, 5, 6, 7], Threshold(0.05, True))
    assert type(c).from_json(json.loads(json.dumps(c.to_json()))) == c
    assert isinstance(back, CompareResult)
