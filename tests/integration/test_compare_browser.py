"""``compare/index.html`` opened in headless Chromium: no console error, no request that leaves
the file, and the forest plot drawn (its box holds more than background pixels), with a text
alternative. Built from fake result directories (no testbed needed, but it is a browser test)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from cloudbench.report.compare import compare
from cloudbench.report.compare_render import write_compare
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values

from .browser import chromium, render_page
from .test_html_browser import drawn

pytestmark = pytest.mark.integration


def test_the_comparison_page_renders_in_chromium(tmp_path: Path) -> None:
    assert chromium() is not None, "chromium is not installed: run scripts/setup"
    sides = []
    for name, rtt in (("a", 100.0), ("b", 120.0)):
        runs = [FakeRun({("rtt_p50_us", "same_zone"): normal_values(3, rtt, 0.02, 10 * i + len(name)),
                         ("rtt_p50_us", "cross_zone"): normal_values(3, 300, 0.02, 100 + 10 * i + ord(name))})
                for i in range(8)]
        sides.append(make_campaign(tmp_path, name, runs))
    page = write_compare(compare(*sides), tmp_path / "out")
    text = page.read_text()
    assert "https:" not in text and "<script" not in text
    result = render_page(page)
    assert result.console_errors == []
    assert result.requests == [] and result.failed == []
    (box,) = result.boxes
    assert box[2] > 300 and box[3] > 60, box
    assert "same_zone worse" in box[4] and "cross_zone equivalent" in box[4]
    shot = Image.open(io.BytesIO(result.screenshot))
    ink, colours = drawn(shot, box)
    assert ink > 0.02 and colours > 4, (ink, colours)
