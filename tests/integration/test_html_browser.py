"""The HTML report of a real testbed run, opened in headless Chromium:
no console error, no request that leaves the file, and every figure drawn (its box holds
more than background pixels)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cloudbench.report.build import build_report
from cloudbench.report.files import write_report
from cloudbench.report.html import write_html
from cloudbench.runner import CampaignRunner
from cloudbench.workloads import parse_spec
from tests.report.test_page_has_the_terminal import PageText, not_on_page, terminal

from .browser import chromium, render_page
from .test_run import small_spec, stacks_left

pytestmark = pytest.mark.integration

EXTRA = """  - {kind: traceroute, name: paths, sources: [s1-1], destinations: [s5-1, s6-1], wait_probe: 50ms,
     wait_timeout: 1s}
  - {kind: throughput, name: tput, pairs: [[s1-1, s5-1]], duration: 2s, direction: both}
"""


def drawn(shot: Image.Image, box: tuple[float, float, float, float, str]) -> tuple[float, int]:
    """Share of the box's pixels that are not the white background, and distinct colours."""
    x, y, w, h, _ = box
    crop = np.asarray(shot.crop((int(x), int(y), int(x + w), int(y + h))).convert("RGB"))
    pixels = crop.reshape(-1, 3)
    ink = int((pixels.min(axis=1) < 235).sum())
    return ink / max(len(pixels), 1), len(np.unique(pixels, axis=0))


def test_the_report_of_a_real_run_renders_in_chromium(tmp_path: Path) -> None:
    assert chromium() is not None, "chromium is not installed: run scripts/setup"
    spec_text = small_spec(repetitions=1) + EXTRA
    runner = CampaignRunner(parse_spec(spec_text, "browser.yaml"), "browser.yaml", tmp_path)
    run = runner.execute()
    assert stacks_left(run) == []
    assert run.manifest().status == "complete"
    report = build_report(run)
    write_report(run, report)
    page, *figures = write_html(run, report)
    text = page.read_text()
    assert "http:" not in text and "https:" not in text and "<script" not in text
    svgs = sorted(p.name for p in figures if p.suffix == ".svg")
    pngs = sorted(p.name for p in figures if p.suffix == ".png")
    assert [p.removesuffix(".svg") for p in svgs] == [p.removesuffix(".png") for p in pngs]
    for stem in ("echo-box", "echo-tail", "echo-time", "echo-grid", "echo-quorums", "tput-series",
                 "tput-asymmetry", "paths-mda-s1-1-s5-1", "paths-mda-s1-1-s6-1"):
        assert f"{stem}.svg" in svgs, svgs

    result = render_page(page)
    assert result.console_errors == []
    assert result.requests == [] and result.failed == []
    assert len(result.boxes) == len(svgs) == text.count("<figure ")
    shot = Image.open(io.BytesIO(result.screenshot))
    assert shot.height >= result.height - 1
    for box in result.boxes:
        assert box[2] > 100 and box[3] > 100, box
        assert box[4], f"figure without a text alternative at {box[:4]}"
        ink, colours = drawn(shot, box)
        assert ink > 0.02 and colours > 8, f"figure looks blank ({ink:.1%} ink, {colours} colours): {box[4][:80]}"
    # the page carries every line and table row the terminal prints of this real run
    parsed = PageText()
    parsed.feed(text)
    lines = terminal(report)
    assert any("RTT by latency group" in line for line in lines) and not_on_page(lines, parsed) == []
