"""Figures that show something: the p50 and p99 grids each on a colour
scale of its own, throughput panels scaled to their data, a note where a figure would have
nothing to draw, and the payload sweep's figure in report/figures/ in the house style and on
the page. The figures are inspected as matplotlib objects (norms, limits, line colours)."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.colors import to_hex

from cloudbench.report.build import build_report
from cloudbench.report.figures import Note, Plot, section_figures
from cloudbench.report.figures.confirm import convergence_figure
from cloudbench.report.figures.echo import grid_cell, grid_plot, sweep_plots, time_plot
from cloudbench.report.figures.style import GROUP_STYLES
from cloudbench.report.figures.throughput import drain_figures, series_plot
from cloudbench.report.files import write_report
from cloudbench.report.html import write_html
from cloudbench.store.rundir import RunDir
from cloudbench.testing.fake_results import FakeRun, make_campaign

HOSTS = ["s1-1", "s1-2", "s2-1", "s3-1"]


def plot(drawn: Plot | Note | None) -> Plot:
    assert isinstance(drawn, Plot), drawn
    return drawn


def data_axes(p: Plot) -> list[Axes]:
    """The panels of a figure (not its colour bars)."""
    return [ax for ax in p.figure.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]


def echo_pairs(rng: np.random.Generator) -> list[dict[str, Any]]:
    """p50 between 20 and 110 µs, p99 between 100 and 1 200 µs, as the quickstart gives."""
    rows = []
    for a in HOSTS:
        for b in HOSTS:
            p50 = float(rng.uniform(20, 110))
            rows.append({"src": a, "dst": b, "group": "same_zone", "count": 2000, "timeouts": 0, "mean": p50,
                         "p50": p50, "p99": float(rng.uniform(100, 1200)), "max": 2000.0})
    return rows


def test_the_p50_and_p99_grids_each_have_a_colour_scale_spanning_their_own_values() -> None:
    """On one scale (20 µs to 1.2 ms) every p50 cell sat in the scale's dark bottom third."""
    pairs = echo_pairs(np.random.default_rng(3))
    p = plot(grid_plot("echo", {"kind": "echo", "hosts": HOSTS, "pairs": pairs}))
    images = {ax.get_title(): ax.images[0] for ax in data_axes(p)}
    assert set(images) == {"p50 RTT", "p99 RTT"}
    for key in ("p50", "p99"):
        norm = images[f"{key} RTT"].norm
        values = [r[key] for r in pairs]
        assert norm.vmin == pytest.approx(min(values)) and norm.vmax == pytest.approx(max(values)), key
        # the cells use the whole scale: the middle value sits in its middle, not at one end
        assert 0.2 < float(norm(float(np.median(values)))) < 0.8, key
    # a colour bar per grid, each labelled with its percentile
    bars = [ax.get_ylabel() for ax in p.figure.axes if ax.get_label() == "<colorbar>"]
    assert sorted(b.split()[0] for b in bars) == ["p50", "p99"]
    assert "each on its own colour scale" in p.alt


def tput(series: list[list[float]], capacity: float | None = None, expected: float | None = None) -> dict[str, Any]:
    """A throughput section: series k on path k (k = 0, 1, ...), repetition 0."""
    trials, out = [], []
    for k, mbps in enumerate(series):
        src, dst = f"a{k}", f"b{k}"
        key = {"repetition": 0, "trial": f"r000-t{k:03d}-tcp", "src": src, "dst": dst}
        trials.append({**key, "group": "cross_region", "mean_mbps": float(np.mean(mbps)),
                       "capacity_lb_mbps": capacity, "expected_mbps": expected, "shift_s": None})
        out.append({**key, "direction": "forward", "group": "cross_region", "burst": [0] * len(mbps),
                    "t_s": [i + 0.5 for i in range(len(mbps))], "mbps": mbps})
    return {"kind": "throughput", "trials": trials, "series": out, "asymmetry": []}


