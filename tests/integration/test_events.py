"""Every per-pair event the echo report prints is real.

* Three regions on flat emulated links, a 300 ms spike of +50 ms one way on the
  link a–c and a step of +2 ms one way on b–c: the spike is found on a>c and
  c>a only, at its time (± 2 rounds and the run's p99 jitter), with its duration
  (± 3 rounds and twice the jitter, plus the delay line's tail) and size (± 20 %),
  labelled the link's (or the host's, only when a stall of that host on the busy
  cores moved its other pairs at the same moment); the step on b>c and c>b within
  one window, size ± 10 %.
* 20 s of flat links (6 pairs, 0.033 series-hours): at most one link event
  (a smoke check: the stated rate, 0.01 link events per series-hour, needs
  300 series-hours to show, which ``bench/bench_events.py`` simulates; a detector
  that fires on noise fails it, see the commit that cut it from 60 s); events
  the measuring host caused are labelled ``origin: host``, not counted; every
  event of either run has a finite p-value and an interval or none (never NaN).

Run (root, about 1 minute)::

    .venv/bin/python -m pytest -m integration tests/integration/test_events.py -s
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cloudbench.report.build import build_report
from cloudbench.store.rundir import RunDir

from .test_wan import Recorder, campaign

pytestmark = pytest.mark.integration

RATE = 50  # echo rounds per second
ROUND = 1.0 / RATE
WINDOW = 0.5  # 31 windows in 15 s: the step test needs 14, and the step at 11 s leaves 9 after it

THREE = """name: {name}
seed: 16
repetitions: {reps}
providers:
  netns:
    regions:
      ra: {{zones: {{ra-1: {{subnets: {{sa: {{hosts: 1}}}}}}}}}}
      rb: {{zones: {{rb-1: {{subnets: {{sb: {{hosts: 1}}}}}}}}}}
      rc: {{zones: {{rc-1: {{subnets: {{sc: {{hosts: 1}}}}}}}}}}
wan:
  links:
    - {{between: [ra, rb], delay: 3ms}}
    - {{between: [ra, rc], delay: 4ms{spike}}}
    - {{between: [rb, rc], delay: 5ms{step}}}
workloads:
  - {{kind: echo, rate: {rate}, duration: {duration}, warmup: 0.5s, window: {window}s, self_loop: false}}
