"""One repetition numbering in print: counted from 1, as `plan` and the progress display count them
(the data keep the on-disk index 0, 1, …; trial ids keep ``r000``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from cloudbench.core.tables import rep_number
from cloudbench.workloads.echo.report import render as render_echo
from cloudbench.workloads.throughput.report import render as render_tput
from tests.report.test_tables import echo_section, tput_section


def _text(draw: Callable[[Console], None]) -> str:
    console = Console(width=200, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    draw(console)
    return console.export_text()


def test_rep_number_counts_from_one() -> None:
    assert [rep_number(i) for i in (0, 1, 9)] == ["1", "2", "10"]
    assert rep_number("") == ""


def _first_cells(text: str, start: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines() if start in line]


def test_report_tables_print_repetition_index_0_as_1() -> None:
    tput = _text(lambda c: render_tput("tcp", tput_section(), c))
    assert _first_cells(tput, "→r2-a-host-1") == ["1"]  # data: repetition 0
    assert any(line.split()[:2] == ["1", "r1-a-host-1"] for line in tput.splitlines())  # asymmetry
    echo = _text(lambda c: render_echo("echo", echo_section(), c, {"windows": True}))
    windows = [line.split() for line in echo.splitlines() if "r000-t000-echo" in line]
    assert windows and all(w[0] == "1" for w in windows), echo  # data: repetition 0, id r000
    shifts = [line.split() for line in echo.splitlines() if "s1-1>s6-1" in line]
    assert shifts and shifts[0][0] == "2", echo  # data: repetition 1


def test_colocation_says_what_nominal_is() -> None:
    from cloudbench.workloads.colocation.report import nominal_notes

    hosts = [{"nominal_mbps": 76.51, "egress_mbps": 79.0}, {"nominal_mbps": 76.51}, {"nominal_mbps": float("nan")}]
    (note,) = nominal_notes(hosts)
    assert "76.5 = 80 Mbit/s × 95.6%" in note and "over 100 %" in note, note
    assert nominal_notes([]) == []


def test_compare_prints_medians_in_their_natural_unit(tmp_path: Path) -> None:
    """A 3,980 µs median as 3.98 ms (was 3,980 us / 3.98e+03 us)."""
    from cloudbench.report.compare import compare
    from cloudbench.report.compare_render import render
    from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values

    def camp(name: str, seed: int) -> Path:
        return make_campaign(tmp_path, name, [FakeRun({("rtt_p50_us", "same_zone"): normal_values(3, 3980.0, 0.001,
                                                                                                 seed + i)})
                                              for i in range(8)])

    text = _text(lambda c: render(compare(camp("a", 0), camp("b", 100)), c))
    row = next(line for line in text.splitlines() if line.lstrip().startswith("rtt_p50_us"))
    assert row.count(" ms") == 2 and " us" not in row, row


def test_the_pages_hosts_table_counts_repetitions_from_one(tmp_path: Path) -> None:
    """The page's hosts table numbered repetitions from 0, unlike the tables above it."""
    import re

    from cloudbench.report.build import build_report
    from cloudbench.report.html import render_html
    from cloudbench.store.rundir import RunDir
    from cloudbench.testing.fake_results import FakeRun, make_campaign

    camp = make_campaign(tmp_path, "c", [FakeRun({("m", "g"): [1.0, 2.0]}, workloads=[])])
    run = RunDir(next(camp.glob("*/manifest.json")).parent)
    page, _ = render_html(run, build_report(run), tmp_path / "figures")
    hosts = page[page.index("<h3>Hosts</h3>"):page.index("<h3>Versions</h3>")]
    reps = re.findall(r"<tr><td[^>]*>([^<]*)</td>", hosts)
    assert reps and set(reps) == {"1", "2"}, reps  # data: repetitions 0 and 1