def test_throughput_panels_show_their_data_clear_of_the_borders() -> None:
    """Twelve paths at 95 ± 1 Mbit/s on an axis from 0 were flat lines against the top border."""
    rng = np.random.default_rng(5)
    series = [list(95.0 + rng.normal(0, 0.6, 10)) for _ in range(6)]
    p = plot(series_plot("tcp", tput(series, expected=95.6)))
    axes = data_axes(p)
    assert len(axes) == 6
    lo = min(min(s) for s in series)
    hi = max(max(s) for s in series)
    for ax in axes:
        bottom, top = ax.get_ylim()
        span = top - bottom
        assert bottom < lo and top > hi
        assert top - hi >= 0.05 * span and lo - bottom >= 0.05 * span  # a margin above and below
        assert (hi - lo) >= 0.5 * span  # the data fill the panel, not 2 % of it
    assert len({ax.get_ylim() for ax in axes}) == 1  # one scale: paths compare at a glance


def test_a_rate_drop_keeps_zero_on_the_axis_and_room_above() -> None:
    series = [[950.0] * 10 + [100.0] * 10, [940.0] * 20]
    p = plot(series_plot("tcp", tput(series, capacity=960.0)))
    for ax in data_axes(p):
        bottom, top = ax.get_ylim()
        assert bottom == 0.0 and top >= 960.0 * 1.1
        assert "axis not from 0" not in ax.get_ylabel()


def test_the_repetitions_of_a_path_share_its_panel() -> None:
    sec = tput([[90.0 + k] * 5 for k in range(2)])
    second = {**sec["series"][0], "repetition": 1, "trial": "r001-t000-tcp", "mbps": [93.0] * 5}
    sec["series"].append(second)
    sec["trials"].append({**sec["trials"][0], "repetition": 1, "trial": "r001-t000-tcp", "mean_mbps": 93.0})
    p = plot(series_plot("tcp", sec))
    axes = data_axes(p)
    assert len(axes) == 2 and len(axes[0].get_lines()) == 2 and len(axes[1].get_lines()) == 1
    assert {ln.get_linestyle() for ln in axes[0].get_lines()} == {"-", "--"}


def test_a_drain_panel_keeps_its_curve_below_the_top_border() -> None:
    sec = {"kind": "tokenbucket",
           "drains": [{"repetition": 0, "trial": "r000-t000-drain", "src": "a", "dst": "b", "high_mbps": 951.0,
                       "low_mbps": 101.0, "time_to_empty_s": 12.0}],
           "series": [{"repetition": 0, "trial": "r000-t000-drain", "src": "a", "dst": "b", "burst": [0] * 30,
                       "t_s": list(range(30)), "mbps": [951.0] * 12 + [101.0] * 18}]}
    (p,) = drain_figures("drain", sec)
    (ax,) = data_axes(plot(p))
    assert ax.get_ylim()[0] == 0.0 and ax.get_ylim()[1] >= 951.0 * 1.1


@pytest.mark.parametrize("kind, section", [
    ("throughput", tput([[float("nan")] * 5, [float("nan")] * 5])),
    ("tokenbucket", {"kind": "tokenbucket",
                     "drains": [{"repetition": 0, "trial": "t", "src": "a", "dst": "b", "vm_type": "m5.large",
                                 "drained": False, "rest_s": None, "high_mbps": None}],
                     "series": [{"repetition": 0, "trial": "t", "src": "a", "dst": "b", "burst": [0, 0],
                                 "t_s": [0.5, 1.5], "mbps": [None, None]}]}),
    ("echo", {"hosts": HOSTS, "pairs": [{"src": "s1-1", "dst": "s1-2", "group": "same_subnet", "count": 0,
                                          "timeouts": 10, "p50": None, "p99": None}],
              "groups": [], "boxes": [], "tails": [], "windows": [], "quorums": [], "sweep": []}),
    ("echo", {"groups": [], "pairs": [], "boxes": [], "tails": [], "windows": [], "quorums": [], "sweep": []}),
])
def test_a_section_with_nothing_to_draw_gets_a_note_and_no_file(kind: str, section: dict[str, Any],
                                                                 tmp_path: Path) -> None:
    drawn = section_figures("w", {**section, "kind": kind})
    assert drawn and all(isinstance(d, Note) for d in drawn), drawn
    assert all(d.text.startswith("No ") for d in drawn if isinstance(d, Note))
    run = fake_run(tmp_path)
    rep = build_report(run)
    rep["workloads"] = {"w": {**section, "kind": kind}}
    page, *files = write_html(run, rep)
    text = page.read_text()
    assert files == [] and not (page.parent / "figures").exists()
    for d in drawn:
        assert isinstance(d, Note) and html.escape(d.text) in text


