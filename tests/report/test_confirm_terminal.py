"""`confirm` in a terminal at any n: one line for the series too short for a CI, a reason for every
bound not reached, no empty figures, its files under ``confirm/``, rows that fit 80 columns."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from cloudbench.analysis.confirm import ConfirmParams
from cloudbench.core.units import fmt_quantity
from cloudbench.errors import ResultError
from cloudbench.report.confirm import (
    confirm,
    confirm_dir,
    confirm_document,
    convergence_plot,
    render_confirm,
    write_confirm,
)
from cloudbench.report.html import find_confirm
from cloudbench.report.threshold import parse_threshold, threshold_in
from cloudbench.store.rundir import RunDir
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values

METRICS = ("rtt_p50_us", "rtt_p99_us", "quorum_q2of3_p99_us")
GROUPS = ("same_subnet", "cross_zone")


def _campaign(tmp_path: Path, n: int, name: str = "c") -> Path:
    series = {(m, g): normal_values(n, 500.0 * (i + 1), 0.05, seed=i)
              for i, (m, g) in enumerate((m, g) for m in METRICS for g in GROUPS)}
    return make_campaign(tmp_path, name, [FakeRun(series)])


def _printed(path: Path, width: int, params: ConfirmParams | None = None) -> str:
    console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    render_confirm(confirm(path, params or ConfirmParams(subsets=20)), console)
    return console.export_text()


@pytest.mark.parametrize("width", [80, 200])
def test_below_the_ci_minimum_one_line_says_how_many_more(tmp_path: Path, width: int) -> None:
    text = _printed(_campaign(tmp_path, 2), width)
    assert " ".join(text.split()) == ("warning: n = 2: no exact 95 % CI of the median before n = 6; run 4 more "
                                      "repetitions (6 series)")  # one line, wrapped at the width, no table


def test_the_line_counts_for_the_quantile_chosen(tmp_path: Path) -> None:
    text = " ".join(_printed(_campaign(tmp_path, 10), 80, ConfirmParams(quantile=0.9, subsets=20)).split())
    assert "n = 10: no exact 95 % CI of the p90 before n = 29; run 19 more repetitions (6 series)" in text
    assert text.count("no exact") == 1


@pytest.mark.parametrize("width", [80, 200])
def test_every_bound_not_reached_says_why(tmp_path: Path, width: int) -> None:
    """6 repetitions: a median CI at n = 6 only, so no bound can be predicted; the rows' ``-`` are
    explained in one line (before: ``1%: -`` with the reason only in confirm.json)."""
    path = _campaign(tmp_path, 6)
    result = confirm(path, ConfirmParams(subsets=20))
    missed = sum(1 for r in result.series for t in r.targets if t.n_needed is None)
    assert missed > 0
    text = " ".join(_printed(path, width).split())
    assert "±1% not reached in 6 series" in text
    assert "a CI exists only at n = 6, too few sizes to predict" in text
    doc = confirm_document(result)
    assert all(any("not reached by the 6 repetitions" in w for w in s["warnings"])
               for s in doc["series"] if any(not t["reached"] for t in s["targets"]))


@pytest.mark.parametrize("width", [80, 200])
def test_cells_fit_whole_and_never_wrap(tmp_path: Path, width: int) -> None:
    """Every cell of every series is whole on one line (a row side by side, or the table stacked
    when a 19-character metric name leaves no room), and the table is no wider than the console."""
    path = _campaign(tmp_path, 12)
    text = _printed(path, width)
    lines = text.splitlines()
    messages = ("warning:", "note:")
    table = [line for line in lines if line.strip() and not line.lstrip().startswith(messages)
             and not line.rstrip().endswith(":")]
    assert all(len(line) <= width for line in table), text
    for r in confirm(path, ConfirmParams(subsets=20)).series:
        ci = r.ci
        for cell in (r.series.key.metric, r.series.key.group, fmt_quantity(ci.estimate, r.series.unit)):
            assert any(cell in line for line in table), f"{cell!r} cut or wrapped at {width} columns:\n{text}"
    assert "ms" in text.split()  # 1000-3000 us read as ms, not 2.99e+03 us
    assert "…" not in text


def test_files_go_under_confirm_and_single_sizes_draw_no_figure(tmp_path: Path) -> None:
    short = _campaign(tmp_path, 6, "short")
    json_path, figures = write_confirm(confirm(short, ConfirmParams(subsets=20)), confirm_dir(short))
    assert json_path == short / "confirm" / "confirm.json"
    assert figures == {}  # a curve of one size (n = 6) is a point: no empty panel
    assert not list(short.glob("*.png")) and not list((short / "confirm").glob("*.png"))
    longer = _campaign(tmp_path, 12, "longer")
    _, figures = write_confirm(confirm(longer, ConfirmParams(subsets=20)), confirm_dir(longer))
    assert len(figures) == 6 and all((longer / "confirm" / f).is_file() for f in figures.values())


def test_the_html_report_reads_confirm_json_new_and_old_location(tmp_path: Path) -> None:
    camp = _campaign(tmp_path, 6)
    run = RunDir(next(camp.glob("*/manifest.json")).parent)
    assert find_confirm(run) is None
    (camp / "confirm.json").write_text(json.dumps({"schema": 1}))  # where confirm wrote before
    assert find_confirm(run) == camp / "confirm.json"
    write_confirm(confirm(camp, ConfirmParams(subsets=20)), confirm_dir(camp))
    assert find_confirm(run) == camp / "confirm" / "confirm.json"


@pytest.mark.parametrize(("value", "unit", "text"), [
    (3980.0, "us", "3.98 ms"), (113.4, "us", "113.4 µs"), (2_500_000.0, "us", "2.5 s"),
    (0.012, "1", "1.2%"), (47.82, "Mbit/s", "47.82 Mbit/s"), (float("nan"), "us", "-"), (None, "us", "-"),
])
def test_numbers_in_their_natural_unit(value: float | None, unit: str, text: str) -> None:
    assert fmt_quantity(value, unit) == text


def test_a_running_run_is_left_out_with_a_note_or_pooled_on_request(tmp_path: Path) -> None:
    series = {("rtt_p50_us", "same_zone"): normal_values(8, 100.0, 0.05, seed=1)}
    camp = make_campaign(tmp_path, "c", [FakeRun(series), FakeRun(series, status="running")])
    running = sorted(p.name for p in camp.iterdir())[-1]
    result = confirm(camp, ConfirmParams(subsets=10))
    assert result.series[0].series.n == 8  # was 16: the running run's repetitions were pooled
    assert any(f"run {running} is still running" in n and "--include-running" in n for n in result.dataset.notes)
    assert confirm(camp, ConfirmParams(subsets=10), include_running=True).series[0].series.n == 16
    alone = make_campaign(tmp_path, "r", [FakeRun(series, status="running")])
    with pytest.raises(ResultError, match="every run is still running; pass --include-running"):
        confirm(alone, ConfirmParams(subsets=10))


SWEEP = [f"{g}@payload={p}" for g in ("same_subnet", "cross_zone") for p in (64, 1024, 16384, 65536)]


@pytest.mark.parametrize("width", [80, 200])
def test_swept_groups_sort_numerically_in_tables_that_fit(tmp_path: Path, width: int) -> None:
    """payload-sweep's 48 series: a table per metric where one is too wide (at 80 columns it was
    stacked 2 series wide), rows never wrapped, payloads in numeric order, shared warnings once."""
    series = {(m, g): normal_values(6, 100.0 * (j + 1), 0.3, seed=i * 10 + j)
              for i, m in enumerate(("rtt_mean_us", "rtt_p50_us")) for j, g in enumerate(SWEEP)}
    series |= {("timeout_frac", g): [0.0] * 6 for g in SWEEP}
    camp = make_campaign(tmp_path, "sweep", [FakeRun(series)])
    text = _printed(camp, width)
    lines = text.splitlines()
    rows = [line.split() for line in lines if (line.split() and line.split()[0] in SWEEP)
            or (len(line.split()) > 1 and line.split()[1] in SWEEP)]
    assert len(rows) == 3 * len(SWEEP), text  # a line per series: never stacked, never wrapped
    assert all(len(line) <= width for line in lines if line.startswith(" ") and not line.lstrip().startswith("!")), text
    order = [g for row in rows for g in row if g in SWEEP][:4]
    assert order == [f"cross_zone@payload={p}" for p in (64, 1024, 16384, 65536)], order
    assert "e+" not in text  # a relative width of 2,180%, not 2.18e+03%
    assert text.count("the estimate is 0") == 1 and "(8 series: timeout_frac" in " ".join(text.split())


def test_the_convergence_files_read_in_natural_units(tmp_path: Path) -> None:
    """confirm/*.png of the compressed-day campaign: 'timeout_frac [1]' and RTTs of 10 ms as 10000 [us]."""
    rtt = make_campaign(tmp_path, "rtt", [FakeRun({("rtt_p50_us", "g"): normal_values(12, 10_000.0, 0.05, 1)})])
    frac = make_campaign(tmp_path, "frac", [FakeRun({("timeout_frac", "g"): [0.012 + 0.001 * (i % 3)
                                                                             for i in range(12)]}, unit="1")])
    for camp, label, top in ((rtt, "rtt_p50_us [ms]", 20.0), (frac, "timeout_frac [%]", 2.0)):
        params = ConfirmParams(subsets=20)
        (r,) = confirm(camp, params).series
        (ax,) = convergence_plot(r, params).axes
        assert ax.get_ylabel() == label
        estimate = ax.lines[0].get_ydata()
        assert 0.5 * top / 2 < min(estimate) and max(estimate) < top, (label, estimate)


def test_a_zero_series_with_a_zero_ci_does_not_call_its_reached_bounds_undefined(tmp_path: Path) -> None:
    """payload-sweep's timeout_frac rows (0 timeouts): '0%  0–0  0%  6/6' and under the table 'the
    estimate is 0: a relative error bound is undefined' beside the bounds shown reached at n = 6."""
    zero = make_campaign(tmp_path, "zero", [FakeRun({("timeout_frac", "g"): [0.0] * 8}, unit="1")])
    text = _printed(zero, 200)
    assert "6/6" in text and "undefined" not in text
    assert "the estimate is 0 and so is its CI (0–0): every relative error bound holds trivially" in text
    wide = make_campaign(tmp_path, "wide", [FakeRun({("m", "g"): [-2.0, -1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0]})])
    assert "the estimate is 0: a relative error bound is undefined" in _printed(wide, 200)


def test_the_ci_cell_names_its_unit(tmp_path: Path) -> None:
    """``0.3598–3.422`` under a median of ``1.072 ms`` left the reader to guess the interval's unit;
    the cell names it (the interval is in its estimate's natural unit)."""
    text = _printed(_campaign(tmp_path, 12), 200)
    rows = [line.split() for line in text.splitlines() if re.search(r" [\d.,]+–[\d.,]+", line)]
    assert len(rows) == len(METRICS) * len(GROUPS), text
    for r in rows:
        ci_at = next(i for i, w in enumerate(r) if re.fullmatch(r"[\d.,]+–[\d.,]+", w))
        assert r[ci_at + 1] in {"µs", "ms", "s"} and r[ci_at - 1] in {"µs", "ms", "s"}, r


def test_microseconds_print_as_us_sign_and_the_threshold_still_reads_us(tmp_path: Path) -> None:
    """confirm printed ``113.4 us`` and ``85.2–142.9 us`` where the report prints ``µs``; the data keep
    their unit ``us`` and ``--threshold 50us`` still parses."""
    camp = make_campaign(tmp_path, "c", [FakeRun({("rtt_p50_us", "same_subnet"): normal_values(12, 113.4, 0.05, 1)})])
    text = _printed(camp, 200)
    words = text.split()
    assert "µs" in words and "us" not in words, text
    assert threshold_in(parse_threshold("50us"), "us") == threshold_in(parse_threshold("50µs"), "us") == 50
    assert confirm(camp, ConfirmParams(subsets=20)).series[0].series.unit == "us"


def test_a_series_rough_guesses_share_one_line(tmp_path: Path) -> None:
    """The compressed-day confirm printed the same 60-word reason twice per series, once for ±1% and
    once for ±5% ("ROUGH GUESS ... about 17524 repetitions ... not reliable: the fit spans only ...")."""
    path = _campaign(tmp_path, 12)
    result = confirm(path, ConfirmParams(subsets=20))
    both = [r for r in result.series if sum(t.prediction is not None and not t.prediction.reliable
                                            for t in r.targets) == 2]
    assert both  # the data give series with two rough guesses: the test tests something
    text = " ".join(_printed(path, 200).split())
    for r in both:
        name = f"{r.series.key.metric} / {r.series.key.group}: ROUGH GUESS"
        assert text.count(name) == 1, name
        (e1, p1), (e2, p2) = ((t.error, t.prediction) for t in r.targets if t.prediction is not None)
        assert (f"{name} from the 1/√n law: ±{e1 * 100:g}% after about {p1.n} repetitions, ±{e2 * 100:g}% after "
                f"about {p2.n} ({p1.more} and {p2.more} more than the 12 measured); not reliable:") in text
