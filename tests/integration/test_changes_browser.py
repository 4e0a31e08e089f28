"""``compare/changes.html`` opened in headless Chromium: no console error, no request that leaves
the file, one figure per series with a change, drawn (its box holds more than background pixels),
with a text alternative naming the change's size. Built from a fake scheduled campaign (no testbed
needed, but it is a browser test)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cloudbench.report.changes import changes
from cloudbench.report.changes_render import write_changes
from cloudbench.testing.fake_results import FakeRun, make_campaign

from .browser import chromium, render_page
from .test_html_browser import drawn

pytestmark = pytest.mark.integration

SCHEDULE = {"every": 3600.0, "count": 48, "timezone": "UTC", "day": 86400.0}


def test_the_changes_page_renders_in_chromium(tmp_path: Path) -> None:
    assert chromium() is not None, "chromium is not installed: run scripts/setup"
    rng = np.random.default_rng(4)
    runs = [FakeRun({("rtt_p50_us", "same_zone"): list(1000 + (300 if i >= 24 else 0) + rng.normal(0, 20, 3)),
                     ("rtt_p50_us", "cross_zone"): list(3000 + rng.normal(0, 40, 3))}, schedule=SCHEDULE)
            for i in range(48)]
    page = write_changes(changes(make_campaign(tmp_path, "week", runs)), tmp_path / "out")
    text = page.read_text()
    assert "https:" not in text and "<script" not in text
    result = render_page(page)
    assert result.console_errors == []
    assert result.requests == [] and result.failed == []
    (box,) = result.boxes  # the flat cross_zone series has no figure
    assert box[2] > 600 and box[3] > 150, box
    # the text alternative: the change's size relative to the level before (+300 on 1,000: +30 %)
    m = re.search(r"same_zone: 48 runs, 1 change\(s\): \+([\d.]+)% \[\+([\d.]+)%, \+([\d.]+)%\]", box[4])
    assert m is not None, box[4]
    est, lo, hi = map(float, m.groups())
    assert lo <= est <= hi and lo <= 30.0 <= hi and hi - lo < 10.0, box[4]
    shot = Image.open(io.BytesIO(result.screenshot))
    ink, colours = drawn(shot, box)
    assert ink > 0.02 and colours > 3, (ink, colours)