def test_confirm_with_too_few_repetitions_for_a_curve_gives_a_note_not_empty_panels() -> None:
    """n = 2 repetitions: each series has one subset size, a point: the page drew 12 empty panels."""
    series = [{"workload": "w", "metric": f"m{i}", "group": "g", "unit": "us", "n": 2, "estimate": 100.0,
               "n_required_for_ci": 6,
               "convergence": {"sizes": [2], "estimate": [100.0], "lower": [None], "upper": [None]},
               "targets": [{"error": 0.05, "n_needed": None}]} for i in range(12)]
    drawn = convergence_figure({"series": series, "params": {"quantile_name": "median"}})
    assert isinstance(drawn, Note) and "none of the 12 series" in drawn.text and "n = 2" in drawn.text
    assert "exact CI of the median (6), so it needs 7 or more" in drawn.text
    assert convergence_figure({"series": [], "params": {}}) is None


def fake_run(tmp_path: Path) -> RunDir:
    camp = make_campaign(tmp_path, "c", [FakeRun({("m", "g"): [1.0]}, workloads=[])])
    return RunDir(next(camp.glob("*/manifest.json")).parent)


def sweep_rows() -> list[dict[str, Any]]:
    rows = []
    for group, base in (("self", 40.0), ("same_subnet", 60.0), ("cross_zone", 65.0)):
        for payload in (64, 1024, 16384, 65536):
            p50, p99 = base + payload / 1024, 20 * base + payload / 64
            rows.append({"group": group, "payload": payload, "sweep": f"payload={payload}", "count": 1500,
                         "timeouts": 0, "p50": p50, "p99": p99, "repetitions": 6,
                         "rep_p50_median": p50, "rep_p50_lower": 0.9 * p50, "rep_p50_upper": 1.1 * p50,
                         "rep_p99_median": p99, "rep_p99_lower": None, "rep_p99_upper": None})
    return rows


def test_the_payload_figure_is_in_report_figures_in_the_house_style_and_on_the_page(tmp_path: Path) -> None:
    """It was report/<w>_latency_vs_payload.png in matplotlib's default colours, not on the page."""
    run = fake_run(tmp_path)
    rep = build_report(run)
    rows = sweep_rows()
    rep["workloads"] = {"payload": {"kind": "echo", "sweep": rows, "groups": [], "pairs": [], "boxes": [], "tails": [],
                                    "windows": [], "quorums": []}}
    written = write_report(run, rep)
    assert not [p for p in written if p.suffix == ".png"]  # no figure beside report.json
    page, *files = write_html(run, rep)
    figures = page.parent / "figures"
    assert figures / "payload-sweep-payload.png" in files and (figures / "payload-sweep-payload.svg").is_file()
    assert 'id="fig-payload-sweep-payload"' in page.read_text()
    assert not list(page.parent.glob("*.png"))

    (p,) = section_figures("payload", rep["workloads"]["payload"])
    axes = data_axes(plot(p))
    assert [ax.get_ylabel() for ax in axes] == ["p50 RTT (µs)", "p99 RTT (µs)"]
    for ax, key in zip(axes, ("p50", "p99"), strict=True):
        lines = {c.get_label(): c.lines[0] for c in ax.containers}  # errorbar(): (line, caps, bars)
        assert set(lines) == {"self", "same_subnet", "cross_zone"}
        for group, ln in lines.items():
            st = GROUP_STYLES[group]
            assert to_hex(ln.get_color()) == st.color.lower() and ln.get_marker() == st.marker
            assert list(ln.get_xdata()) == [64, 1024, 16384, 65536]
            assert list(ln.get_ydata()) == [r[f"rep_{key}_median"] for r in rows if r["group"] == group]


