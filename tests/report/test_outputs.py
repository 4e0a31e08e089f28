"""write_outputs: report.json in a forked child beside the page, its errors as when written first;
report.json's encoding."""

from __future__ import annotations

import errno
import math
from pathlib import Path
from typing import Any

import pytest

from cloudbench.errors import ResultError
from cloudbench.report import html, outputs
from cloudbench.report.build import build_report
from cloudbench.store.rundir import RunDir
from cloudbench.testing.fake_results import FakeRun, make_campaign


def a_run(tmp_path: Path) -> RunDir:
    camp = make_campaign(tmp_path, "c", [FakeRun({("m", "g"): [1.0]}, workloads=[])])
    return RunDir(next(camp.glob("*/manifest.json")).parent)


@pytest.mark.parametrize("fork", [True, False])
def test_a_full_disk_under_report_json_wins_over_the_pages_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 fork: bool) -> None:
    """Written in order, report.json's ENOSPC stopped the command before the page (exit 5, the run kept);
    written side by side, the page fails on the same full disk: its ResultError (exit 1) must not hide it."""

    def full(*a: Any) -> list[Path]:
        raise OSError(errno.ENOSPC, "No space left on device")

    def page_fails(*a: Any, **kw: Any) -> list[Path]:
        raise ResultError("index.html", "cannot write the HTML report: No space left on device")

    monkeypatch.setattr(outputs, "write_report", full)
    monkeypatch.setattr(html, "write_html", page_fails)
    run = a_run(tmp_path)
    with pytest.raises(OSError) as info:
        outputs.write_outputs(run, {"workloads": {}}, fork=fork)
    assert info.value.errno == errno.ENOSPC


def test_without_a_page_nothing_is_forked_and_report_json_is_written(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork(*a: Any) -> None:
        raise AssertionError("forked for a report without its page")

    monkeypatch.setattr(outputs, "Forked", no_fork)
    run = a_run(tmp_path)
    written = outputs.write_outputs(run, build_report(run), page=False)
    assert written.page == [] and written.report == [run.path / "report" / "report.json"]


def test_report_json_holds_what_the_standard_encoder_wrote(tmp_path: Path) -> None:
    """report.json by orjson: the values ``json.dump(to_json(report), indent=2, default=str)`` wrote
    (NaN and infinities as null, a date or a dataclass as its ``str``, µ as itself in UTF-8), numpy's
    numbers as numbers, and read back by ``read_report`` whatever the locale; indented as before."""
    import dataclasses
    import json
    from datetime import UTC, datetime

    import numpy as np

    from cloudbench.report.files import read_report, report_json_bytes, to_json, write_report

    @dataclasses.dataclass
    class Spot:
        x: int

    when = datetime(2026, 11, 27, 6, 0, tzinfo=UTC)
    plain = {"nan": math.nan, "inf": [math.inf, -math.inf, 1.5, 1e-05, 2**53 + 1], "unit": "µs",
             "nested": {"rows": [{"p": 0.1 + 0.2, "none": None, "t": True}]}, "when": when, "spot": Spot(3),
             7: "an int key"}
    want = json.loads(json.dumps(to_json(plain), indent=2, default=str))
    assert json.loads(report_json_bytes(plain)) == want
    assert want["when"] == str(when) and want["spot"] == str(Spot(3)) and want["nan"] is None
    text = report_json_bytes(plain).decode()
    assert text.startswith('{\n  "nan": null,\n  "inf": [\n    null,') and text.endswith("}\n") and "µs" in text
    numbers = json.loads(report_json_bytes({"a": np.float64(0.25), "b": np.int64(7), "c": np.arange(3.0)}))
    assert numbers == {"a": 0.25, "b": 7, "c": [0.0, 1.0, 2.0]}

    run = a_run(tmp_path)
    report = build_report(run)
    report["workloads"] = {}
    report["note"] = "µ and NaN: " + "x" * 3
    write_report(run, {**report, "extra": math.nan})
    path = run.path / "report" / "report.json"
    again = read_report(path)
    assert again["note"] == report["note"] and again["extra"] is None
