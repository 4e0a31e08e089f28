"""Per-pair events on raw RTTs (analysis.events): simulated pairs with known weather."""

from __future__ import annotations

import numpy as np
import pytest

from cloudbench.analysis.events import Event, detect_pair_events, label_host_events, late_rounds

DT = 0.02  # 50 rounds per second


def pair(seed: int, seconds: float = 30.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, DT)
    y = 8000.0 + rng.exponential(120.0, len(t)) + rng.normal(0.0, 20.0, len(t))
    y[rng.random(len(t)) < 0.003] += 3000.0  # single slow replies
    return t, y


def test_a_spike_shorter_than_a_window_is_found_with_time_duration_and_size() -> None:
    t, y = pair(1)
    y[(t >= 12.3) & (t < 12.7)] += 30000.0
    (e,) = detect_pair_events(t, y, DT, 1.0)
    assert e.kind == "spike" and e.origin == "link"
    assert abs(e.time_s - 12.3) <= DT and abs(e.duration_s - 0.4) <= 2 * DT
    assert e.size == pytest.approx(30000.0, rel=0.05) and e.p_value < 1e-6 and "run test" in e.test


def test_a_step_is_found_within_a_window_with_its_size() -> None:
    t, y = pair(2)
    y[t >= 20.3] += 1000.0
    (e,) = detect_pair_events(t, y, DT, 1.0)
    assert e.kind == "step" and abs(e.time_s - 20.3) <= 1.0
    assert e.size == pytest.approx(1000.0, rel=0.10) and e.p_value < 1e-3 and "Mann" in e.test


def test_quiet_pairs_have_no_events() -> None:
    assert sum(len(detect_pair_events(*pair(s), DT, 1.0)) for s in range(20)) == 0


def test_host_events_are_labelled() -> None:
    def spike(at: float) -> Event:
        return Event("spike", at, 0.2, 5000.0, 8000.0, 8000.0, 10, 1e-9, "t", 100.0)

    events = {("a", "b"): [spike(5.0)], ("a", "c"): [spike(5.01), spike(9.0)], ("b", "a"): [],
              ("c", "a"): [spike(9.0)], ("b", "c"): [], ("c", "b"): []}
    out = label_host_events(events, DT, 1.0)
    assert [e.origin for e in out[("a", "b")]] == ["host"]  # both of a's pairs at once
    assert [e.origin for e in out[("a", "c")]] == ["host", "link"]  # 9.0: the link a–c only
    assert [e.origin for e in out[("c", "a")]] == ["link"]
    # a stall of host a seen on a>b and c>a (two counterparts), not on a's other pairs
    stall = {("a", "b"): [spike(5.0)], ("a", "c"): [], ("b", "a"): [], ("c", "a"): [spike(5.3)],
             ("b", "c"): [], ("c", "b"): []}
    out = label_host_events(stall, DT, 1.0)
    assert out[("a", "b")][0].origin == out[("c", "a")][0].origin == "host"
    assert "a's pairs with 2 hosts" in out[("a", "b")][0].reason
    late = Event("step", 3.0, 0.0, 900.0, 8000.0, 8900.0, 100, 1e-4, "t", 100.0, late_share=0.8)
    (e,) = label_host_events({("a", "b"): [late], ("b", "a"): []}, DT, 1.0)[("a", "b")]
    assert e.origin == "host" and "late rounds" in e.reason


def test_late_rounds_from_send_times() -> None:
    rounds = np.arange(10)
    t = rounds * DT + 5.0
    t[4] += 0.004
    assert late_rounds(t, rounds, DT).tolist() == [i == 4 for i in range(10)]


def test_window_medians_and_level_match_numpy_per_window() -> None:
    """The shared helpers the detector calls (orderstats.window_medians through
    _window_medians, levelshift.running_median) against np.median window by window."""
    from cloudbench.analysis.events import _window_medians
    from cloudbench.analysis.levelshift import running_median

    rng = np.random.default_rng(7)
    t = np.sort(rng.uniform(0.0, 20.0, 900))
    t = t[(t < 5.0) | (t > 8.5)]  # windows with no echo
    y = np.round(rng.gamma(2.0, 60.0, len(t)))  # ties
    starts, med, win = _window_medians(t, y, 1.0)
    w = np.floor((t - t[0]) / 1.0).astype(int)
    keys = np.unique(w)
    assert starts.tolist() == pytest.approx((t[0] + keys).tolist())
    assert med.tolist() == [float(np.median(y[w == k])) for k in keys]
    assert (keys[win] == w).all()
    for width in (3, 4, 51):
        half = width // 2
        padded = np.concatenate([[y[0]] * half, y, [y[-1]] * half])
        assert running_median(y, width).tolist() == [float(np.median(padded[i:i + 2 * half + 1]))
                                                     for i in range(len(y))]