def test_the_convergence_axis_counts_whole_repetitions() -> None:
    """Sizes 6, 7, 8 were ticked 6.00, 6.25, 6.50 ...: n is a count."""
    series = [{"workload": "w", "metric": "m", "group": "g", "unit": "us", "n": 8, "estimate": 100.0,
               "convergence": {"sizes": [6, 7, 8], "estimate": [100.0, 99.0, 99.5], "lower": [90.0, 91.0, 92.0],
                               "upper": [110.0, 108.0, 107.0]}, "targets": [{"error": 0.05, "n_needed": 7}]}]
    p = plot(convergence_figure({"series": series, "params": {"quantile_name": "median"}}))
    (ax,) = data_axes(p)
    p.figure.canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_the_colocation_figure_is_on_the_page_not_beside_report_json(tmp_path: Path) -> None:
    """It was report/<w>_egress_r<rep>.png in matplotlib's tab10 colours, not on the page."""
    run = fake_run(tmp_path)
    rep = build_report(run)
    hosts = [{"repetition": 0, "host": h, "group": g, "egress_mbps": e, "baseline_mbps": 78.0, "nominal_mbps": 76.5,
              "egress_share": e / 76.5, "ingress_mbps": e, "physical_host": None}
             for h, g, e in (("a1", "G1", 31.0), ("a2", "G1", 30.0), ("c1", "-", 77.0))]
    rep["workloads"] = {"colo": {"kind": "colocation", "hosts": hosts, "groups": [], "loss": []}}
    assert not [p for p in write_report(run, rep) if p.suffix == ".png"]
    page, *files = write_html(run, rep)
    assert page.parent / "figures" / "colo-egress.png" in files and 'id="fig-colo-egress"' in page.read_text()
    (p,) = section_figures("colo", rep["workloads"]["colo"])
    (ax,) = data_axes(plot(p))
    g1 = [b for b in ax.patches if to_hex(b.get_facecolor()) == GROUP_STYLES["same_subnet"].color.lower()]
    assert len(g1) == 2  # G1's two hosts in the house palette's first colour
    assert ax.get_ylim()[1] >= 78.0 * 1.1


def test_a_single_heat_map_has_its_whole_title_inside_the_figure() -> None:
    """warm-vs-cold's warm workload (20 echoes a pair: no p99) draws the p50 grid alone, a figure too
    narrow for the one-line title: it was cut at both ends ("varm: RTT per … (hatched: no value")."""
    pairs = [{**r, "count": 20, "p99": None} for r in echo_pairs(np.random.default_rng(5))]
    p = plot(grid_plot("warm", {"kind": "echo", "hosts": HOSTS, "pairs": pairs}))
    assert [ax.get_title() for ax in data_axes(p)] == ["p50 RTT"]
    fig = p.figure
    fig.canvas.draw()
    title = fig.get_suptitle()
    assert title.replace("\n", " ") == ("warm: RTT per source × destination, each grid on its own colour scale "
                                        "(hatched: no value); no p99 grid: a pair has at most 20 RTTs, a p99 "
                                        "needs 100")
    box = next(t for t in fig.texts if t.get_text() == title).get_window_extent()
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height, (box, fig.bbox)


def test_heat_map_cells_in_ms_keep_a_decimal_and_never_an_exponent() -> None:
    """Cells of 1 ms and more print in ms (the colour bar says so): ``1`` beside ``425`` read as 1 µs in
    warm-vs-cold's p99 grid, and a 150 ms cross-region p99 printed ``1.5e+02``."""
    pairs = echo_pairs(np.random.default_rng(3))
    pairs[1]["p99"], pairs[2]["p99"], pairs[3]["p99"] = 1010.0, 150_000.0, 999.7
    p = plot(grid_plot("echo", {"kind": "echo", "hosts": HOSTS, "pairs": pairs}))
    p99 = next(ax for ax in data_axes(p) if ax.get_title() == "p99 RTT")
    cells = [t.get_text() for t in p99.texts]
    assert cells[1:4] == ["1.0", "150", "1.0"]
    assert not any("e+" in c for c in cells)
    assert [grid_cell(v) for v in (12.4, 999.4, 1234.0, 9949.0, 9951.0, 12345.0)] == [
        "12", "999", "1.2", "9.9", "10", "12"]


