"""`cloudbench campaign …`, `diurnal` and `run --resume` through the CLI: clear errors, exit codes, JSON."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cloudbench.cli import app
from cloudbench.errors import ExitCode
from cloudbench.testing.fake_results import FakeRun, make_campaign

SPEC = """\
name: cli13
providers:
  netns:
    regions: {r1: {zones: {r1-a: {subnets: {s1: {hosts: 2}}}}}}
workloads:
  - {kind: echo, name: echo, rate: 20, duration: 1s}
schedule: {every: 1h, count: 24, cover: hour-of-day, timezone: Europe/Paris}
"""

runner = CliRunner()


def test_start_status_json_stop_and_systemd(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    d = tmp_path / "c"
    r = runner.invoke(app, ["campaign", "start", str(spec), "--dir", str(d), "--count", "48"])
    assert r.exit_code == 0, r.output
    assert str(d) in r.stdout
    r = runner.invoke(app, ["campaign", "status", str(d), "--json"])
    st = json.loads(r.stdout)
    assert st["total_slots"] == 48 and st["slots"] == {"planned": 48} and st["runner_pid"] is None
    assert sum(c.get("planned", 0) for cells in st["grid"].values() for c in cells.values()) == 48
    assert st["schedule"]["timezone"] == "Europe/Paris"
    r = runner.invoke(app, ["campaign", "status", str(d)])
    assert r.exit_code == 0 and "48 planned" in r.stdout and "Mon" in r.stdout
    r = runner.invoke(app, ["campaign", "systemd", str(d)])
    assert r.exit_code == 0 and "ExecStart=" in r.stdout and "campaign run" in r.stdout
    r = runner.invoke(app, ["campaign", "stop", str(d)])
    assert r.exit_code == 0 and "48 slot(s) cancelled" in r.stdout


def test_errors_are_messages_with_exit_codes(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("every: 1h", "every: soon"))
    r = runner.invoke(app, ["campaign", "start", str(spec), "--dir", str(tmp_path / "c")])
    assert r.exit_code == ExitCode.USAGE and "[schedule.every]" in r.output and "s.yaml:7" in r.output
    assert not (tmp_path / "c").exists()  # nothing half-created
    spec.write_text(SPEC)
    r = runner.invoke(app, ["campaign", "start", str(spec), "--dir", str(tmp_path / "c"), "--timezone", "Nowhere"])
    assert r.exit_code == ExitCode.USAGE and "--timezone" in r.output and "unknown time zone" in r.output
    r = runner.invoke(app, ["campaign", "run", str(tmp_path)])
    assert r.exit_code == ExitCode.ERROR and "no journal.sqlite here" in r.output
    r = runner.invoke(app, ["run"])
    assert r.exit_code == ExitCode.USAGE and "--resume" in r.output
    r = runner.invoke(app, ["diurnal", str(tmp_path), "--period", "a while"])
    assert r.exit_code == ExitCode.USAGE and "--period" in r.output


def test_resume_refuses_a_run_that_ended(tmp_path: Path) -> None:
    c = make_campaign(tmp_path, "done", [FakeRun({("rtt_p50_us", "g"): [1.0]})])
    (run,) = [p for p in c.iterdir() if p.is_dir()]
    r = runner.invoke(app, ["run", "--resume", str(run), "--quiet"])
    assert r.exit_code == ExitCode.ERROR and "only an interrupted" in r.output, r.output


def test_diurnal_json(tmp_path: Path) -> None:
    # a daily sine of 10 µs in noise of 2 µs, one run an hour (a noise-free sawtooth is itself an
    # AR(2)-like series: the short-campaign bootstrap's null, fitted to the runs, reproduces it)
    rng = np.random.default_rng(3)
    runs = [FakeRun({("rtt_p50_us", "g"): [100.0 + 10.0 * np.sin(2 * np.pi * i / 24) + rng.normal(0, 2.0)]})
            for i in range(30)]
    c = make_campaign(tmp_path, "h", runs)
    r = runner.invoke(app, ["diurnal", str(c), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["period_s"] == 86400 and res["series"][0]["n"] == 30 and res["series"][0]["significant"]


def test_diurnal_refuses_a_period_longer_than_the_runs_and_defaults_to_the_compressed_day(tmp_path: Path) -> None:
    """A compressed-day campaign (schedule.day 4h here) defaults to its day, never to 24 h
    (which printed `8.64e+04±7.9e+07s`); a period beyond what the runs cover exits 2."""
    sched = {"every": 3600.0, "count": 30, "timezone": "UTC", "day": 14400.0}
    runs = [FakeRun({("rtt_p50_us", "g"): [100.0 + (i % 4), 101.0 + (i % 4)]}, schedule=sched) for i in range(30)]
    c = make_campaign(tmp_path, "h", runs)
    r = runner.invoke(app, ["diurnal", str(c), "--period", "3d"])
    assert r.exit_code == ExitCode.USAGE and "longer than the 29.2h its 30 runs cover" in r.output, r.output
    assert "Traceback" not in r.output
    r = runner.invoke(app, ["diurnal", str(c)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "period 4.0h" in r.output and "30 (60)" in r.output and "e+" not in r.output
    assert "weekday vs weekend not testable: 7 whole days" in r.output


@pytest.mark.parametrize("width", [80, 200])
def test_status_fits_the_terminal_and_never_cuts_the_directory(tmp_path: Path, width: int) -> None:
    """`campaign status` at 80 and 200 columns: no line wider than the terminal but the
    directory's, which is printed whole on its own line (a path to copy, not to cut); the coverage
    grid's rows whole; the next slot's wait in its natural unit, not raw seconds."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    d = tmp_path / ("a-campaign-directory-whose-name-is-long-" * 2)
    assert runner.invoke(app, ["campaign", "start", str(spec), "--dir", str(d), "--count", "48"]).exit_code == 0
    r = CliRunner(env={"COLUMNS": str(width)}).invoke(app, ["campaign", "status", str(d)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert f"  in {d}" in lines
    assert all(len(line) <= width for line in lines if line != f"  in {d}"), r.stdout
    assert sum(1 for line in lines if line[:3] in {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
               and len(line) == 29) == 7
    (nxt,) = [line for line in lines if line.startswith("next:")]
    assert re.search(r"\(in \d+(\.\d)?(s|min|h)\)$", nxt), nxt


def test_start_with_run_starts_now_and_runs_the_slots_in_the_same_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`campaign start --run`: the first slot is now (no 30 s lead), the directory is printed,
    then the same process runs the campaign (as `campaign run DIR`: its daemon, its exit codes).
    The daemon is replaced by a recorder: the run itself is tested on the testbed. (With
    ``cover: hour-of-day`` the first slot is the next whole hour, started or not; with a slip
    shorter than 30 s a plain `campaign start` puts the first slot 30 s away.)"""
    import cloudbench

    ran: list[Path] = []

    class Recorder:
        def __init__(self, directory: Path, log: object) -> None:
            ran.append(Path(directory))

        def run(self) -> dict[str, int]:
            return {"finished": 47, "failed": 1}

    monkeypatch.setattr(cloudbench, "CampaignDaemon", Recorder)
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("cover: hour-of-day", "cover: none, slip: 5s"))
    d = tmp_path / "c"
    before = datetime.now(UTC)
    r = runner.invoke(app, ["campaign", "start", str(spec), "--dir", str(d), "--count", "48", "--run"])
    assert ran == [d]
    assert r.exit_code == ExitCode.INCOMPLETE and "1 slot(s) failed" in r.output  # as `campaign run`
    first = re.search(r"first at (\S+)", r.stdout)
    assert first and "before then" not in r.stdout and str(d) in r.stdout.splitlines()
    at = datetime.fromisoformat(first.group(1).replace("Z", "+00:00"))
    assert abs((at - before).total_seconds()) < 5.0  # now, not 30 s away


def test_status_of_compressed_days_says_how_long_a_row_and_a_column_are(tmp_path: Path) -> None:
    """A 2-minute campaign of 60 s days filled Mon-Wed rows of the weekday x hour grid without a
    word on why; the grid's rows are compressed days and the status says how long they are."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("cover: hour-of-day", "cover: none, day: 60s"))
    d = tmp_path / "c"
    assert runner.invoke(app, ["campaign", "start", str(spec), "--dir", str(d), "--count", "20",
                               "--every", "6s"]).exit_code == 0
    text = " ".join(runner.invoke(app, ["campaign", "status", str(d)]).stdout.split())
    assert "compressed days of 60s (schedule.day): a row is one such day, a column one 24th of it (2.5s)" in text
    spec.write_text(SPEC)
    assert runner.invoke(app, ["campaign", "start", str(spec), "--dir", str(tmp_path / "e")]).exit_code == 0
    assert "compressed days" not in runner.invoke(app, ["campaign", "status", str(tmp_path / "e")]).stdout
