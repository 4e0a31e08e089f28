"""One report, two renderings: every table row, warning, event and note the
terminal prints from a report.json is on the HTML page built from the same report.json, the page's
tables hold nothing the terminal lacks, and "Can it be trusted?" lists every warning.

The report covers the shipped experiments' shapes: quickstart (echo with modes, events, a step
test too short to run, quorums), warm-vs-cold (connection modes side by side, handshakes),
payload-sweep (distributions per swept value, the sweep table), throughput and drains (notes,
warnings, configured rows), colocation (three tables, notes, audits) and traceroute, with a
damaged file, a host failure and a scheduled campaign's time-of-day verdict in the frame."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from cloudbench.analysis.confirm import ConfirmParams
from cloudbench.analysis.quantiles import P50, P90, P99
from cloudbench.report.confirm import confirm, confirm_from_document, render_confirm, write_confirm
from cloudbench.report.files import MIGRATIONS
from cloudbench.report.html import render_html, write_html
from cloudbench.report.render import render_report
from cloudbench.store.rundir import RunDir
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values
from cloudbench.workloads.echo.connections import COLUMNS
from tests.report.test_html import full_report

WIDE = 400  # no table is narrowed, abbreviated or stacked: each terminal line is one row's cells


def _modes(dist: str, locations: list[float], unstable: str) -> list[dict[str, Any]]:
    return [{"distribution": dist, "multimodal": len(locations) > 1, "dip": 0.03, "p_value": 2e-4, "n": 32000,
             "n_tested": 20000, "mode": i + 1, "location": x, "low": x * 0.8, "high": x * 1.2,
             "share": 1.0 / len(locations), "unstable": unstable} for i, x in enumerate(locations)]


def _mode_row(group: str, workload: str, mode: str, base: float, connect: bool) -> dict[str, Any]:
    return {"group": group, "workload": workload, "mode": mode, "count": 24000, "timeouts": 3,
            **{c: base * (k + 1) for k, c in enumerate(COLUMNS)},
            "connect_p50": 35.5 if connect else None, "connect_p99": 88.25 if connect else None}


def _sweep_row(group: str, payload: int) -> dict[str, Any]:
    v = 100.0 + payload / 64
    return {"group": group, "payload": payload, "sweep": f"payload={payload}", "count": 6000, "timeouts": 0,
            P50: v, P99: 3 * v, "repetitions": 6,
            f"rep_{P50}_median": v, f"rep_{P50}_lower": v - 5, f"rep_{P50}_upper": v + 5,
            f"rep_{P99}_median": 3 * v, f"rep_{P99}_lower": None, f"rep_{P99}_upper": None}


def shipped_shapes(run: RunDir) -> dict[str, Any]:
    """A report.json with a section of each shape the shipped experiments write."""
    rep = full_report(run)
    echo = rep["workloads"]["echo"]
    echo.update(
        modes=_modes("same_subnet", [14.0, 53.0, 184.0], "p25 p95") + _modes("cross_zone", [61.0], "")
        + _modes("Q3/3 subnet1", [63.0, 2040.0], ""),
        workers={"cpu_pct_max": 3.8, "cpu_pct_max_host": "s5-1", "cpu_pct_max_trial": "r001-t000-echo",
                 "rounds": 33600, "late_sends": 552, "max_send_lag_us": 16900, "kernel_stamps": 268796,
                 "user_stamps": 4},
        step_windows={"windows": 11, "needs": 15},
        events=[{"repetition": 1, "trial": "r001-t000-echo", "series": "s1-1>s5-1", "kind": "spike",
                 "origin": "link", "time_s": 20.37, "duration_s": 0.07, "size": 918.66, "before": 46.4,
                 "after": 46.4, "p_value": 9.99e-5, "size_ci_low": -18.5, "size_ci_high": 5848.1,
                 "size_ci_level": 0.95},
                {"repetition": 0, "trial": "r000-t000-echo", "series": "s2-1>s6-1", "kind": "step",
                 "origin": "s2-1", "time_s": 41.5, "duration_s": 0.0, "size": 212.0, "before": 50.0,
                 "after": 262.0, "p_value": 3e-6, "size_ci_low": 180.0, "size_ci_high": 240.0,
                 "size_ci_level": 0.9},
                # its window (90 s) has no median: its star goes on the pair's nearest window
                {"repetition": 0, "trial": "r000-t000-echo", "series": "s1-1>s6-1", "kind": "spike",
                 "origin": "s6-1", "time_s": 100.5, "duration_s": 0.2, "size": 5000.0, "before": 51000.0,
                 "after": 51000.0, "p_value": 1e-5, "size_ci_low": 4000.0, "size_ci_high": 6000.0,
                 "size_ci_level": 0.95}],
    )
    # the pair rows of level_shifts are the events (analysis.levelshift.level_shift_rows)
    echo["level_shifts"] += [{k: e[k] for k in ("repetition", "trial", "series", "kind", "time_s", "size", "before",
                                                "after")} for e in echo["events"]]
    # warm-vs-cold: the first echo workload carries the modes side by side, the cold one its handshakes
    hot = copy.deepcopy(echo)
    hot.update(events=[], modes=[], workers=None, step_windows={"windows": 20, "needs": 15},
               connection_modes=[_mode_row(g, w, m, b, w == "cold")
                                 for g in ("same_subnet", "cross_zone")
                                 for w, m, b in (("hot", "persistent, every 10ms", 70.5),
                                                 ("warm", "persistent, idle 10s", 90.25),
                                                 ("cold", "per_round, every 200ms", 34.6))])
    cold = copy.deepcopy(hot)
    cold.update(connection_modes=[], connect=[{"group": "same_subnet", "count": 600, P50: 35.5, P90: 61.0,
                                               P99: 88.25, "max": 140.0}])
    # payload-sweep: a distribution per swept value, never pooled, and the sweep table
    sweep = copy.deepcopy(hot)
    sweep.update(connection_modes=[], sweep=[_sweep_row(g, p) for g in ("self", "same_subnet")
                                             for p in (64, 1024, 16384, 65536)])
    for key in ("groups", "quorums"):
        sweep[key] = [{**g, "sweep": f"payload={p}"} for p in (64, 65536) for g in sweep[key][:2]]
    tput = rep["workloads"]["tput"]
    tput.update(notes=["expected 47.82 Mbit/s = the vm_type's cap of 50 Mbit/s × 95.6%: the shaper counts "
                       "whole frames on the wire"],
                warnings=["tput: r1-a-host-1→r2-a-host-1 (r000-t003-tcp): the rate falls by 12 % over the trial"])
    drain = rep["workloads"]["drain"]
    drain["drains"][1]["notes"] = "short test: windows of 3 intervals instead of 10"
    drain["warnings"] = ["drain: r1-a-host-1→r2-a-host-1 (r000-t000-drain) did not drain"]
    paths = rep["workloads"]["paths"]
    paths["changes"] = [{"src": "r1-a-host-1", "dst": "r3-a-host-1", "from_repetition": 0, "to_repetition": 1,
                         "changed": True, "jaccard_distance": 0.25, "nodes_added": "", "nodes_removed": ""}]
    host = {"repetition": 0, "ingress_mbps": 70.0, "baseline_mbps": 79.0, "group_size": 2}
    colocation = {
        "kind": "colocation",
        "hosts": [{**host, "host": "a1", "vm_type": "local.medium", "nominal_mbps": 76.5, "egress_mbps": 40.1,
                   "egress_share": 40.1 / 76.5, "group": "G1", "physical_host": "phys-1"},
                  {**host, "host": "c1", "vm_type": "local.medium", "nominal_mbps": 76.5, "egress_mbps": 79.0,
                   "egress_share": 79.0 / 76.5, "group": "-", "physical_host": ""}],
        "groups": [{"repetition": 0, "group": "G1", "hosts": "a1 a2", "size": 2, "confidence": 0.987,
                    "full_load_mbps": 40.1, "baseline_mbps": 79.0, "matches_truth": True}],
        "loss": [{"repetition": 0, "size": 2, "groups": 1, "hosts": 2, "full_load_mbps": 40.1, "baseline_mbps": 79.0,
                  "loss": 0.49}],
        "audits": [{"repetition": 0, "probes": 12, "phases": {"full": 1, "pairs": 11}, "matches_truth": True}],
        "warnings": ["repetition 0: 1 drop(s) that no partner explains (c1): noise near the threshold"],
    }
    rep["workloads"] = {"echo": echo, "hot": hot, "cold": cold, "sweep": sweep, "tput": tput, "drain": drain,
                        "colocation": colocation, "paths": paths}
    # a scheduled campaign's run: the time-of-day verdict so far
    rep["time_of_day"] = {"period_s": 86400.0, "timezone": "UTC", "runs": 30, "significant": [], "heatmaps": [],
                          "verdict": "no time-of-day effect in any series (Holm over 6 series)", "coverage": []}
    rep["damaged"] = ["echo/r000-t000-echo.parquet: checksum mismatch"]
    rep["failures"] = [{"trial": "r000-t001-echo", "host": "s3-1", "exit_code": 137, "reason": "",
                        "command": "python3 echo.py --port 7000 --rate 100"}]
    return rep


SKIPPED = ("svg", "pre", "style", "title", "nav")


class PageText(HTMLParser):
    """The page as text: the rows of its tables (cells as text) and its prose, section by section
    (``<h2 id>``); figures' drawings (SVG text), the spec's <pre>, the style, the title and the
    table of contents left out."""

    def __init__(self) -> None:
        super().__init__()
        self.section = ""
        self.rows: list[tuple[str, list[str], bool]] = []  # (section, cells, header row)
        self.text: list[str] = []
        self.items: dict[str, list[str]] = {}  # <li> texts per section
        self._skip = 0
        self._cells: list[str] | None = None
        self._cell: list[str] | None = None
        self._li: list[str] | None = None
        self._head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED:
            self._skip += 1
        elif tag == "h2":
            self.section = dict(attrs).get("id") or ""
        elif tag == "tr":
            self._cells, self._head = [], False
        elif tag in ("td", "th"):
            self._cell, self._head = [], self._head or tag == "th"
        elif tag == "li":
            self._li = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED:
            self._skip -= 1
        elif tag in ("td", "th") and self._cells is not None and self._cell is not None:
            self._cells.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._cells is not None:
            self.rows.append((self.section, self._cells, self._head))
            self._cells = None
        elif tag == "li" and self._li is not None:
            self.items.setdefault(self.section, []).append(" ".join("".join(self._li).split()))
            self._li = None
        if tag in ("p", "li", "h3", "h2", "td", "th", "figcaption", "tr"):
            self.text.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        for part in (self._cell, self._li):
            if part is not None:
                part.append(data)
        self.text.append(data)

    def prose(self) -> str:
        return " ".join("".join(self.text).split())


def words(s: str) -> list[str]:
    return s.split()


def within(token: str, cell: str) -> bool:
    """``token``'s words are a run of ``cell``'s (a terminal header line holds one line of a
    two-line header: ``hot`` of ``hot persistent, every 10ms``)."""
    t, c = words(token), words(cell)
    return bool(t) and any(c[i:i + len(t)] == t for i in range(len(c) - len(t) + 1))


def in_order(tokens: list[str], cells: list[str]) -> bool:
    """Each token matches a cell, in order (an empty terminal cell prints nothing: no token)."""
    i = 0
    for cell in cells:
        if i < len(tokens) and within(tokens[i], cell):
            i += 1
    return i == len(tokens)


def terminal(report: dict[str, Any]) -> list[str]:
    console = Console(width=WIDE, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    render_report(report, console)
    return [line.strip() for line in console.export_text().splitlines()
            if line.strip() and set(line.strip()) != {"─"}]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[str], PageText]:
    tmp = tmp_path_factory.mktemp("page")
    camp = make_campaign(tmp, "c", [FakeRun({("rtt_p50_us", "cross_zone"): normal_values(3, 500.0, 0.05, 1)})])
    run = RunDir(next(camp.glob("*/manifest.json")).parent)
    report = shipped_shapes(run)
    page, _ = render_html(run, report, tmp / "figures")
    parsed = PageText()
    parsed.feed(page)
    return report, terminal(report), parsed


def not_on_page(lines: list[str], page: PageText) -> list[str]:
    """The terminal lines whose text is not in the page's prose and whose cells are not, in
    order, in one row of a page table."""
    prose = page.prose()
    return [line for line in lines
            if " ".join(line.split()) not in prose
            and not any(in_order(re.split(r"\s{2,}", line), cells) for _, cells, _ in page.rows)]


def test_every_line_and_table_row_of_the_terminal_is_on_the_page(
        rendered: tuple[dict[str, Any], list[str], PageText]) -> None:
    _, lines, page = rendered
    missing = not_on_page(lines, page)
    assert missing == [], "\n".join(missing)
    # the shapes are all there: the test is not passing on a report that prints little
    for must in ("Percentiles between modes are unstable", "spikes and steps per pair", "connection modes side by "
                 "side, same_subnet", "TCP handshake of the per-round connections", "RTT per payload",
                 "note: expected 47.82", "hosts sharing a NIC", "testbed truth matched", "configured",
                 "1 of 1 pair-repetition transitions changed the path", "host failure(s)", "checksum mismatch",
                 "steps not testable", "time of day (30 runs of the campaign, UTC)"):
        assert any(must in line for line in lines), must


def test_the_pages_tables_hold_nothing_the_terminal_lacks(
        rendered: tuple[dict[str, Any], list[str], PageText]) -> None:
    _, lines, page = rendered
    split = [re.split(r"\s{2,}", line) for line in lines]
    extra = [cells for section, cells, head in page.rows
             if not head and (section == "trust" or section.startswith("w-"))
             and not any(in_order([c for c in cells if c], tokens) for tokens in split)]
    assert extra == []


def test_can_it_be_trusted_lists_every_warning(rendered: tuple[dict[str, Any], list[str], PageText]) -> None:
    _, lines, page = rendered
    warnings = [line.removeprefix("warning: ") for line in lines if line.startswith("warning: ")]
    assert len(warnings) >= 8  # modes (2), steps, tput, drain (2), colocation, damaged, failures
    listed = page.items.get("trust", [])
    assert [w for w in warnings if not any(w in item for item in listed)] == []
    assert "No warnings." not in page.prose()


def test_the_time_figure_counts_every_event_of_the_events_table(
        rendered: tuple[dict[str, Any], list[str], PageText]) -> None:
    """The caption's spikes and steps plus the events it could not place are the events table's
    rows: the page never says "0 spike(s)" beside a table that lists one."""
    report, _, page = rendered
    echo = report["workloads"]["echo"]
    # the time figure marks the level shifts; the pair rows among them are the events
    echo_prose = page.prose()
    m = re.search(r"Windowed \w+ round-trip time of echo over time.*?(\d+) level shift\(s\) marked with "
                  r"triangles and (\d+) spike\(s\) with stars(?:.*?; (\d+) pair event\(s\) of the events table "
                  r"not marked)?", echo_prose)
    assert m is not None, echo_prose[:2000]
    shown = int(m[1]) + int(m[2]) + int(m[3] or 0)
    assert shown == len(echo["level_shifts"])
    # s1-1>s6-1's spike at 100.5 s falls in a window without a value: marked on the pair's nearest one
    assert int(m[2]) == 1


def test_report_json_lists_every_warning(rendered: tuple[dict[str, Any], list[str], PageText]) -> None:
    """report.json's ``warnings`` (written by build_report; computed when a version 2 file is read)
    are the terminal's warning lines, each naming its workload."""
    report, lines, page = rendered
    listed = MIGRATIONS[2]({**report, "schema": 2})["warnings"]
    warnings = [line.removeprefix("warning: ") for line in lines if line.startswith("warning: ")]
    assert len(listed) == len(warnings) >= 8
    assert all(any(w in item for item in listed) for w in warnings)
    assert listed == page.items["trust"]


