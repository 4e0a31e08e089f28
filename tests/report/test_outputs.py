"""write_outputs: report.json in a forked child beside the page, its errors as when written first."""

from __future__ import annotations

import errno
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
