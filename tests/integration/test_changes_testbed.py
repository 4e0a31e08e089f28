"""`cloudbench compare DIR --changes` on the netns testbed: a known RTT step on a compressed day.

Campaigns of 20 short echo runs every 6 s over two compressed 60 s days, the WAN link a-b with a
daily delay sine anchored to UTC (tests/integration/compressed_days.py; the diurnal test reads the
same campaigns). In ``step``, the link's one-way delay steps up by 1.5 ms (+3 ms RTT) half-way (a
UTC-anchored WAN step between runs 10 and 11); ``sine`` has a sine (of 2 ms) and no step. The
step must be found within one slot of its time with its size within 20 %, the sine removed first;
the campaign without a step gives no change beyond the default ±5 % threshold.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from tests.integration.compressed_days import EVERY, STEP_RTT_US, CompressedDays
from tests.integration.test_campaign import ROOT, cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_3ms_step_half_way_is_found_within_one_slot_and_a_flat_campaign_has_none(
        compressed_days: CompressedDays, tmp_path: Path) -> None:
    step_at = compressed_days.step_at

    def analyse(campaign: Path) -> dict:
        out = subprocess.run(cli("compare", str(campaign), "--changes", "--json", "--out", str(tmp_path)),
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def epoch(s: str) -> float:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

    res = analyse(compressed_days.step)
    assert "rtt_p50_us / cross_region" in (tmp_path / "compare" / "changes.html").read_text()
    found = [c for c in res["changes"] if c["metric"] == "rtt_p50_us" and c["group"] == "cross_region"]
    assert len(found) == 1, res
    (c,) = found
    assert abs(epoch(c["time_utc"]) - step_at) <= EVERY, (c, step_at)
    assert abs(c["diff"] - STEP_RTT_US) <= 0.2 * STEP_RTT_US, c
    assert c["size"] is not None and c["size_ci"][0] < c["size"] < c["size_ci"][1]
    print(json.dumps(c))
    flat = analyse(compressed_days.sine)
    # no change beyond the default ±5 % (significant ones within it, e.g. +52 us of 10 ms where
    # the delay line's sine is not quite a sinusoid, are counted as small, not listed)
    assert flat["changes"] == [], flat["changes"]
    print("flat small:", [(s["metric"], s["small"]) for s in flat["series"] if s["small"]])