"""

SPIKE_AT, SPIKE_FOR, SPIKE_EXTRA = 7.0, 0.3, 0.050
STEP_AT, STEP_TO = 11.0, 0.007


def events_of(run: RunDir) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = build_report(run)["workloads"]["echo"]["events"]
    return events


def assert_well_formed(events: list[dict[str, Any]]) -> None:
    """Every event has a finite p-value and a size interval or none, never NaN."""
    assert np.isfinite([e["p_value"] for e in events]).all()
    for e in events:
        assert (e["size_ci_low"] is None) == (e["size_ci_high"] is None), e
        assert e["size_ci_low"] is None or np.isfinite([e["size_ci_low"], e["size_ci_high"]]).all(), e


def series_time(run: RunDir, rec: Recorder, series: str, at: float, rep: int = 0) -> float:
    """Configured WAN time ``at`` in the series' clock (s after its source worker's start)."""
    epoch_ns = rec.clusters[rep].facts["wan"]["epoch_monotonic_ns"]
    trial = next(t for t in run.manifest().to_json()["trials"] if t["repetition"] == rep)
    t0_ns = trial["stats"][series.split(">")[0]]["t0_ns"]
    return float((epoch_ns + at * 1e9 - t0_ns) / 1e9)


@pytest.mark.alone  # the planted spike's length and the flat pairs' silence are times the other worker's CPU
# use moves (2026-11-26, fresh clones of c9dd886 and 14d45b6 beside the compute lane: a spike
# 0.12 s long against 0.05 s planted; a 1.5 ms, 4-echo spike on a flat pair)
def test_spike_and_step_are_found_on_their_own_pairs(tmp_path: Path) -> None:
    spike = f", spikes: [{{at: {SPIKE_AT}s, duration: {SPIKE_FOR * 1000:.0f}ms, extra: {SPIKE_EXTRA * 1000:.0f}ms}}]"
    step = f", steps: [{{at: {STEP_AT}s, delay: {STEP_TO * 1000:.0f}ms}}]"
    text = THREE.format(name="events", reps=1, spike=spike, step=step, rate=RATE, duration="15s",
                        window=WINDOW)
    run, rec = campaign(text, tmp_path)
    events = events_of(run)
    shown = [(e["series"], e["kind"], e["origin"], round(e["time_s"], 3), round(e["size"]),
              e["p_value"]) for e in events]
    print("\n" + "\n".join(map(str, shown)))
    # The spike is found on a>c and c>a, and on no other pair as a link's. The testbed's delay
    # lines and workers are processes on busy cores: a stall of one (a 60 ms excursion on a>b and
    # b>a at 5.6 s, 0.5 s before the spike, at load average 9) makes a host's pairs with two hosts
    # move at once, and the detector then labels the spike its host's, as documented
    # (label_host_events). So either label, but "host" only with that evidence beside it.
    ac = {"sa-1>sc-1", "sc-1>sa-1"}
    assert {e["series"] for e in events if e["kind"] == "spike" and e["origin"] == "link"} <= ac, shown
    spikes = {e["series"]: e for e in events if e["kind"] == "spike" and e["series"] in ac}
    assert set(spikes) == ac, shown
    for series, e in spikes.items():
        if e["origin"] == "host":
            beside = [o for o in events if o["origin"] == "host" and o["series"] not in ac
                      and o["time_s"] - WINDOW <= e["time_s"] + e["duration_s"]
                      and e["time_s"] - WINDOW <= o["time_s"] + o["duration_s"]]
            assert beside, ("labelled the host's without another pair moving", e, shown)
        expected = series_time(run, rec, series, SPIKE_AT)
        print(f"{series}: spike at {e['time_s']:.3f} s (expected {expected:.3f}), "
              f"{e['duration_s'] * 1000:.0f} ms (expected {SPIKE_FOR * 1000:.0f}), "
              f"{e['size']:.0f} us (expected {2 * SPIKE_EXTRA * 1e6:.0f}), p = {e['p_value']:.1e}, "
              f"p99 jitter {e['jitter_p99']:.0f} us")
        # the detector reports a spike of at least size_k (4) × the p99 jitter, so the run must
        # resolve it for the rest to mean anything: the p99 jitter was 1.4-17.9 ms in 17 series at
        # load average 5-10; a +25 ms spike (50 ms of RTT) went unreported at load 7 and at 9-10,
        # hence +50 ms (100 ms of RTT, under TCP's 200 ms minimum RTO), for 300 ms, not 400: with
        # its tail (below) a 400 ms one measured 440 ms, near the one window (0.5 s) a spike may
        # last, and once one direction was not reported
        assert 5 * e["jitter_p99"] <= 2 * SPIKE_EXTRA * 1e6, "the spike is not 5× the p99 jitter"
        # an echo straddling either edge of the delay line's spike may or may not rise over the
        # threshold: under load (p99 jitter 2.1 ms in one CI run) the start was one round late and
        # the run two rounds long, at the old bounds; one more round each is the measured spread.
        # Which echoes meet the spike also moves with the path's own delay noise (delay lines and
        # workers are processes on busy cores): plus the run's p99 jitter at each edge (at load
        # average 10: p99 jitter 10.9 ms, the run 61 ms longer than the spike). The delay line never
        # reorders, so the packets behind those it holds when the spike ends wait too: the tail
        # lasts up to SPIKE_EXTRA longer (300 ms measured as 340-360 ms in 4 runs at load 5-10)
        jitter_s = e["jitter_p99"] / 1e6
        assert abs(e["time_s"] - expected) <= 2 * ROUND + jitter_s, (series, e, expected)
        longer = e["duration_s"] - SPIKE_FOR
        assert -(3 * ROUND + 2 * jitter_s) <= longer <= SPIKE_EXTRA + 3 * ROUND + 2 * jitter_s, (series, e)
        assert e["size"] == pytest.approx(2 * SPIKE_EXTRA * 1e6, rel=0.20), (series, e)
        assert e["p_value"] < 1e-3 and "run test" in e["test"]
    steps = {e["series"]: e for e in events if e["kind"] == "step" and e["origin"] == "link"
             and e["series"] in ("sb-1>sc-1", "sc-1>sb-1")}
    assert set(steps) == {"sb-1>sc-1", "sc-1>sb-1"}, shown
    for series, e in steps.items():
        expected = series_time(run, rec, series, STEP_AT)
        print(f"{series}: step at {e['time_s']:.3f} s (expected {expected:.3f}), {e['size']:.0f} us "
              f"(expected {2 * (STEP_TO - 0.005) * 1e6:.0f}), p = {e['p_value']:.1e}")
        assert abs(e["time_s"] - expected) <= WINDOW, (series, e, expected)
        assert e["size"] == pytest.approx(2 * (STEP_TO - 0.005) * 1e6, rel=0.10), (series, e)
        assert e["p_value"] < 1e-3 and "max-CUSUM" in e["test"]
    # no link event on the quiet pairs of the quiet link a–b
    quiet = [s for s in shown if s[0] in ("sa-1>sb-1", "sb-1>sa-1") and s[2] == "link"]
    assert quiet == [], quiet
    # the flat test's run seldom has an event to check this on; this one always has four
    assert_well_formed(events)


def test_flat_links_have_at_most_one_link_event(tmp_path: Path) -> None:
    reps, seconds = 1, 20.0
    text = THREE.format(name="flat", reps=reps, spike="", step="", rate=RATE,
                        duration=f"{seconds:g}s", window=WINDOW)
    run, _ = campaign(text, tmp_path)
    events = events_of(run)
    series_hours = reps * 6 * seconds / 3600.0
    link = [e for e in events if e["origin"] == "link"]
    host = [e for e in events if e["origin"] == "host"]
    for e in events:
        print(e["repetition"], e["series"], e["kind"], e["origin"], round(e["time_s"], 2),
              round(e["size"]), f"{e['p_value']:.1e}", e["size_ci_low"], e["size_ci_high"], e["reason"])
    print(f"\nflat links: {len(link)} link events, {len(host)} host events in "
          f"{series_hours:.3f} series-hours")
    assert {e["origin"] for e in events} <= {"link", "host"}
    assert all(e["reason"] for e in host)
    assert len(link) <= 1, [(e["repetition"], e["series"], e["kind"], e["time_s"], e["size"]) for e in link]
    assert_well_formed(events)