def test_a_log_rtt_axis_of_the_sweep_figure_labels_more_than_one_tick() -> None:
    """payload-sweep's p99 panel (135 µs to 3.4 ms, a log axis under two decades) labelled one tick,
    "10^3": the minor ticks, which carry the labels inside a decade, were switched off for both axes
    where only the payload axis' were meant."""
    rows = sweep_rows()
    for r in rows:  # p99 CIs from 135 µs to 3.42 ms, as the run gave
        r["rep_p99_lower"], r["rep_p99_upper"] = 135.0, 3422.0
    (p,) = sweep_plots("payload", {"kind": "echo", "sweep": rows})
    fig = plot(p).figure
    fig.canvas.draw()
    p99 = next(ax for ax in data_axes(plot(p)) if ax.get_ylabel() == "p99 RTT (µs)")
    assert p99.get_yscale() == "log"
    lo, hi = p99.get_ylim()
    labelled = [t for t in p99.yaxis.get_ticklabels(which="both")
                if t.get_text() and t.get_visible() and lo <= t.get_position()[1] <= hi]
    assert len(labelled) >= 3, [t.get_text() for t in labelled]
    # the payload axis keeps exactly its four sizes
    assert [t.get_text() for t in p99.xaxis.get_ticklabels(which="both") if t.get_text()] == [
        "64", "1 KiB", "16 KiB", "64 KiB"]


def test_the_time_axis_of_a_short_trial_labels_each_tick_differently() -> None:
    """A compressed-day run's 2 s trial was labelled 09:29:02, 09:29:02, 09:29:03, 09:29:03, 09:29:03."""
    def section(window_s: float, n: int) -> dict[str, Any]:
        windows = [{"repetition": 0, "trial": "r000-t000-echo", "start_s": 0.5 + window_s * k, "group": "cross_region",
                    "count": 8, "median": 8200.0 + 80 * k} for k in range(n)]
        return {"kind": "echo", "windows": windows, "window_s": window_s, "pair_windows": [], "level_shifts": [],
                "trial_utc": {"r000-t000-echo": "2026-11-26T09:29:01.400000Z"}}

    for window_s, n, tenths in ((0.2, 11, True), (30.0, 20, False)):
        ax = data_axes(plot(time_plot("echo", section(window_s, n))))[0]
        ax.figure.canvas.draw()
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
        assert all(re.fullmatch(r"09:\d\d:\d\d\.\d" if tenths else r"\d\d:\d\d:\d\d", x) for x in labels), labels


def test_the_convergence_figure_reads_in_natural_units_and_draws_no_flat_zero_panel() -> None:
    """The compressed-day campaign's figure: an axis of 7000 to 14000 "(us)", "1.032e+04 (us)" in the
    caption, and a timeout_frac panel "(1)" flat at 0 on an axis from -0.04 to 0.04."""
    sizes = [6, 8, 10, 12]
    rtt = {"workload": "echo", "metric": "rtt_p50_us", "group": "cross_region", "unit": "us", "n": 12,
           "estimate": 10320.0, "convergence": {"sizes": sizes, "estimate": [10400.0, 10300.0, 10350.0, 10320.0],
                                                 "lower": [7000.0, 7200.0, 7300.0, 7326.0],
                                                 "upper": [13800.0, 13500.0, 13300.0, 13220.0]},
           "targets": [{"error": 0.05, "n_needed": None, "prediction": {"n": 568, "reliable": False}}]}
    zero = {"workload": "echo", "metric": "timeout_frac", "group": "cross_region", "unit": "1", "n": 12,
            "estimate": 0.0, "convergence": {"sizes": sizes, "estimate": [0.0] * 4, "lower": [0.0] * 4,
                                             "upper": [0.0] * 4}, "targets": [{"error": 0.05, "n_needed": 6}]}
    p = plot(convergence_figure({"series": [rtt, zero], "params": {"quantile_name": "median"}}))
    (ax,) = data_axes(p)
    assert ax.get_ylabel() == "median of rtt_p50_us (ms)"
    assert min(ax.lines[0].get_ydata()) >= 7.0 and max(ax.lines[0].get_ydata()) <= 14.0
    assert "rtt_p50_us of cross_region: 10.32 ms" in p.alt and "e+" not in p.alt
    assert "timeout_frac of cross_region: 0% at every n, with no CI width (not drawn)" in p.alt
    fraction = {**zero, "estimate": 0.012,
                "convergence": {**zero["convergence"], "estimate": [0.01, 0.014, 0.012, 0.012], "upper": [0.02] * 4}}
    (ax,) = data_axes(plot(convergence_figure({"series": [fraction], "params": {"quantile_name": "median"}})))
    assert ax.get_ylabel() == "median of timeout_frac (%)" and max(ax.lines[0].get_ydata()) == pytest.approx(1.4)
    only_flat = convergence_figure({"series": [zero], "params": {"quantile_name": "median"}})
    assert isinstance(only_flat, Note) and "one value at every n" in only_flat.text


