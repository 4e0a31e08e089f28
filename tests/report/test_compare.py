"""``cloudbench compare A B`` on fake result directories: matching, units of analysis, the
metadata guard and differences, the outputs (table, JSON, HTML) and the command's exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

import cloudbench
from cloudbench.cli import app
from cloudbench.errors import AnalysisError, ExitCode, UsageError
from cloudbench.report.compare import SINGLE_RUN_NOTE, CompareResult, compare, to_json
from cloudbench.report.compare_render import render, to_html
from cloudbench.report.sides import parse_when
from cloudbench.report.threshold import parse_threshold
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values
from tests.paths import ROOT

RTT = ("rtt_p50_us", "same_zone")
CROSS = ("rtt_p50_us", "cross_zone")
TPUT = ("throughput_mbps", "same_zone")


def campaign(root: Path, name: str, *, runs: int = 8, reps: int = 3, rtt: float = 100.0, cross: float = 300.0,
             seed: int = 0, extra: bool = False, **kw: object) -> Path:
    out = []
    for i in range(runs):
        values = {RTT: normal_values(reps, rtt, 0.02, seed * 1000 + i),
                  CROSS: normal_values(reps, cross, 0.02, seed * 1000 + 500 + i)}
        if extra:
            values[("rtt_p99_us", "same_zone")] = normal_values(reps, 900, 0.02, seed * 1000 + 700 + i)
        out.append(FakeRun(values, **kw))  # type: ignore[arg-type]
    return make_campaign(root, name, out)


def rows_by(res: CompareResult) -> dict[tuple[str, str], object]:
    return {(r.key.metric, r.key.group): r for r in res.rows}


def test_a_known_difference_is_worse_and_its_interval_covers_it(tmp_path: Path) -> None:
    a = campaign(tmp_path, "a", seed=1)
    b = campaign(tmp_path, "b", seed=2, rtt=120.0, extra=True)
    res = compare(a, b)
    rows = rows_by(res)
    same, cross = rows[RTT], rows[CROSS]
    assert same.result.verdict == "worse"  # type: ignore[attr-defined]
    lo, hi = same.result.ratio_ci  # type: ignore[attr-defined]
    assert lo <= 1.2 <= hi
    assert cross.result.verdict == "equivalent"  # type: ignore[attr-defined]
    assert res.unit_of_analysis == {"A": "run", "B": "run"}
    assert [(k.metric, k.group) for k in res.only_b] == [("rtt_p99_us", "same_zone")] and res.only_a == []
    assert res.differences == []


def test_a_campaign_against_itself_is_never_better_or_worse(tmp_path: Path) -> None:
    a = campaign(tmp_path, "a", seed=3, extra=True)
    res = compare(a, a)
    assert {r.result.verdict for r in res.rows} <= {"equivalent", "inconclusive"}


def test_one_run_per_side_uses_repetitions_and_says_so(tmp_path: Path) -> None:
    a = campaign(tmp_path, "a", runs=1, reps=10, seed=4)
    b = campaign(tmp_path, "b", runs=1, reps=10, seed=5, rtt=130.0)
    run_a = next(p for p in a.iterdir() if p.is_dir())
    res = compare(run_a, b)
    assert res.unit_of_analysis == {"A": "repetition", "B": "repetition"}
    assert rows_by(res)[RTT].result.n_a == 10  # type: ignore[attr-defined]
    assert rows_by(res)[RTT].result.verdict == "worse"  # type: ignore[attr-defined]
    assert SINGLE_RUN_NOTE in res.notes
    several = compare(a, campaign(tmp_path, "c", runs=8, seed=6))
    assert SINGLE_RUN_NOTE not in several.notes


def test_fewer_than_six_runs_no_interval_and_n_too_small(tmp_path: Path) -> None:
    a = campaign(tmp_path, "a", runs=5, seed=6)
    b = campaign(tmp_path, "b", runs=8, seed=7, rtt=200.0)
    row = next(r for r in to_json(compare(a, b))["rows"] if r["group"] == "same_zone")
    assert row["n_a"] == 5 and row["ratio_ci"] is None and row["diff_ci"] is None
    assert row["verdict"] == "inconclusive (n too small)" and row["ratio"] > 1.5


def test_json_has_the_promised_fields(tmp_path: Path) -> None:
    res = compare(campaign(tmp_path, "a", seed=8), campaign(tmp_path, "b", seed=9, rtt=110.0))
    doc = json.loads(json.dumps(to_json(res)))
    for k in ("rows", "threshold", "unit_of_analysis", "differences"):
        assert k in doc
    for row in doc["rows"]:
        for k in ("workload", "metric", "group", "unit", "n_a", "n_b", "median_a", "median_b", "ratio", "ratio_ci",
                  "diff", "diff_ci", "p", "p_holm", "verdict"):
            assert k in row
        assert len(row["ratio_ci"]) == 2 and len(row["diff_ci"]) == 2
    assert doc["threshold"] == "5%"


def test_throughput_higher_is_better(tmp_path: Path) -> None:
    kw = {"workload": "tput", "unit": "Mbit/s", "workloads": ({"name": "tput", "kind": "throughput"},)}
    runs_a = [FakeRun({TPUT: normal_values(3, 900, 0.02, i)}, **kw) for i in range(8)]  # type: ignore[arg-type]
    runs_b = [FakeRun({TPUT: normal_values(3, 1100, 0.02, 50 + i)}, **kw) for i in range(8)]  # type: ignore[arg-type]
    res = compare(make_campaign(tmp_path, "a", runs_a), make_campaign(tmp_path, "b", runs_b))
    assert res.rows[0].direction == "higher" and res.rows[0].result.verdict == "better"


def test_mixed_metadata_within_a_side_is_refused_unless_allowed(tmp_path: Path) -> None:
    mixed = make_campaign(tmp_path, "mixed", [FakeRun({RTT: normal_values(3, 100, 0.02, i)},
                                                      vm_type="m5" if i % 2 else "local") for i in range(8)])
    b = campaign(tmp_path, "b", seed=10)
    with pytest.raises(AnalysisError, match=r"(?s)refusing to pool.*vm_type differs"):
        compare(mixed, b)
    res = compare(mixed, b, allow_mixed=True)
    assert any("--allow-mixed" in n for n in res.notes)


def test_what_differs_between_the_sides_is_listed(tmp_path: Path) -> None:
    a = campaign(tmp_path, "a", seed=11)
    b = campaign(tmp_path, "b", seed=12, vm_type="m5", workloads=({"name": "echo", "kind": "echo", "rate": 200},))
    res = compare(a, b)
    keys = [d["key"] for d in res.differences]
    assert "vm_type" in keys and "workloads" in keys
    detail = next(d["detail"] for d in res.differences if d["key"] == "workloads")
    assert "rate" in detail and "100" in detail and "200" in detail
    page = to_html(res)
    assert "class=diff" in page
    console = Console(width=200, record=True, color_system=None)
    render(res, console)
    lines = console.export_text().splitlines()
    assert "  vm_type: 'local' vs 'm5'" in lines  # the key named once, not "vm_type: vm_type: ..."
    assert "  workloads[echo].rate: 100 vs 200" in lines, lines


def test_filters_and_unknown_names(tmp_path: Path) -> None:
    a = campaign(tmp_path, "a", seed=13)
    b = campaign(tmp_path, "b", seed=14)
    res = compare(a, b, groups=["cross_zone"])
    assert [(r.key.metric, r.key.group) for r in res.rows] == [CROSS]
    with pytest.raises(AnalysisError, match=r"unknown metric.*'nope'.*known: rtt_p50_us"):
        compare(a, b, metrics=["nope"])
    with pytest.raises(AnalysisError, match="unknown workload"):
        compare(a, b, workloads=["nope"])


def test_thresholds_parse_and_absolute_ones_convert_units(tmp_path: Path) -> None:
    assert parse_threshold("5%").value == pytest.approx(0.05) and parse_threshold("0.05").relative
    t = parse_threshold("50us")
    assert not t.relative and t.unit == "us" and t.value == 50
    for bad in ("5", "-1%", "fast", "3 parsecs"):
        with pytest.raises(UsageError, match="--threshold"):
            parse_threshold(bad)
    a = campaign(tmp_path, "a", seed=15)
    b = campaign(tmp_path, "b", seed=16, rtt=120.0)
    res = compare(a, b, threshold="0.05ms")  # 50 us: a 20 us change does not matter
    row = rows_by(res)[RTT]
    assert row.result.decided_on == "diff" and row.result.band == pytest.approx(50)  # type: ignore[attr-defined]
    assert row.result.verdict == "equivalent"  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="other units"):
        compare(a, b, threshold="10Mbit/s")


def test_time_selection_of_one_campaign(tmp_path: Path) -> None:
    """Runs are an hour apart from 2026-11-22 10:15 UTC: the first 8 vs the next 8."""
    runs = [FakeRun({RTT: normal_values(3, 100 if i < 8 else 125, 0.02, i)}) for i in range(16)]
    c = make_campaign(tmp_path, "sched", runs)
    res = compare(f"{c}@..2026-11-22T18:00", f"{c}@2026-11-22T18:00..")
    (row,) = res.rows
    assert row.result.n_a == 8 and row.result.n_b == 8 and row.result.verdict == "worse"
    with pytest.raises(UsageError, match="selection"):
        compare(f"{c}@2026-11-22", c)
    with pytest.raises(UsageError, match=r"no repetition .* measured from 2026-11-22T10:"):
        compare(f"{c}@2030-01-01..", c)


def test_parse_when_reads_dates_times_and_spans_ago() -> None:
    now = datetime(2026, 11, 26, 12, 30, tzinfo=UTC)
    at = now.timestamp()
    assert parse_when("2026-11-16", "--since") == datetime(2026, 11, 16, tzinfo=UTC).timestamp()
    assert parse_when("2026-11-16T08:00", "--since") == datetime(2026, 11, 16, 8, tzinfo=UTC).timestamp()
    assert parse_when("2026-11-16T08:00+01:00", "--since") == datetime(2026, 11, 16, 7, tzinfo=UTC).timestamp()
    assert parse_when("now", "--until", now) == at
    assert parse_when("today", "--until", now) == datetime(2026, 11, 26, tzinfo=UTC).timestamp()
    assert parse_when("7d", "--since", now) == parse_when("-7d", "--since", now) == at - 7 * 86400
    assert parse_when("36h", "--since", now) == at - 36 * 3600
    assert parse_when("2w", "--since", now) == at - 14 * 86400
    assert parse_when("90m", "--since", now) == at - 5400
    last = cloudbench.windowed("results/w", "14d", "7d", now=now)
    this = cloudbench.windowed("results/w", "7d", "now", now=now)
    assert last == "results/w@2026-11-12T12:30:00..2026-11-19T12:30:00"
    assert this == "results/w@2026-11-19T12:30:00..2026-11-26T12:30:00"
    for bad in ("last week", "7x", "d", "2026-13-01", "-d", "nan d"):
        with pytest.raises(UsageError, match=r"--since 7y: .* is not a UTC date or time"):
            parse_when(bad, "--since 7y")


def test_cli_since_until_this_week_vs_last_week_of_one_campaign(tmp_path: Path) -> None:
    """One directory and two windows (--since/--until twice): A is the first, B the second; given once a
    flag applies to both sides; an empty window, a backward window or one window on one directory is a
    usage error naming the flags, with no traceback."""
    runs = [FakeRun({RTT: normal_values(3, 100 if i < 8 else 125, 0.02, i)}) for i in range(16)]
    c = str(make_campaign(tmp_path, "sched", runs))
    runner = CliRunner()
    out = ["--out", str(tmp_path), "--json"]
    r = runner.invoke(app, ["compare", c, "--since", "2026-11-22", "--until", "2026-11-22T18:00",
                            "--until", "2026-11-23T06:00", "--since", "2026-11-22T18:00", *out])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (row,) = doc["rows"]
    assert (row["n_a"], row["n_b"], row["verdict"]) == (8, 8, "worse")
    assert doc["a"]["path"] == f"{c}@2026-11-22T00:00:00..2026-11-22T18:00:00"
    assert doc["b"]["path"] == f"{c}@2026-11-22T18:00:00..2026-11-23T06:00:00"
    # once: both sides get it (the second campaign B selected as A is)
    r = runner.invoke(app, ["compare", c, c, "--until", "2026-11-22T18:00", *out])
    assert r.exit_code == ExitCode.USAGE and "same directory and window" in r.output
    cases = [
        (["--since", "2026-11-22", "--since", "2026-11-22T18:00", "--until", "2026-11-22T18:00"],
         "ends before it starts"),
        (["--since", "2026-11-22"], "one directory and one window"),
        (["--since", "yesterday-ish", "--since", "2026-11-22"], "--since yesterday-ish"),
        (["--since", "2030-01-01", "--since", "2026-11-22"], "--since/--until"),
        (["--since", "1d", "--since", "2d", "--since", "3d"], "once (every side) or twice"),
    ]
    for args, message in cases:
        r = runner.invoke(app, ["compare", c, *args, *out])
        assert r.exit_code == ExitCode.USAGE, (args, r.output)
        assert message in r.output and "Traceback" not in r.output, (args, r.output)
    with pytest.raises(UsageError, match="same side"):
        cloudbench.windowed(f"{c}@2026-11-22..", "2026-11-22", None)


def test_the_table_fits_80_columns_without_cutting_a_header(tmp_path: Path) -> None:
    res = compare(campaign(tmp_path, "a", seed=17), campaign(tmp_path, "b", seed=18, rtt=120.0))
    for width in (80, 160):
        console = Console(width=width, record=True, color_system=None)
        render(res, console)
        text = console.export_text()
        table_lines = [line for line in text.splitlines() if "─" in line or "rtt_p50_us" in line]
        assert all(len(line) <= width for line in table_lines)
        for header in ("verdict", "change", "metric", "group"):
            assert header in text
        assert "worse" in text and "what differs" in text


def test_html_is_self_contained_with_a_forest_plot(tmp_path: Path) -> None:
    res = compare(campaign(tmp_path, "a", seed=19), campaign(tmp_path, "b", seed=20, rtt=120.0))
    page = cloudbench.write_compare(res, tmp_path / "out")
    text = page.read_text()
    assert page == tmp_path / "out" / "compare" / "index.html"
    assert "<svg" in text and "<circle" in text and "±5%" in text
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text
    assert "<script" not in text
    assert json.loads((tmp_path / "out" / "compare" / "compare.json").read_text())["rows"]


def test_public_api_returns_a_dataframe(tmp_path: Path) -> None:
    df = cloudbench.compare(campaign(tmp_path, "a", seed=21), campaign(tmp_path, "b", seed=22, rtt=120.0))
    assert isinstance(df, pd.DataFrame)
    assert set(df["verdict"]) == {"worse", "equivalent"}
    assert df.attrs["threshold"] == "5%"


# ----------------------------------------------------------------- the command


def test_cli_fail_on_worse_exits_6_and_json(tmp_path: Path) -> None:
    a = campaign(tmp_path, "a", seed=23)
    b = campaign(tmp_path, "b", seed=24, rtt=120.0)
    runner = CliRunner()
    r = runner.invoke(app, ["compare", str(a), str(b), "--out", str(tmp_path), "--fail-on", "worse", "--json"])
    assert r.exit_code == ExitCode.WORSE == 6, r.output
    doc = json.loads(r.stdout)
    assert {row["verdict"] for row in doc["rows"]} == {"worse", "equivalent"}
    r = runner.invoke(app, ["compare", str(a), str(a), "--out", str(tmp_path), "--fail-on", "worse"])
    assert r.exit_code == ExitCode.OK, r.output
    r = runner.invoke(app, ["compare", str(a), str(b), "--out", str(tmp_path)])
    assert r.exit_code == ExitCode.OK, r.output


@pytest.mark.parametrize(("args", "code", "message"), [
    (["{a}", "{missing}"], ExitCode.ERROR, "no such directory"),
    (["{a}", "{empty}"], ExitCode.ERROR, "holds no cloudbench run"),
    (["{a}", "{a}", "--threshold", "5"], ExitCode.USAGE, "a bare number is a share"),
    (["{a}", "{a}", "--fail-on", "bad"], ExitCode.USAGE, "--fail-on"),
])
def test_cli_errors_are_one_line_without_traceback(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    a = campaign(tmp_path, "a", seed=25)
    (tmp_path / "empty").mkdir()
    paths = {"a": str(a), "missing": str(tmp_path / "missing"), "empty": str(tmp_path / "empty")}
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR",)}
    env.update(PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="200")
    r = subprocess.run([sys.executable, "-m", "cloudbench", "compare", *[x.format(**paths) for x in args],
                        "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == code, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


# ----------------------------------------------------------------- --by


def test_by_provider_across_two_campaigns(tmp_path: Path) -> None:
    aws = campaign(tmp_path, "aws", seed=30, provider="aws")
    gcp = campaign(tmp_path, "gcp", seed=31, provider="gcp", rtt=125.0)
    (res,) = cloudbench.compare_by([aws, gcp], "provider")
    assert (res.a.label, res.b.label) == ("provider=aws", "provider=gcp")
    assert rows_by(res)[RTT].result.verdict == "worse"  # type: ignore[attr-defined]
    assert [d["key"] for d in res.differences] == ["provider"]


def test_by_a_swept_value_each_level_against_the_first_or_the_baseline(tmp_path: Path) -> None:
    runs = [FakeRun({("rtt_p50_us", f"same_zone@payload={p}"): normal_values(3, level, 0.02, 10 * i + k)
                     for k, (p, level) in enumerate(((64, 100.0), (1024, 101.0), (65536, 180.0)))})
            for i in range(8)]
    sweep = make_campaign(tmp_path, "sweep", runs)
    results = cloudbench.compare_by([sweep], "payload")
    assert [(r.a.label, r.b.label) for r in results] == [("payload=64", "payload=1024"),
                                                         ("payload=64", "payload=65536")]
    assert [r.rows[0].key.group for r in results] == ["same_zone", "same_zone"]
    assert [r.rows[0].result.verdict for r in results] == ["equivalent", "worse"]
    results = cloudbench.compare_by([sweep], "payload", baseline="65536")
    assert [r.rows[0].result.verdict for r in results] == ["better", "better"]
    with pytest.raises(UsageError, match=r"--by 'size'.*swept parameter \(payload\)"):
        cloudbench.compare_by([sweep], "size")
    with pytest.raises(UsageError, match="--baseline '7'"):
        cloudbench.compare_by([sweep], "payload", baseline="7")
    page = to_html(results)
    assert page.count("<section>") == 2 and page.count("<svg") == 2 and "payload=1024 vs payload=65536" in page
    df = cloudbench.compare(sweep, by="payload")
    assert list(df["b"]) == ["payload=1024", "payload=65536"]


def test_by_vm_type_within_one_mixed_campaign_needs_no_allow_mixed(tmp_path: Path) -> None:
    mixed = make_campaign(tmp_path, "mixed", [FakeRun({RTT: normal_values(3, 100 if i % 2 else 130, 0.02, i)},
                                                      vm_type="m5" if i % 2 else "local") for i in range(16)])
    (res,) = cloudbench.compare_by([mixed], "vm_type")
    assert (res.a.label, res.b.label) == ("vm_type=local", "vm_type=m5")
    assert res.rows[0].result.n_a == 8 and res.rows[0].result.verdict == "better"
    assert "vm_type" in [d["key"] for d in res.differences]


def test_cli_by_json_and_two_sides_needed(tmp_path: Path) -> None:
    aws = campaign(tmp_path, "aws", seed=32, provider="aws")
    gcp = campaign(tmp_path, "gcp", seed=33, provider="gcp", rtt=125.0)
    runner = CliRunner()
    r = runner.invoke(app, ["compare", str(aws), str(gcp), "--by", "provider", "--json", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["by"] == "provider" and doc["levels"] == ["provider=aws", "provider=gcp"]
    assert {row["a"] for row in doc["rows"]} == {"provider=aws"} and "worse" in {row["verdict"] for row in doc["rows"]}
    r = runner.invoke(app, ["compare", str(aws), "--out", str(tmp_path)])
    assert r.exit_code == ExitCode.USAGE and "add --by KEY" in r.output
    r = runner.invoke(app, ["compare", str(aws), str(gcp), "--by", "provider", "--out", str(tmp_path)])
    assert r.exit_code == 0 and "provider=gcp vs provider=aws" in r.output, r.output


def test_each_workload_declares_which_way_is_better() -> None:
    from cloudbench.workloads import workload_kind

    expect = {("echo", "rtt_p99_us"): "lower", ("echo", "quorum_q2of3_p50_us"): "lower",
              ("echo", "timeout_frac"): "lower", ("throughput", "throughput_mbps"): "higher",
              ("throughput", "throughput_cov"): "lower", ("throughput", "loss_pct"): "lower",
              ("tbdrain", "budget_mbit"): "higher", ("colocation", "egress_mbps"): "higher",
              ("traceroute", "path_rtt_min_us"): "lower", ("traceroute", "path_hops"): None}
    for (kind, metric), direction in expect.items():
        assert workload_kind(kind).direction(metric) == direction, (kind, metric)


def test_by_hour_and_hour_selection(tmp_path: Path) -> None:
    """Runs start hourly at 10:15 UTC; 3 repetitions each: a level is one run (n too small)."""
    runs = [FakeRun({RTT: normal_values(8, 100 if i < 3 else 140, 0.02, i)}) for i in range(6)]
    c = make_campaign(tmp_path, "hours", runs)
    results = cloudbench.compare_by([c], "hour")
    assert [r.b.label for r in results] == ["hour=11", "hour=12", "hour=13", "hour=14", "hour=15"]
    assert results[0].a.label == "hour=10" and results[0].unit_of_analysis == {"A": "repetition", "B": "repetition"}
    assert [r.rows[0].result.verdict for r in results] == ["equivalent", "equivalent", "worse", "worse", "worse"]
    res = compare(c, c, hours=[10, 11])
    assert res.rows[0].result.n_a == 2  # two runs: one value per run
    with pytest.raises(AnalysisError, match="no repetition was measured in hour"):
        compare(c, c, hours=[3])
