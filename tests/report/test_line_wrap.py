"""Warnings and prose on a terminal wrap at spaces to its width with a hanging indent, and stay ONE
line each when piped (tests and users grep them).

Before, every report line was printed soft-wrapped: at 80 columns the terminal folded
"warning: Percentiles between modes are unstable ..." mid-word."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from cloudbench.core.blocks import HANG, PREFIX, ReportLine, print_blocks
from cloudbench.report.render import render_report, report_views
from cloudbench.store.rundir import RunDir
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values
from tests.report.test_page_has_the_terminal import shipped_shapes


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("wrap")
    camp = make_campaign(tmp, "c", [FakeRun({("rtt_p50_us", "cross_zone"): normal_values(3, 500.0, 0.05, 1)})])
    return shipped_shapes(RunDir(next(camp.glob("*/manifest.json")).parent))


def printed(fn: Any, width: int, terminal: bool) -> str:
    buf = io.StringIO()
    fn(Console(file=buf, width=width, force_terminal=terminal, color_system=None))
    return buf.getvalue()


@pytest.mark.parametrize("width", [60, 80, 120])
def test_on_a_terminal_every_line_fits_and_no_word_is_cut(report: dict[str, Any], width: int) -> None:
    text = printed(lambda c: render_report(report, c), width, terminal=True)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, "\n".join(line for line in lines if len(line) > width)
    piped = printed(lambda c: render_report(report, c), width, terminal=False).splitlines()
    long = [b for b in report_views(report).blocks() if isinstance(b, ReportLine) and len(b.printed()) > width]
    assert len(long) >= 5  # the modes and tput warnings, the notes: the test wraps something
    for b in long:
        # the line's words, in order, on consecutive lines: none cut, each continuation hanging
        # under the text after the prefix
        words = b.printed().split()
        first = next(i for i, line in enumerate(lines) if line.split()[:3] == words[:3])
        got, i = lines[first].split(), first + 1
        hang = " " * (len(PREFIX[b.kind]) or HANG)
        while len(got) < len(words):
            assert lines[i].startswith(hang) and lines[i][len(hang)] != " ", (hang, lines[i])
            got += lines[i].split()
            i += 1
        assert got == words
        assert b.printed() in piped  # piped: one line, whole


def test_piped_each_line_is_one_line_whatever_the_width(report: dict[str, Any]) -> None:
    lines = printed(lambda c: render_report(report, c), 80, terminal=False).splitlines()
    views = report_views(report)
    assert lines[0] == views.header.text
    assert all(b.printed() in lines for b in views.blocks()[1:] if isinstance(b, ReportLine))
    assert any(len(line) > 80 for line in lines)  # a long warning stays whole on its line


def test_a_word_longer_than_the_line_is_not_cut_here() -> None:
    path = "/very/long/" + "x" * 90 + "/report/index.html"
    text = printed(lambda c: print_blocks([ReportLine(f"see {path} for the figures", "note")], c), 40, True)
    assert text.splitlines() == ["note: see", "      " + path, "      for the figures"]  # the terminal folds it
