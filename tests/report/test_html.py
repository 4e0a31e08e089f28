"""report/index.html from report.json content alone: reading order, one file
without URLs, a figure per aggregate with a text alternative, figure files, the CLI options."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text
from typer.testing import CliRunner

from cloudbench.analysis.confirm import ConfirmParams
from cloudbench.analysis.latency import CCDF_EXCEEDANCE
from cloudbench.cli.app import app
from cloudbench.errors import ResultError
from cloudbench.report.build import build_report
from cloudbench.report.confirm import confirm, write_confirm
from cloudbench.report.figures.style import Plot
from cloudbench.report.html import split_by_text, write_html
from cloudbench.report.outputs import write_outputs
from cloudbench.store.rundir import RunDir
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values
from cloudbench.workloads.echo.report import health_text
from tests.report.test_tables import drain_section, echo_section, paths_section, tput_section

HOSTS = ["s1-1", "s2-1", "s3-1", "s4-1", "s5-1", "s6-1"]


def full_report(run: RunDir) -> dict[str, Any]:
    """The frame of a real (fake) run with a section of every kind, as report.json holds them."""
    rep = build_report(run)
    echo = echo_section()
    groups = [g["group"] for g in echo["groups"]]
    echo.update(
        boxes=[{"group": g, "count": 1000, "p5": 50.0 * (i + 1), "p25": 60.0 * (i + 1), "p50": 70.0 * (i + 1),
                "p75": 80.0 * (i + 1), "p95": 120.0 * (i + 1), "mean": 75.0 * (i + 1)} for i, g in enumerate(groups)],
        tails=[{"group": g, "exceedance": e, "rtt_us": 50.0 * (i + 1) / e ** 0.3}
               for i, g in enumerate(groups) for e in CCDF_EXCEEDANCE],
        pair_windows=[{"repetition": 0, "trial": "r000-t000-echo", "src": "s1-1", "dst": "s6-1",
                       "group": "cross_region", "window": k, "start_s": 30.0 * k, "count": 3000,
                       "mean": 51000.0 + 50 * k} for k in range(3)],
        hosts=HOSTS, window_s=30.0, trial_utc={"r000-t000-echo": "2026-11-22T10:15:00.000000Z"},
        level_shifts=[{"repetition": 0, "trial": "r000-t000-echo", "series": "group:cross_region", "kind": "step",
                       "time_s": 30.0, "size": 750.0, "before": 50000.0, "after": 50750.0}],
    )
    # 5 of the 36 cells measured: the grid must show the other 31 as missing
    echo["pairs"] = echo["pairs"][:5]
    tput = tput_section()
    tput["series"] = [{"repetition": 0, "trial": r["trial"], "src": r["src"], "dst": r["dst"], "direction": "forward",
                       "group": "cross_region", "burst": [0] * 10, "t_s": [i + 0.5 for i in range(10)],
                       "mbps": [9400.0 + i for i in range(10)]} for r in tput["trials"]]
    for r in tput["trials"]:
        r["repetition"] = 0
        r["capacity_lb95_mbps"] = 9654.321
    drain = drain_section()
    for d in drain["drains"]:
        d["repetition"] = 0
    drain["series"] = [{"repetition": 0, "trial": "r000-t000-drain", "src": "r1-a-host-1", "dst": "r2-a-host-1",
                        "direction": "forward", "group": "cross_region", "burst": [0] * 30 + [1] * 10,
                        "t_s": [*range(30), *range(60, 70)],
                        "mbps": [951.0] * 12 + [101.0] * 18 + [951.0] * 3 + [101.0] * 7}]
    paths = paths_section()
    paths["graphs"] = [{"repetition": 0, "src": "r1-a-host-1", "dst": "r3-a-host-1",
                        "hops": [["198.18.1.10"], ["198.18.1.1"], ["198.19.0.1", "198.19.0.5"], ["198.18.6.10"]],
                        "edges": [["198.18.1.10", "198.18.1.1"], ["198.18.1.1", "198.19.0.1"],
                                  ["198.18.1.1", "198.19.0.5"], ["198.19.0.1", "198.18.6.10"],
                                  ["198.19.0.5", "198.18.6.10"]],
                        "rtt_min_us": {"198.18.6.10": 81234.5}, "asn": {"198.19.0.1": 64501}}]
    rep["workloads"] = {"echo": echo, "tput": tput, "drain": drain, "paths": paths}
    return rep


def test_the_page_is_one_file_in_reading_order_with_a_figure_per_aggregate(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path, "c", [FakeRun({("rtt_p50_us", "cross_zone"): normal_values(20, 500.0, 0.05, 1)})])
    run = RunDir(next(camp.glob("*/manifest.json")).parent)
    write_confirm(confirm(camp, ConfirmParams(subsets=20)), camp)
    page, *files = write_html(run, full_report(run))
    text = page.read_text()
    assert page == run.path / "report" / "index.html"
    assert not re.search(r"https?:", text) and "<script" not in text and "<link" not in text and "src=" not in text
    # trust first, then the workloads in order, confirm, metadata last
    marks = ["Can it be trusted?", 'id="w-echo"', 'id="w-tput"', 'id="w-drain"', 'id="w-paths"', 'id="confirm"',
             'id="metadata"']
    pos = [text.index(m) for m in marks]
    assert pos == sorted(pos)
    names = sorted(p.name for p in files)
    stems = ["confirm-convergence", "drain-drains", "echo-box", "echo-grid", "echo-quorums", "echo-tail",
             "echo-time", "paths-inflation", "paths-mda-r1-a-host-1-r3-a-host-1", "tput-asymmetry", "tput-series"]
    assert names == sorted([f"{s}.png" for s in stems] + [f"{s}.svg" for s in stems])
    assert all(p.parent == page.parent / "figures" and p.stat().st_size > 1000 for p in files)
    figures = re.findall(r'<figure id="fig-([^"]+)"><svg role="img" aria-label="([^"]+)"', text)
    assert sorted(f[0] for f in figures) == stems
    alts = dict(figures)
    assert "31 of 36 cells missing" in alts["echo-grid"]
    assert "1 level shift(s)" in alts["echo-time"]
    assert "empty after 12.2 s" in alts["drain-drains"] and "refill 99.8 Mbit/s" in alts["drain-drains"]
    assert "capacity ≥ 9800.0" in alts["tput-series"]
    assert "2 interface(s) beyond the source" not in alts["paths-mda-r1-a-host-1-r3-a-host-1"]
    assert "at most 2 in parallel" in alts["paths-mda-r1-a-host-1-r3-a-host-1"]
    assert "AS64501" in alts["paths-mda-r1-a-host-1-r3-a-host-1"]
    # units on the axes (SVG text is kept as text)
    for unit in ("round-trip time (µs)", "P(RTT &gt; x)", "rate (Mbit/s)", "time since the drain began (s)",
                 "inflation (ratio"):
        assert unit in text, unit
    # one colour per latency group in every echo figure: cross_region's colour in each
    for stem in ("echo-box", "echo-tail", "echo-time"):
        assert "#d55e00" in (page.parent / "figures" / f"{stem}.svg").read_text().lower(), stem
    # the standalone SVG files keep their namespace, the inlined copies do not need it
    assert 'xmlns="http://www.w3.org/2000/svg"' in (page.parent / "figures" / "echo-box.svg").read_text()
    assert "rtt_p50_us" in text and "Hosts" in text and "seed" in text
    # the per-trial table has the capacity bound that holds its level (the coverage suite), as the terminal's
    assert "cap ≥ (95 %)</th>" in text and "9,654.3</td>" in text


def test_report_command_writes_the_page_where_asked_or_not_at_all(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path, "c", [FakeRun({("m", "g"): [1.0]}, workloads=[])])
    run = next(camp.glob("*/"))
    r = CliRunner().invoke(app, ["report", str(camp), "--no-html"])
    assert r.exit_code == 0, r.output
    assert not (run / "report" / "index.html").exists() and (run / "report" / "report.json").exists()
    elsewhere = tmp_path / "out" / "page.html"
    r = CliRunner().invoke(app, ["report", str(camp), "--html", str(elsewhere)])
    assert r.exit_code == 0, r.output
    assert elsewhere.is_file() and (elsewhere.parent / "figures").is_dir() is False  # no workload, no figure
    assert "No host failed." in elsewhere.read_text()
    r = CliRunner().invoke(app, ["report", str(camp)])
    assert r.exit_code == 0 and (run / "report" / "index.html").is_file()


def test_a_large_runs_figures_stay_small(tmp_path: Path) -> None:
    """50 hosts, 2 450 pairs, 100 windows each: the page stays under a megabyte."""
    camp = make_campaign(tmp_path, "c", [FakeRun({("m", "g"): [1.0]}, workloads=[])])
    run = RunDir(next(camp.glob("*/manifest.json")).parent)
    rep = full_report(run)
    echo = rep["workloads"]["echo"]
    hosts = [f"h{i:02d}" for i in range(50)]
    pairs = [(a, b) for a in hosts for b in hosts if a != b]
    echo["hosts"] = hosts
    echo["pairs"] = [{"src": a, "dst": b, "group": "cross_zone", "count": 100, "timeouts": 0, "mean": 500.0,
                      "p50": 480.0 + i % 97, "p99": 900.0 + i % 89, "max": 1000.0} for i, (a, b) in enumerate(pairs)]
    echo["pair_windows"] = [{"repetition": 0, "trial": "r000-t000-echo", "src": a, "dst": b, "group": "cross_zone",
                             "window": k, "start_s": 30.0 * k, "count": 100, "mean": 500.0 + (i * 7 + k) % 50}
                            for i, (a, b) in enumerate(pairs) for k in range(100)]
    rep["workloads"] = {"echo": echo}
    page, *_ = write_html(run, rep)
    text = page.read_text()
    assert len(text.encode()) < 1_000_000, len(text.encode())
    assert "200 of 2450 pair series drawn" in text
    assert " 50 of 2500 cells missing" in text  # the diagonal


def test_a_confirm_json_of_an_unknown_version_is_refused_with_its_path(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path, "c", [FakeRun({("m", "g"): [1.0]}, workloads=[])])
    run = RunDir(next(camp.glob("*/manifest.json")).parent)
    bad = camp / "confirm.json"
    bad.write_text(json.dumps({"schema": 99, "series": []}))
    with pytest.raises(ResultError, match="schema 99 is unknown") as e:
        write_html(run, build_report(run))
    assert str(bad) in str(e.value)
    bad.write_text("[]")
    with pytest.raises(ResultError, match="not a JSON object"):
        write_html(run, build_report(run))


HEALTH = {"cpu_pct_max": 3.8, "cpu_pct_max_host": "s5-1", "cpu_pct_max_trial": "r001-t000-echo", "rounds": 33600,
          "late_sends": 552, "max_send_lag_us": 16900, "kernel_stamps": 268796, "user_stamps": 4}


def test_the_workers_health_is_on_the_page_once_and_its_times_to_the_second(tmp_path: Path) -> None:
    """The page said the workers' health twice (under "Can it be trusted?" and under the echo tables)
    and "started 2026-11-26T09:17:40.825889Z" where the terminal prints seconds."""
    camp = make_campaign(tmp_path, "c", [FakeRun({("rtt_p50_us", "g"): [1.0, 2.0]})])
    run = RunDir(next(camp.glob("*/manifest.json")).parent)
    report = full_report(run)
    report["workloads"]["echo"]["workers"] = HEALTH
    report["started_utc"], report["ended_utc"] = "2026-11-26T09:17:40.825889Z", "2026-11-26T09:18:25.928915Z"
    page = html.unescape(re.sub(r"<[^>]+>", " ", write_html(run, report)[0].read_text()))
    assert page.count(health_text("echo", HEALTH)) == 1
    assert "started 2026-11-26T09:17:40Z, ended 2026-11-26T09:18:25Z (UTC)" in " ".join(page.split())
    assert not re.search(r"\d\d:\d\d:\d\d\.\d+Z", page)


@pytest.mark.parametrize(("late", "text"), [
    (0, "no round of 100 left late (the latest 0.8 ms after its time, within the tolerance"),
    (3, "3 of 100 rounds (3.00%) left late, by at most 0.8 ms"),
])
def test_no_late_round_is_said_in_words(late: int, text: str) -> None:
    """'0 of 100 rounds (0.00%) left late, by at most 0.8 ms' read as a contradiction."""
    line = health_text("echo", {**HEALTH, "rounds": 100, "late_sends": late, "max_send_lag_us": 800})
    assert text in line and ("0 of 100" not in line)


def test_the_page_and_files_written_on_two_cores_are_those_written_on_one(tmp_path: Path) -> None:
    """write_outputs forks report.json and the CSVs off, and write_html half of the figures: the page,
    every figure file and report.json are the same bytes as written in order by one process."""
    camp = make_campaign(tmp_path, "c", [FakeRun({("rtt_p50_us", "cross_zone"): normal_values(20, 500.0, 0.05, 1)})])
    run = RunDir(next(camp.glob("*/manifest.json")).parent)
    rep = full_report(run)

    def written(fork: bool, where: str) -> dict[str, bytes]:
        out = write_outputs(run, rep, tmp_path / where / "index.html", fork=fork)
        assert out.page[0] == tmp_path / where / "index.html"
        files = [*out.report, *out.page]
        assert len(set(files)) == len(files)
        # report.json and the CSVs: one directory for both writers, read as each left it
        return {str(p.relative_to(p.parent.parent if p.parent.name == "figures" else p.parent)): p.read_bytes()
                for p in files}

    one, two = written(False, "one"), written(True, "two")
    assert sorted(one) == sorted(two) and len([k for k in two if k.endswith(".svg")]) == 10
    assert [k for k in one if one[k] != two[k]] == []


def test_the_figures_are_saved_on_two_cores_about_half_the_text_each(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's figures are saved on two cores, some by a child, the others here, the texts (their
    rendering cost) shared to within one figure's."""
    from cloudbench.report import html as page_module

    camp = make_campaign(tmp_path, "c", [FakeRun({("rtt_p50_us", "cross_zone"): normal_values(20, 500.0, 0.05, 1)})])
    run = RunDir(next(camp.glob("*/manifest.json")).parent)
    log = tmp_path / "savers"
    real_save = page_module.save

    def save(plot: Any, folder: Path) -> Any:
        with log.open("a") as f:
            f.write(f"{plot.name} {os.getpid()} {len(plot.figure.findobj(Text)) + 1}\n")
        return real_save(plot, folder)

    monkeypatch.setattr(page_module, "save", save)
    page = write_html(run, full_report(run))[0]
    order = re.findall(r'<figure id="fig-([^"]+)"', page.read_text())
    saved = [line.split() for line in log.read_text().splitlines()]
    assert sorted(n for n, _, _ in saved) == sorted(order) and len(order) == 10
    texts = {pid: sum(int(t) for _, p, t in saved if p == pid) for pid in {p for _, p, _ in saved}}
    assert len(texts) == 2 and str(os.getpid()) in texts
    assert abs(texts.popitem()[1] - texts.popitem()[1]) <= max(int(t) for _, _, t in saved)