def confirm_terminal(camp: Path, width: int = WIDE) -> list[str]:
    """What `cloudbench confirm` prints, from the campaign's confirm.json (as the page reads it)."""
    doc = json.loads((camp / "confirm" / "confirm.json").read_text())
    console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    render_confirm(confirm_from_document(doc), console)
    return [line.strip() for line in console.export_text().splitlines()
            if line.strip() and set(line.strip()) != {"─"}]


def test_the_confirm_section_is_what_confirm_prints(tmp_path: Path) -> None:
    """The page's confirm section had a renderer of its own: "estimate" and "± relative" columns,
    "n for ±1% / ±5%" cells "– / –", the shared warnings as a list without the series they name, no
    legend of ±rel, where the terminal prints "median", "±rel", "-/-", "(4 series: rtt_p50_us /
    cross_zone@payload=64, …)" and its notes. Now both render one list of tables and lines from one
    confirm.json: every line and table row the terminal prints is on the page, in its words; swept
    groups in number order, values in their natural unit, fractions as percentages."""
    groups = {("rtt_p50_us", f"cross_zone@payload={p}"): normal_values(6, 2000.0 + p / 100, 0.05, p)
              for p in (64, 1024, 16384, 65536)}
    camp = make_campaign(tmp_path, "c", [FakeRun(groups)])
    page = confirm_page(camp)
    lines = confirm_terminal(camp)
    assert not_on_page(lines, page) == [], "\n".join(not_on_page(lines, page))
    # the live result prints the same as the one read back from confirm.json
    live = Console(width=WIDE, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    render_confirm(confirm(camp, ConfirmParams(subsets=20)), live)
    assert [line.strip() for line in live.export_text().splitlines() if line.strip()
            and set(line.strip()) != {"─"}] == lines
    head = next(cells for section, cells, is_head in page.rows if section == "confirm" and is_head)
    assert head == ["metric", "group", "median", "95% CI", "±rel", "n for ±1%/±5%"]
    rows = [cells for section, cells, is_head in page.rows if section == "confirm" and not is_head]
    assert [r[1] for r in rows] == [f"cross_zone@payload={p}" for p in (64, 1024, 16384, 65536)]
    for r in rows:  # about 2 ms: in ms, the interval in the same unit, the relative width a percentage
        assert re.fullmatch(r"[12]\.\d+ ms", r[2]), r
        lo, hi = map(float, r[3].removesuffix(" ms").split("–"))
        assert 1.5 < lo <= float(r[2].split()[0]) <= hi < 3, r
        assert re.fullmatch(r"\d+(\.\d+)?%", r[4]) and r[5] == "-/-", r
    # 6 repetitions reach no bound and predict none: said once, as the terminal says it
    prose = page.prose()
    assert prose.count("±1% not reached in 4 series") == 1
    assert "warning: n = 6: ±1% not reached in 4 series, ±5% in 4 series (-)" in prose
    fractions = make_campaign(tmp_path, "f", [FakeRun({("timeout_frac", "cross_zone"): [0.012] * 8}, unit="1")])
    frac = next(cells for section, cells, is_head in confirm_page(fractions).rows
                if section == "confirm" and not is_head)
    assert frac[2:4] == ["1.2%", "1.2–1.2%"], frac
    assert not_on_page(confirm_terminal(fractions), confirm_page(fractions)) == []


def confirm_page(camp: Path) -> PageText:
    """The page of the campaign's first run, with the campaign's confirm.json."""
    run = RunDir(next(camp.glob("*/manifest.json")).parent)
    write_confirm(confirm(camp, ConfirmParams(subsets=20)), camp / "confirm")
    page = PageText()
    page.feed(write_html(run, full_report(run))[0].read_text())
    return page


def test_the_confirm_section_carries_confirms_notes(tmp_path: Path) -> None:
    """The compressed-day campaign's confirm printed "note: time-of-day effect in echo rtt_mean_us …
    these runs mix hours of the day"; the page's confirm section left the notes of confirm.json out."""
    from tests.report.test_diurnal import campaign

    camp = campaign(tmp_path, 40.0)
    notes = confirm(camp).dataset.notes
    assert any("time-of-day effect in echo rtt_p50_us same_zone" in n for n in notes)
    prose = confirm_page(camp).prose()
    assert all(f"note: {' '.join(n.split())}" in prose for n in notes), notes
