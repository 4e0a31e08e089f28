"""`cloudbench diurnal` in a terminal: no cell cut at 80 or 200 columns, every abbreviation in the legend,
amplitudes in their natural unit."""

from __future__ import annotations

import pytest
from rich.console import Console

from cloudbench.report.diurnal import DIURNAL_COLUMNS, diurnal, render_diurnal
from tests.report.test_diurnal import campaign


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return dict(diurnal(campaign(tmp_path_factory.mktemp("d"), 4000.0), "24h"))


@pytest.mark.parametrize("width", [80, 200])
def test_no_cell_is_cut_and_every_abbreviation_is_explained(result: dict, width: int) -> None:
    console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    render_diurnal(result, console)  # type: ignore[arg-type]
    text = console.export_text()
    table = text.split("runs: ")[0].splitlines()
    assert "…" not in "\n".join(table) and "e+" not in text, text  # 4000 us is 4 ms, not 4e+03 us
    assert all(len(line) <= width for line in table), text
    for s in result["series"]:
        for cell in (s["metric"], s["group"], f"{s['n']} ({s['n_values']})"):
            assert any(cell in line for line in table), f"{cell!r} cut at {width} columns:\n{text}"
    p50 = next(s for s in result["series"] if s["metric"] == "rtt_p50_us")
    assert any(" ms" in line and "±" in line for line in table), text
    assert p50["amplitude_at_period"] > 1000  # µs: printed in ms
    flat = " ".join(text.split())
    for short, what in DIURNAL_COLUMNS.values():
        assert short in " ".join(" ".join(table).split()), short
        assert f"{short}: {' '.join(what.split())}" in flat, short  # the legend line says what it is
