"""Terminal tables never cut a header word: every table of the
report, plan, cost and confirm, printed at 80 and at 200 columns."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from cloudbench.analysis.confirm import ConfirmParams
from cloudbench.analysis.latency import PERCENTILES, pct_label
from cloudbench.core.tables import titled_table
from cloudbench.cost import estimate_cost
from cloudbench.report.changes import changes, render_changes
from cloudbench.report.compare import compare, compare_by
from cloudbench.report.compare_render import render
from cloudbench.report.confirm import confirm, render_confirm
from cloudbench.report.cost import render_cost
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values
from cloudbench.workloads import parse_spec
from cloudbench.workloads.echo.report import render as render_echo
from cloudbench.workloads.tbdrain.report import render as render_drains
from cloudbench.workloads.throughput.report import render as render_tput
from cloudbench.workloads.traceroute.report import render as render_paths
from tests.paths import QUICKSTART

WIDTHS = (80, 200)
DIST = ["count", "timeouts", "mean", *[pct_label(p) for p in PERCENTILES], "max"]


def printed(draw: Callable[[Console], None], width: int) -> str:
    console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    draw(console)
    return console.export_text()


def assert_headers_whole(text: str, width: int, headers: Sequence[str], messages: Sequence[str] = ()) -> None:
    """Every word of every header is a whole token; no line is wider than the console (but
    messages, which are one line each on purpose, starting with ``messages``); no ellipsis."""
    assert "…" not in text, text
    table_lines = [line for line in text.splitlines() if not line.lstrip().startswith(tuple(messages) or "\0")]
    assert max(len(line) for line in table_lines) <= width, text
    tokens = set(text.split())
    for h in headers:
        for word in h.split():
            assert word in tokens, f"header word {word!r} of {h!r} is cut or missing at {width} columns:\n{text}"


def echo_section() -> dict[str, Any]:
    dist = {"count": 123456, "timeouts": 12, "mean": 1234.5, **{pct_label(p): 1000.0 + 100 * p
                                                                for p in PERCENTILES}, "max": 987654.3}
    groups = [{"group": g, **dist} for g in ("self", "same_subnet", "cross_subnet", "cross_zone",
                                             "cross_region")]
    return {
        "kind": "echo", "groups": groups,
        "quorums": [{"quorum": "Q2/3", "group": "subnet1", **dist}, {"quorum": "Q3/3", "group": "subnet1", **dist}],
        "windows": [{"repetition": 0, "trial": "r000-t000-echo", "start_s": 30.0 * i, "group": "cross_region",
                     "count": 3000, "mean": 51234.5} for i in range(3)],
        "pairs": [{"src": "s1-1", "dst": f"s{k}-1", "group": "cross_region", "count": 2000, "timeouts": 1,
                   "mean": 51234.5, "p50": 51000.1, "p99": 53000.2, "max": 61000.9} for k in range(2, 7)],
        "level_shifts": [{"repetition": 1, "series": "s1-1>s6-1", "kind": "step", "time_s": 121.0,
                          "size": 750.25, "before": 50000.5, "after": 50750.75}],
        "workers": None,
    }


ECHO_HEADERS = ["group", *DIST, "quorum", "repetition", "trial", "start_s", "src", "dst", "p50", "p99",
                "series", "kind", "time_s", "size", "before", "after"]


def tput_section() -> dict[str, Any]:
    row = {"repetition": 0, "trial": "r000-t003-tcp", "src": "r1-a-host-1", "dst": "r2-a-host-1",
           "group": "cross_region", "mean_mbps": 9412.3, "cov": 0.0123, "p5_mbps": 9001.2,
           "p50_mbps": 9400.0, "p95_mbps": 9600.1, "retrans": 1234.0, "loss_pct": 0.12,
           "capacity_lb_mbps": 9800.0, "shift_s": 12.5, "shift_volume_mb": 1500.0, "expected_mbps": 9500.0}
    return {"kind": "throughput", "trials": [row, {**row, "src": row["dst"], "dst": row["src"]}],
            "asymmetry": [{"repetition": 0, "a": "r1-a-host-1", "b": "r2-a-host-1", "a_to_b_mbps": 9412.3,
                           "b_to_a_mbps": 8000.1, "ratio": 1.1765}],
            "cv_rmse": [{"regions": "r1→r2", "zones_x": "r1-a→r2-a", "zones_y": "r1-b→r2-a", "n": 12,
                         "cv_rmse": 0.045, "method": "interval rates"}],
            "warnings": []}


TPUT_HEADERS = ["rep", "sender→receiver", "group", "mean", "CoV", "p5", "p50", "p95", "retr", "loss %",
                "cap ≥", "shift s", "MB before", "expected", "a", "b", "a→b", "b→a", "ratio", "regions",
                "zones x", "zones y", "n", "CV_RMSE", "paired by"]


def drain_section() -> dict[str, Any]:
    row: dict[str, Any] = {"src": "r1-a-host-1", "dst": "r2-a-host-1", "trial": "r000-t000-drain",
                           "vm_type": "local.tb-small", "drained": True, "rest_s": 30.0, "notes": ""}
    for k, v in (("high_mbps", 951.25), ("low_mbps", 101.5), ("time_to_empty_s", 12.25),
                 ("budget_mbit", 10234.0), ("refill_mbps", 99.75)):
        row[k], row[f"{k}_sd"] = v, v / 50
    row.update(expected_high_mbps=950.0, expected_low_mbps=100.0, expected_time_to_empty_s=12.0,
               expected_budget_mbit=10000.0, expected_refill_mbps=100.0)
    return {"kind": "tbdrain", "drains": [row, {**row, "drained": False}], "warnings": []}


DRAIN_HEADERS = ["pair", "vm_type", "drained", "high", "low", "empty after", "budget", "rest", "refill"]


def paths_section() -> dict[str, Any]:
    return {"kind": "traceroute",
            "paths": [{"repetition": r, "src": "r1-a-host-1", "dst": "r3-a-host-1", "hops": 7, "nodes": 9,
                       "anonymous": 1, "diamonds": 2, "max_width": 2, "max_length": 3,
                       "rtt_min_us": 81234.55, "as_path": "64500 64501 64502"} for r in range(2)],
            "changes": [],
            "inflation": [{"src": "r1-a-host-1", "dst": "r3-a-host-1", "distance_km": 5837.2,
                           "min_rtt_us": 81234.5, "bound_c_us": 38940.1, "inflation_c": 2.086,
                           "inflation_fibre": 1.39}]}


PATH_HEADERS = ["repetition", "src", "dst", "hops", "nodes", "anonymous", "diamonds", "max_width",
                "max_length", "rtt_min_us", "as_path", "distance_km", "min_rtt_us", "bound_c_us",
                "inflation_c", "inflation_fibre"]


@pytest.mark.parametrize("width", WIDTHS)
def test_echo_tables_keep_every_header_word(width: int) -> None:
    text = printed(lambda c: render_echo("echo", echo_section(), c, {"windows": True, "pairs": True}), width)
    assert_headers_whole(text, width, ECHO_HEADERS)


@pytest.mark.parametrize("width", WIDTHS)
def test_throughput_tables_keep_every_header_word(width: int) -> None:
    text = printed(lambda c: render_tput("tcp", tput_section(), c), width)
    assert_headers_whole(text, width, TPUT_HEADERS)


@pytest.mark.parametrize("width", WIDTHS)
def test_drain_table_keeps_every_header_word(width: int) -> None:
    text = printed(lambda c: render_drains("drain", drain_section(), c), width)
    # at 80 columns the headers may be abbreviated, with a legend naming them in full
    assert_headers_whole(text, width, DRAIN_HEADERS)


@pytest.mark.parametrize("width", WIDTHS)
def test_traceroute_tables_keep_every_header_word(width: int) -> None:
    text = printed(lambda c: render_paths("paths", paths_section(), c), width)
    assert_headers_whole(text, width, PATH_HEADERS)


@pytest.mark.parametrize("width", WIDTHS)
def test_plan_and_cost_tables_keep_every_header_word(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from cloudbench.cli import spec as spec_cli

    aws = QUICKSTART.parent / "stormcloud-aws.yaml"
    spec = parse_spec(aws.read_text(), str(aws))
    text = printed(lambda c: render_cost(estimate_cost(spec), c), width)
    assert_headers_whole(text, width, ["provider", "vm_type", "hosts", "VM-hours", "from/to", "to/from"])

    console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(spec_cli, "out", console)
    spec_cli.plan(QUICKSTART)
    assert_headers_whole(console.export_text(), width,
                         ["#", "repetition", "trial", "workload", "hosts", "pairs", "est."])


@pytest.mark.parametrize("width", WIDTHS)
def test_confirm_never_breaks_a_metric_name(width: int, tmp_path: Path) -> None:
    metrics = ["rtt_mean_us", "quorum_q2of3_p99_us", "timeout_frac"]
    camp = make_campaign(tmp_path, "c", [FakeRun({(m, "cross_subnet"): normal_values(12, 500.0, 0.05, i)
                                                  for i, m in enumerate(metrics)})])
    result = confirm(camp, ConfirmParams(subsets=20))
    text = printed(lambda c: render_confirm(result, c), width)
    assert_headers_whole(text, width, ["group", "median", "95% CI", "±rel", "n for ±1%/±5%",
                                       *metrics, "cross_subnet"], messages=("warning:", "note:"))


@pytest.mark.parametrize("width", [20, 40, 60, 80, 100, 120, 160, 200])
def test_a_table_narrows_then_abbreviates_then_stacks(width: int) -> None:
    t = titled_table("t", ["repetition", "source host", "destination", "value"], left=["source host"],
                     short={"repetition": "rep", "destination": "dst"})
    for i in range(4):
        t.add_row(str(i), "r1-a-host-1", "r2-b-host-9", f"{math.pi * 10 ** i:.2f}")
    text = printed(lambda c: c.print(t), width)
    assert_headers_whole(text, width, ["source host", "value"])
    legend = "rep = repetition" in text
    assert ("repetition" in text.split()) or legend
    if width >= 60:  # 54 columns at natural width
        assert not legend and text.splitlines()[2].split() == ["repetition", "source", "host", "destination",
                                                               "value"]


LONG_GROUP = "cross_region_eu_west_1_to_ap_southeast_2@payload=65536,rate=1000"  # 64 characters
LONG_METRIC = "throughput_reverse_p99_9_mbps"
COMPARE_PROSE = ("change:", "note:", "only in")  # legend and notes: one line each when not on a terminal
COMPARE_HEADERS = ["metric", "group", "n A/B", "change", "95% CI", "p (Holm)", "verdict", LONG_GROUP, LONG_METRIC]


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_by_and_changes_keep_long_names_and_headers_whole(width: int, tmp_path: Path) -> None:
    """compare, compare --by and compare --changes at 80 columns with a 64-character group name: the
    stacked layout used to fold the name into its column (``...rate=100`` / ``0``)."""
    def campaign(name: str, rtt: float, seed: int, **kw: Any) -> Path:
        return make_campaign(tmp_path, name, [
            FakeRun({("rtt_p50_us", LONG_GROUP): normal_values(3, rtt, 0.02, seed + i),
                     (LONG_METRIC, "same_zone"): normal_values(3, 900.0, 0.02, seed + 50 + i)}, **kw)
            for i in range(8)])

    a, b = campaign("a", 100.0, 0), campaign("b", 120.0, 100, provider="aws")
    text = printed(lambda c: render(compare(a, b), c), width)
    assert_headers_whole(text, width, COMPARE_HEADERS, messages=("what differs", "B vs A", *COMPARE_PROSE))
    text = printed(lambda c: render(compare_by([a, b], "provider"), c), width)
    assert_headers_whole(text, width, COMPARE_HEADERS, messages=("what differs", "provider=", *COMPARE_PROSE))
    sched = {"every": 3600.0, "count": 48, "timezone": "UTC", "day": 86400.0}
    rng = np.random.default_rng(3)
    week = make_campaign(tmp_path, "week", [
        FakeRun({("rtt_p50_us", LONG_GROUP): list(1000 + (300 if i >= 24 else 0) + rng.normal(0, 20, 3)),
                 (LONG_METRIC, LONG_GROUP): list(900 - (200 if i >= 30 else 0) + rng.normal(0, 10, 3))},
                schedule=sched) for i in range(48)])
    res = changes(week)
    assert len(res["changes"]) == 2
    text = printed(lambda c: render_changes(res, c), width)
    assert_headers_whole(text, width, ["metric", "group", "since (UTC)", "before", "after", "size", "95% CI",
                                       "p (Holm)", LONG_GROUP, LONG_METRIC], messages=("changes in", "since:", "note:"))


def assert_rows_whole(text: str, rows: Sequence[Sequence[str]]) -> None:
    """Each row's cells on one line of the printed table, in order (a row wrapped over two lines
    reads as two rows)."""
    lines = text.splitlines()
    for row in rows:
        assert any(_in_order(line, row) for line in lines), f"row {row} is not on one line:\n{text}"


def _in_order(line: str, cells: Sequence[str]) -> bool:
    at = 0
    for c in cells:
        at = line.find(c, at)
        if at < 0:
            return False
        at += len(c)
    return True


@pytest.mark.parametrize("width", WIDTHS)
def test_no_row_wraps_even_when_its_cells_have_spaces(width: int) -> None:
    """Cells like an interval with its coverage (``625..21170 (94%)``) or ``[31.4–82.3]`` were
    wrapped at their space at 80 columns, so a row read as two; now the headers wrap, the cells
    never, and a table too wide for them is abbreviated or stacked."""
    cols = ["repetition", "pair", "kind", "origin", "at s", "for s", "size µs", "95 % CI (coverage)", "p value"]
    t = titled_table("events", cols, left=["pair", "kind", "origin"], short={"repetition": "rep"})
    rows = [[str(i + 1), f"s{i}-1>s{i + 1}-1", "spike", "link", "7.02", "0.40", "50123", "625..21170 (94%)",
             "1e-06"] for i in range(3)]
    for r in rows:
        t.add_row(*r)
    text = printed(lambda c: c.print(t), width)
    assert_headers_whole(text, width, ["pair", "kind", "origin"])
    side_by_side = any(_in_order(line, ["pair", "kind", "origin"]) for line in text.splitlines())
    if side_by_side:
        assert_rows_whole(text, rows)
    else:  # stacked: a row per column, each row of the data a column; its cells whole
        assert_rows_whole(text, [[r[7] for r in rows]])
    assert side_by_side == (width == 200)  # 83 columns at their narrowest: stacked at 80