def test_a_heat_map_says_why_a_grid_is_missing() -> None:
    """warm-vs-cold's warm heat map showed a p50 grid alone without a word on the p99 one."""
    pairs = [{**r, "count": 20, "p99": None} for r in echo_pairs(np.random.default_rng(5))]
    p = plot(grid_plot("warm", {"kind": "echo", "hosts": HOSTS, "pairs": pairs}))
    assert "no p99 grid: a pair has at most 20 RTTs, a p99 needs 100" in p.alt
    both = plot(grid_plot("hot", {"kind": "echo", "hosts": HOSTS, "pairs": echo_pairs(np.random.default_rng(5))}))
    assert "no p99" not in both.alt and "no p99" not in both.figure.get_suptitle()


def test_the_time_figure_says_why_it_has_no_self_line() -> None:
    """The quickstart's time figure had no self line and no word why (self-loops have no window
    median: the level-shift search leaves them out)."""
    def windows(group: str, median: float | None) -> list[dict[str, Any]]:
        return [{"repetition": 0, "trial": "r000-t000-echo", "start_s": 2.0 * k, "group": group, "count": 800,
                 "mean": 90.0, "median": median} for k in range(5)]

    sec = {"kind": "echo", "windows": windows("self", None) + windows("same_subnet", 60.0), "window_s": 2.0,
           "pair_windows": [], "level_shifts": [], "trial_utc": {"r000-t000-echo": "2026-11-26T09:29:01.400000Z"}}
    p = plot(time_plot("echo", sec))
    assert "No self line: a host's echoes to itself cross no network" in p.alt
    assert next(t.get_text() for t in data_axes(p)[0].get_legend().get_texts()) == "same_subnet"
    sec["windows"] = windows("same_subnet", 60.0)
    assert "self" not in plot(time_plot("echo", sec)).alt


def test_the_box_plots_of_swept_values_share_one_y_scale() -> None:
    """payload-sweep's four box plots (one per payload) each had a y axis of its own: 64 B's boxes
    and 64 KiB's looked the same height at 2× the RTT."""
    def boxes(sweep: str, scale: float) -> list[dict[str, Any]]:
        return [{"group": g, "sweep": sweep, "count": 1000, "p5": 20.0 * scale * (i + 1), "p25": 30.0 * scale * (i + 1),
                 "p50": 40.0 * scale * (i + 1), "p75": 50.0 * scale * (i + 1), "p95": 70.0 * scale * (i + 1),
                 "mean": 45.0 * scale * (i + 1)} for i, g in enumerate(("self", "same_subnet"))]

    sec = {"kind": "echo", "boxes": boxes("payload=64", 1.0) + boxes("payload=65536", 2.5)}
    plots = [p for p in section_figures("echo", sec) if isinstance(p, Plot) and p.name.endswith("-box")]
    assert len(plots) == 2
    limits = [data_axes(p)[0].get_ylim() for p in plots]
    assert limits[0] == pytest.approx(limits[1])
    low, high = limits[0]
    assert low <= 20.0 and high >= 70.0 * 2.5 * 2  # every whisker of both on the shared axis
    assert all("same in the 2 box plots of the swept values" in p.alt for p in plots)
    alone = plot(next(p for p in section_figures("echo", {"kind": "echo", "boxes": boxes("", 1.0)})
                      if p.name.endswith("-box")))
    assert "swept values" not in alone.alt


