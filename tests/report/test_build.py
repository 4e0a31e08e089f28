"""The report frame: a section per workload through the registry; what it cannot report, it says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudbench.errors import ResultError
from cloudbench.report.build import build_report
from cloudbench.store.rundir import RunDir
from cloudbench.testing.fake_results import FakeRun, make_campaign


def test_a_workload_kind_this_version_does_not_know_is_a_clear_error(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path, "c", [FakeRun({("m", "g"): [1.0, 2.0]})])
    (mpath,) = camp.glob("*/manifest.json")
    m = json.loads(mpath.read_text())
    m["spec"]["workloads"] = [{"kind": "teleport", "name": "beam"}]
    mpath.write_text(json.dumps(m))
    with pytest.raises(ResultError, match=r"manifest\.json: workload 'beam' is of kind 'teleport'.*upgrade"):
        build_report(RunDir(mpath.parent))


def test_the_frame_says_what_ran_and_what_failed(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path, "c", [FakeRun({("m", "g"): [1.0]}, workloads=[])])
    (mpath,) = camp.glob("*/manifest.json")
    m = json.loads(mpath.read_text())
    m["repetitions"][0]["status"] = "failed"
    m["repetitions"][0]["failures"] = [{"host": "h1", "command": "ssh connect", "exit_code": None,
                                        "stderr_tail": "", "reason": "cannot connect"}]
    mpath.write_text(json.dumps(m))
    rep = build_report(RunDir(mpath.parent))
    assert rep["schema"] == 3 and rep["workloads"] == {} and rep["repetitions"] == 1
    assert [(f["trial"], f["host"], f["reason"]) for f in rep["failures"]] == [("r000-deploy", "h1",
                                                                               "cannot connect")]
    # report.json lists every warning the terminal prints: here, the failure
    assert rep["warnings"] == ["1 host failure(s): the table below"]
