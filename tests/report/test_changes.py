"""`cloudbench compare DIR --changes` on result directories written by the fakes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cloudbench.cli import app
from cloudbench.errors import AnalysisError, ExitCode
from cloudbench.report.changes import changes
from cloudbench.report.changes_render import write_changes
from cloudbench.testing.fake_results import FakeRun, make_campaign

SCHEDULE = {"every": 3600.0, "count": 48, "timezone": "UTC", "day": 86400.0}
STEP_AT = 24


def campaign(tmp_path: Path, step: float, seed: int = 2, sd: float = 20.0) -> Path:
    """48 hourly runs of 3 repetitions; rtt_p50 steps by ``step`` µs from run 24 on, rtt_p99 is flat.
    Each run has its own effect (SD ``sd`` µs, shared by its repetitions) on top of the repetition
    noise (the same SD)."""
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(48):
        shift = step if i >= STEP_AT else 0.0
        p50 = 1000 + shift + rng.normal(0, sd) + rng.normal(0, sd, 3)
        p99 = 2000 + rng.normal(0, 40) + rng.normal(0, 40, 3)
        runs.append(FakeRun({("rtt_p50_us", "same_zone"): list(p50), ("rtt_p99_us", "same_zone"): list(p99)},
                            schedule=SCHEDULE))
    return make_campaign(tmp_path, "weekly", runs)


def _epoch(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def test_a_step_is_found_at_its_run_with_its_size_and_the_flat_series_has_none(tmp_path: Path) -> None:
    res = changes(campaign(tmp_path, 300.0))
    assert res["unit_of_analysis"] == "run"
    (c,) = res["changes"]
    assert (c["metric"], c["group"]) == ("rtt_p50_us", "same_zone")
    assert abs(c["size"] - 0.30) < 0.2 * 0.30 and c["size_ci"][0] < 0.30 < c["size_ci"][1]
    assert c["p_holm"] < 0.05 and c["n_before"] == STEP_AT
    # within one slot: the change lies between the last run before the step and the first after it
    assert 0 < _epoch(c["time_utc"]) - _epoch(c["previous_run_utc"]) <= 2 * SCHEDULE["every"]
    series = {s["metric"]: s for s in res["series"]}
    assert series["rtt_p50_us"]["n_runs"] == 48 and series["rtt_p99_us"]["changes"] == 0


def test_the_cli_prints_json_and_a_table_and_a_bad_directory_is_a_message(tmp_path: Path) -> None:
    root = campaign(tmp_path, 300.0)
    runner = CliRunner()
    r = runner.invoke(app, ["compare", str(root), "--changes", "--json", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert set(data["changes"][0]) >= {"workload", "metric", "group", "time_utc", "size", "size_ci", "p"}
    r = runner.invoke(app, ["compare", str(root), "--changes", "--metric", "rtt_p99_us", "--out", str(tmp_path)])
    assert r.exit_code == 0 and "no change point" in r.output
    r = runner.invoke(app, ["compare", str(root), "--changes", "--out", str(tmp_path)], env={"COLUMNS": "120"})
    assert r.exit_code == 0 and "rtt_p50_us" in r.output and "+3" in r.output
    r = runner.invoke(app, ["compare", str(tmp_path / "missing"), "--changes"])
    assert r.exit_code != 0 and "not a directory" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["compare", str(root), str(root), "--changes"])
    assert r.exit_code != 0 and "one campaign directory" in r.output


def test_a_flat_campaign_gives_no_change(tmp_path: Path) -> None:
    res = changes(campaign(tmp_path, 0.0, seed=5))
    assert res["changes"] == [] and all(s["p_first"] is not None for s in res["series"])
    with pytest.raises(AnalysisError, match="filters"):
        changes(tmp_path / "weekly", metrics=["nope"])


def test_a_significant_change_within_the_threshold_is_counted_not_listed(tmp_path: Path) -> None:
    """+3 % with little noise (run and repetition SD 6 µs, so the step is about 4 run SDs over 48
    runs: at 8 µs, 3 run SDs, the debiased null's p was 0.052):
    significant, but within the default ±5 % (as compare's verdicts); listed with --threshold 1% or
    an absolute 20us."""
    root = campaign(tmp_path, 30.0, sd=6.0)
    res = changes(root, metrics=["rtt_p50_us"])
    assert res["changes"] == [] and res["series"][0]["small"] == 1 and "within ±5%" in res["notes"][0]
    for th in ("1%", "20us"):
        (c,) = changes(root, metrics=["rtt_p50_us"], threshold=th)["changes"]
        assert abs(c["diff"] - 30.0) < 15.0


def test_since_and_until_select_the_runs_searched(tmp_path: Path) -> None:
    """The step is at run 24 (hourly runs from the first run's time): a window from run 12 on still
    finds it; a window that ends before it finds none; an empty window is a usage error naming the flags."""
    root = campaign(tmp_path, 300.0)
    first = _epoch(changes(root)["changes"][0]["previous_run_utc"]) - 23 * 3600  # run 0, about
    iso = lambda h: datetime.fromtimestamp(first + h * 3600, UTC).strftime("%Y-%m-%dT%H:%M")  # noqa: E731
    res = changes(root, since=_epoch(iso(11.5) + "Z"), metrics=["rtt_p50_us"])
    (c,) = res["changes"]
    assert c["n_before"] == 12 and res["series"][0]["n_runs"] == 36 and "--since/--until" in res["notes"][0]
    assert res["runs"] == 36  # the runs in the window, not the campaign's 48
    assert changes(root, until=_epoch(iso(23.5) + "Z"))["changes"] == []
    runner = CliRunner()
    r = runner.invoke(app, ["compare", str(root), "--changes", "--since", iso(11.5), "--json", "--out",
                            str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["series"][0]["n_runs"] == 36
    for args, message in ((["--since", "2030-01-01"], "no repetition was measured in the window"),
                          (["--since", "1d", "--since", "2d"], "one window"),
                          (["--since", "2026-11-30", "--until", "2026-11-29"], "ends before it starts"),
                          (["--until", "soon"], "--until soon")):
        r = runner.invoke(app, ["compare", str(root), "--changes", *args, "--out", str(tmp_path)])
        assert r.exit_code == ExitCode.USAGE and message in r.output, (args, r.output)


def test_the_page_has_a_figure_per_series_with_a_change(tmp_path: Path) -> None:
    root = campaign(tmp_path, 300.0)
    res = changes(root)
    page = write_changes(res, tmp_path / "out")
    assert page == tmp_path / "out" / "compare" / "changes.html"
    text = page.read_text()
    assert text.count("<figure>") == 1 and text.count("<circle") == 48  # one dot per run of the stepped series
    assert "rtt_p50_us / same_zone: 48 runs, 1 change(s): +3" in text
    assert "<script" not in text and "https:" not in text
    assert json.loads((page.parent / "changes.json").read_text())["changes"] == res["changes"]
    flat = {s["metric"]: s for s in res["series"]}["rtt_p99_us"]
    assert flat["run_values"] == []  # only the series with a change carry their runs
    runner = CliRunner()
    r = runner.invoke(app, ["compare", str(root), "--changes", "--out", str(tmp_path / "cli")])
    assert r.exit_code == 0 and (tmp_path / "cli" / "compare" / "changes.html").is_file(), r.output
