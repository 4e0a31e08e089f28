"""Confirm's results serialize themselves: to_json -> from_json gives the same result, and
``confirm.json`` read back gives the same document."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cloudbench.analysis.confirm import (
    ConfirmParams,
    Outcome,
    RepetitionRef,
    Series,
    SeriesKey,
    SeriesResult,
    analyse_series,
)
from cloudbench.analysis.convergence import Convergence, convergence
from cloudbench.analysis.prediction import Unreliable
from cloudbench.report.confirm import confirm, confirm_document, confirm_from_document
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values


def _series(name: str, values: np.ndarray) -> Series:
    refs = tuple(RepetitionRef("run1", i) for i in range(len(values)))
    return Series(SeriesKey("echo", name, "same_zone"), "us", refs, values.astype(np.float64))


def _through_json(doc: object) -> object:
    return json.loads(json.dumps(doc))  # what a file holds: no tuples, no numpy, no nan


def _results() -> list[SeriesResult]:
    rng = np.random.default_rng(4)
    series = [
        _series("iid", 100 + rng.normal(0, 5, 60)),  # reached at 5 %, predicted at 0.1 %
        _series("drift", 100 + np.linspace(0, 40, 40) + rng.normal(0, 1, 40)),  # a rough guess
        _series("short", 100 + rng.normal(0, 5, 4)),  # no CI
        _series("flat", np.full(12, 7.0)),  # reached at once (a zero-width CI)
    ]
    return analyse_series(series, ConfirmParams(errors=(0.001, 0.05), subsets=30))


def test_every_outcome_is_exercised() -> None:
    outcomes = {t.outcome for r in _results() for t in r.targets}
    assert {Outcome.REACHED, Outcome.PREDICTED, Outcome.NO_CI} <= outcomes
    reasons = {x for r in _results() for t in r.targets if t.prediction
               for x in t.prediction.reliability.reasons}
    assert Unreliable.CHECKS_WARNED in reasons or Unreliable.SLOPE_OUTSIDE_BAND in reasons


@pytest.mark.parametrize("index", range(4))
def test_series_result_round_trip(index: int) -> None:
    params = ConfirmParams(errors=(0.001, 0.05), subsets=30)
    r = _results()[index]
    back = SeriesResult.from_json(_through_json(r.to_json()), params)  # type: ignore[arg-type]
    assert back.series == r.series
    assert back.convergence == r.convergence
    assert back.targets == r.targets  # outcome, prediction and its reasons included
    assert back.checks == r.checks or all(  # nan values compare unequal: compare what JSON holds
        (a.name, a.status, a.message) == (b.name, b.status, b.message)
        for a, b in zip(back.checks, r.checks, strict=True))
    assert back.ci.estimate == r.ci.estimate or np.isnan(r.ci.estimate)
    assert (back.ci.lower, back.ci.upper, back.ci.ranks) == (r.ci.lower, r.ci.upper, r.ci.ranks)
    assert back.to_json() == _through_json(r.to_json())


def test_a_changed_number_does_not_round_trip_equal() -> None:
    """The equality the round trip relies on can fail."""
    r = _results()[0]
    doc = _through_json(r.to_json())
    doc["repetitions"][3]["value"] += 1e-9  # type: ignore[index]
    params = ConfirmParams(errors=(0.001, 0.05), subsets=30)
    assert SeriesResult.from_json(doc, params).series != r.series  # type: ignore[arg-type]
    conv = r.convergence
    assert conv is not None
    moved = Convergence(conv.sizes, conv.estimate + 1e-9, conv.lower, conv.upper, conv.subsets,
                        conv.every_size)
    assert moved != conv


def test_convergence_round_trip() -> None:
    x = np.sort(np.random.default_rng(1).normal(10, 1, 50))
    conv = convergence(x, subsets=20, seed=2)[0]
    assert Convergence.from_json(_through_json(conv.to_json())) == conv  # type: ignore[arg-type]


def test_params_round_trip() -> None:
    p = ConfirmParams(quantile=0.9, level=0.99, errors=(0.02,), subsets=7, seed=3, max_sizes=50,
                      alpha=0.01)
    doc = p.to_json(allow_mixed=True)
    assert doc["trials"] == 7 and doc["quantile_name"] == "p90"  # on-disk names kept
    assert ConfirmParams.from_json(_through_json(doc)) == p  # type: ignore[arg-type]


def test_confirm_json_read_back_is_the_same_document(tmp_path: Path) -> None:
    path = make_campaign(tmp_path, "demo", [
        FakeRun({("rtt_p50_us", "same_zone"): normal_values(30, 100, 0.05, seed=1),
                 ("rtt_p99_us", "cross_zone"): [*normal_values(9, 300, 0.3, seed=2), None]}),
        FakeRun({("rtt_p50_us", "same_zone"): normal_values(20, 101, 0.05, seed=3)}),
    ])
    result = confirm(path, ConfirmParams(errors=(0.001, 0.05), subsets=20))
    doc = _through_json(confirm_document(result, {0: "a.png"}))
    back = confirm_from_document(doc)  # type: ignore[arg-type]
    assert back.params == result.params
    assert [r.series for r in back.series] == [r.series for r in result.series]
    assert [r.targets for r in back.series] == [r.targets for r in result.series]
    assert _through_json(confirm_document(back, {0: "a.png"})) == doc