def test_the_forked_child_gets_about_half_the_figures_text_not_every_other_figure() -> None:
    """The figures are shared by their texts (their rendering cost): the two heavy ones (a grid with
    many cell labels, a plot with many tick labels) never land on one side, each side keeps the page's
    order, and no figure is lost or saved twice."""
    def plot(name: str, texts: int) -> Plot:
        fig = Figure()
        ax = fig.subplots()
        for i in range(texts):
            ax.text(0.5, 0.5, str(i))
        return Plot(name, name, name, fig)

    # the 138 M run's figures in the page's order, with their texts then: box, tail, time, grid, quorums
    plots = [plot("box", 40), plot("tail", 237), plot("time", 43), plot("grid", 315), plot("quorums", 30)]
    mine, theirs = split_by_text(plots)
    names = [p.name for p in mine], [p.name for p in theirs]
    assert sorted(names[0] + names[1]) == sorted(p.name for p in plots)
    assert ("grid" in names[0]) != ("tail" in names[0])  # every other figure put both on one side
    for side in names:
        assert side == [p.name for p in plots if p.name in side]
    cost = {p.name: len(p.figure.texts) + len(p.figure.axes[0].texts) for p in plots}
    loads = sorted(sum(cost[n] for n in side) for side in names)
    assert loads[1] - loads[0] <= min(cost.values()) + 20  # as even as whole figures allow