def test_log_rtt_axes_label_plain_numbers() -> None:
    """The quickstart's box plot was labelled 2×10^1, 6×10^1, 4×10^2 and the heat maps' colour bars
    3×10^1, 6×10^1: RTT axes read 20, 60, 400, as the tables print them."""
    pairs = echo_pairs(np.random.default_rng(3))
    grid = plot(grid_plot("echo", {"kind": "echo", "hosts": HOSTS, "pairs": pairs}))
    boxes = [{"group": g, "count": 1000, "p5": 13.0 * (i + 1), "p25": 21.0 * (i + 1), "p50": 45.0 * (i + 1),
              "p75": 70.0 * (i + 1), "p95": 400.0 * (i + 1), "mean": 75.0 * (i + 1)}
             for i, g in enumerate(("self", "same_subnet"))]
    box = plot(next(p for p in section_figures("echo", {"kind": "echo", "boxes": boxes}) if p.name.endswith("-box")))
    for p in (grid, box):
        p.figure.canvas.draw()
        labels = [t.get_text() for ax in p.figure.axes for axis in (ax.xaxis, ax.yaxis) if axis.get_scale() == "log"
                  for t in [*axis.get_majorticklabels(), *axis.get_minorticklabels()] if t.get_text()]
        assert len(labels) >= 3, (p.name, labels)
        assert all(re.fullmatch(r"[\d,]+(\.\d+)?", x) for x in labels), (p.name, labels)


def test_the_box_plot_legend_covers_no_whisker() -> None:
    """The compressed-day run's box plot (one group, p95 near the top) had its legend over the upper whisker."""
    boxes = [{"group": "cross_region", "count": 100, "p5": 9080.0, "p25": 9350.0, "p50": 9580.0, "p75": 9850.0,
              "p95": 12700.0, "mean": 9980.0}]
    p = plot(next(p for p in section_figures("echo", {"kind": "echo", "boxes": boxes}) if p.name.endswith("-box")))
    p.figure.canvas.draw()
    (ax,) = data_axes(p)
    legend = ax.get_legend().get_window_extent()
    drawn = [line.get_window_extent() for line in ax.lines if len(line.get_xdata()) and line.get_visible()]
    assert drawn and not any(legend.overlaps(b) for b in drawn), (legend, drawn)


def test_the_time_of_day_heat_maps_read_in_natural_units() -> None:
    """The compressed-day page's heat maps had colour bars of 7500..20000 labelled "median us"."""
    from cloudbench.report.figures.diurnal import time_of_day_figure

    grid = [[None] * 24 for _ in range(7)]
    grid[1][3], grid[2][5], grid[1][9] = 7500.0, 20000.0, 11000.0
    tod = {"runs": 3, "timezone": "UTC", "verdict": "v", "coverage": None,
           "heatmaps": [{"workload": "echo", "metric": "rtt_p50_us", "group": "g", "unit": "us", "significant": True,
                         "p_holm": 0.002, "heatmap": grid}]}
    p = time_of_day_figure(tod)
    assert p is not None
    (bar,) = [ax for ax in p.figure.axes if ax.get_label() == "<colorbar>"]
    assert bar.get_ylabel() == "median (ms)"
    (ax,) = data_axes(p)
    assert ax.images[0].norm.vmin == pytest.approx(7.5) and ax.images[0].norm.vmax == pytest.approx(20.0)


def test_a_long_pair_line_drawn_with_fewer_points_keeps_a_one_window_spike_and_dip() -> None:
    """A 12-hour repetition has 1 440 windows a pair; its thin line was cut to every third window, which
    drops a spike one window wide (and leaves the spike's star above the line)."""
    trial = "r000-t000-echo"
    values = [100.0] * 1440
    values[334], values[1001] = 5000.0, 10.0  # neither is a multiple of 3
    sec = {"kind": "echo", "window_s": 30.0, "trial_utc": {trial: "2026-11-22T10:15:00.000000Z"},
           "windows": [{"group": "cross_zone", "repetition": 0, "trial": trial, "start_s": 30.0 * k, "median": v}
                       for k, v in enumerate(values)],
           "pair_windows": [{"group": "cross_zone", "src": "a", "dst": "b", "repetition": 0, "trial": trial,
                             "window": k, "start_s": 30.0 * k, "median": v} for k, v in enumerate(values)]}
    (ax,) = data_axes(plot(time_plot("echo", sec)))
    thin = [ln for ln in ax.get_lines() if ln.get_linewidth() == pytest.approx(0.6)]
    assert len(thin) == 1
    y = np.asarray(thin[0].get_ydata(), float)
    assert len(y) <= 400 and y.max() == 5000.0 and y.min() == 10.0
