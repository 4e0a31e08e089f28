"""`cloudbench compare DIR --changes` on the netns testbed: a known RTT step on a compressed day.

Two campaigns at once, 20 short echo runs every 6 s over two compressed 60 s days, the WAN
link a-b with a daily delay sine anchored to UTC. In one, the link's one-way delay steps up by
1.5 ms (+3 ms RTT) half-way (a UTC-anchored WAN step between runs 10 and 11); the other is flat.
The step must be found within one slot of its time with its size within 20 %, the sine removed
first; the flat campaign gives no change beyond the default ±5 % threshold.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.integration.test_campaign import ROOT, cli, leftovers

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEC = """\
name: {name}
seed: 3
repetitions: 1
providers:
  netns:
    regions:
      a: {{zones: {{a-1: {{subnets: {{sa: {{hosts: 1}}}}}}}}}}
      b: {{zones: {{b-1: {{subnets: {{sb: {{hosts: 1}}}}}}}}}}
wan:
  links:
    - between: [a, b]
      delay: 5ms
      periodic: [{{amplitude: 1ms, period: 60s, phase: 7s, anchor: utc}}]
{steps}
workloads:
  - {{kind: echo, name: echo, rate: 20, duration: 2s, warmup: 0.5s, timeout: 1s, self_loop: false}}
schedule:
  start: "{start}"
  every: 6s
  count: 20
  slip: 3s
  cover: none
  day: 60s
"""
EVERY = 6.0
STEP_RTT_US = 3000.0


def test_a_3ms_step_half_way_is_found_within_one_slot_and_a_flat_campaign_has_none(tmp_path: Path) -> None:
    start = math.ceil(time.time()) + 20
    step_at = start + 10 * EVERY + 4.0  # after run 10 (its 2.5 s of echoes), before run 11
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
    steps = {"step": f"      steps: [{{at: {step_at}, delay: 6.5ms, anchor: utc}}]", "flat": ""}
    procs = {}
    for name, st in steps.items():
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(SPEC.format(name=name, steps=st, start=iso))
        subprocess.run(cli("campaign", "start", str(spec), "--dir", str(tmp_path / name)), check=True,
                       cwd=ROOT, capture_output=True, timeout=60)
    try:
        for name in steps:
            log = (tmp_path / f"{name}.log").open("wb")
            procs[name] = subprocess.Popen(cli("campaign", "run", str(tmp_path / name)), stdout=log,
                                           stderr=log, cwd=ROOT)
        for name, p in procs.items():
            assert p.wait(timeout=20 * EVERY + 180) == 0, (tmp_path / f"{name}.log").read_text()[-2000:]
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=60)
    for name in steps:
        assert leftovers(tmp_path / name) == []

    def analyse(name: str) -> dict:
        out = subprocess.run(cli("compare", str(tmp_path / name), "--changes", "--json", "--out", str(tmp_path)),
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def epoch(s: str) -> float:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

    res = analyse("step")
    assert "rtt_p50_us / cross_region" in (tmp_path / "compare" / "changes.html").read_text()
    found = [c for c in res["changes"] if c["metric"] == "rtt_p50_us" and c["group"] == "cross_region"]
    assert len(found) == 1, res
    (c,) = found
    assert abs(epoch(c["time_utc"]) - step_at) <= EVERY, (c, step_at)
    assert abs(c["diff"] - STEP_RTT_US) <= 0.2 * STEP_RTT_US, c
    assert c["size"] is not None and c["size_ci"][0] < c["size"] < c["size_ci"][1]
    print(json.dumps(c))
    flat = analyse("flat")
    # no change beyond the default ±5 % (significant ones within it, e.g. +52 us of 10 ms where
    # the delay line's sine is not quite a sinusoid, are counted as small, not listed)
    assert flat["changes"] == [], flat["changes"]
    print("flat small:", [(s["metric"], s["small"]) for s in flat["series"] if s["small"]])
