"""Per-pair events on raw RTTs (analysis.events): simulated pairs with known weather."""

from __future__ import annotations

import numpy as np
import pytest

from cloudbench.analysis.events import Event, EventParams, _steps, detect_pair_events, label_host_events, late_rounds

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
    assert e.size == pytest.approx(1000.0, rel=0.10) and e.p_value < 1e-3 and "bootstrap" in e.test


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
    starts, med, bounds = _window_medians(t, y, 1.0)
    win = np.repeat(np.arange(len(med)), np.diff(bounds))  # each echo's window
    w = np.floor((t - t[0]) / 1.0).astype(int)
    keys = np.unique(w)
    assert starts.tolist() == pytest.approx((t[0] + keys).tolist())
    assert med.tolist() == [float(np.median(y[w == k])) for k in keys]
    assert (keys[win] == w).all()
    for width in (3, 4, 51):
        half = width // 2
        # mirrored ends (c b | a b c ...), not the edge value repeated
        padded = np.concatenate([y[half:0:-1], y, y[-2:-half - 2:-1]])
        assert running_median(y, width).tolist() == [float(np.median(padded[i:i + 2 * half + 1]))
                                                     for i in range(len(y))]
    # wider than the series: cut to it (one median of everything, not a filter padded past its ends)
    short = y[:9]
    assert running_median(short, 6001).tolist() == running_median(short, 9).tolist()


def lan(seed: int, seconds: float = 20.0, dt: float = 0.01, phi: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """A quiet LAN pair in µs (the quickstart's: 100 rounds/s, RTT ≈ 60 µs), its jitter AR(1)
    on a log scale with coefficient ``phi``, values rounded to 1 µs; the first echoes of a
    connection a little slower (cold caches)."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, dt)
    e = rng.normal(0.0, 0.25, len(t))
    for i in range(1, len(t)):
        e[i] += phi * e[i - 1]
    y = np.round(45.0 + 15.0 * np.exp(e * np.sqrt(1 - phi**2)))
    y[:3] += 40.0
    return t, y


def test_a_quickstart_trial_shorter_than_its_window_has_no_events() -> None:
    """20 s at 100 rounds/s with the old 30 s window (a filter of 6,001 echoes over
    2,000, pinned to the first echo) reported spikes of a few µs with NaN intervals."""
    found = [(s, e.kind, round(e.size, 1)) for s in range(40) for e in detect_pair_events(*lan(s), 0.01, 30.0)]
    assert found == []


def test_spikes_are_one_sided_a_dip_is_not_an_event() -> None:
    t, y = pair(4)
    y[(t >= 12.3) & (t < 12.7)] -= 6000.0  # far below the path's own RTT: not a spike
    assert [e for e in detect_pair_events(t, y, DT, 1.0) if e.kind == "spike"] == []


def test_a_short_spike_has_its_min_max_interval_with_its_coverage() -> None:
    t, y = pair(5, 60.0)
    at = np.flatnonzero(t >= 30.0)[:5]  # five echoes: too few for an exact 95 % CI of their median
    y[at] += 30000.0 + np.arange(5) * 100.0
    (e,) = detect_pair_events(t, y, DT, 1.0)
    assert e.kind == "spike" and e.samples == 5 and e.p_value < 1e-3
    # min − upper bound of the level's median .. max − its lower bound, at (1 − 2·0.5⁵)·√0.95
    assert e.size_level == pytest.approx((1 - 2 * 0.5**5) * np.sqrt(0.95))
    assert e.size_low <= e.size <= e.size_high
    assert e.size_low == pytest.approx(30000.0, abs=600) and e.size_high == pytest.approx(30400.0, abs=600)
    row = e.to_row()
    assert row["size_ci_low"] is not None and row["size_ci_level"] == pytest.approx(e.size_level)


def test_spike_size_interval_is_na_not_nan_without_a_side() -> None:
    from cloudbench.analysis.events import median_interval, spike_interval, spike_size_interval

    assert all(np.isnan(spike_interval(np.array([5.0]), np.arange(100.0))))
    assert all(np.isnan(spike_size_interval(np.array([5.0]), np.arange(100.0))))
    lo, hi, cov = median_interval(np.array([3.0, 1.0, 2.0]), 0.95)
    assert (lo, hi) == (1.0, 3.0) and cov == pytest.approx(0.75)
    lo, hi, cov = median_interval(np.arange(100.0), 0.95)
    assert cov == 0.95 and lo < 49.5 < hi
    e = Event("spike", 1.0, 0.1, 5.0, 1.0, 1.0, 1, 1e-9, "t", 1.0)
    assert e.to_row()["size_ci_low"] is None and e.to_row()["size_ci_level"] is None


def test_dependent_jitter_does_not_make_spikes() -> None:
    """AR(1) jitter (φ = 0.9) makes runs of high echoes: the Markov run test counts them
    as the rest of the series has them, an independent-echo test would not."""
    found = [(s, e.kind) for s in range(20)
             for e in detect_pair_events(*lan(s, 60.0, phi=0.9), 0.01, 2.0) if e.kind == "spike"]
    assert found == []


def test_markov_run_p_matches_the_chain() -> None:
    from cloudbench.analysis.events import markov_run_p

    above = np.zeros(1000, dtype=bool)
    above[[100, 101, 300, 500, 501, 502]] = True
    rest = np.ones(1000, dtype=bool)
    rest[700:704] = False
    above[700:704] = True
    run = above[700:704]
    # counts of the rest: 6 above in 996; transitions among rest-neighbours
    q = 6.5 / 997.0
    q_uu = (3 + 0.5) / (6 + 1.0)  # up->up: 100>101, 500>501, 501>502
    assert markov_run_p(run, above, rest) == pytest.approx(1000 * q * q_uu**3)
    gap = np.array([True, True, False, True])
    q_du = (3 + 0.5) / ((995 - 3 - 6) + 1.0)  # rest transitions from below: all but those from above
    both = rest[:-1] & rest[1:]
    n_down = float((~above[:-1][both]).sum())
    q_du = (float((~above[:-1][both] & above[1:][both]).sum()) + 0.5) / (n_down + 1.0)
    expect = 1000 * 2 * q * q_uu * (1 - q_uu) * q_du
    assert markov_run_p(gap, above, rest) == pytest.approx(expect)


def test_steps_need_the_windows_the_step_test_was_measured_on() -> None:
    """The step test needs the windows with which a clear step can reach alpha (15 at
    1e-3, fewer at 0.05): with one fewer a 1000 µs step on ~30 µs jitter is not sought."""
    from cloudbench.analysis.levelshift import step_windows_needed

    need = step_windows_needed(1e-3)
    assert need == 15 and step_windows_needed(0.05) < need
    t, y = pair(2, seconds=need - 1.0)
    y[t >= float((need - 1) // 2)] += 1000.0  # on a window edge
    assert [e for e in detect_pair_events(t, y, DT, 1.0) if e.kind == "step"] == []
    t, y = pair(2, seconds=float(need))
    y[t >= float(need // 2)] += 1000.0
    assert [e.kind for e in detect_pair_events(t, y, DT, 1.0)] == ["step"]


@pytest.mark.parametrize("seed", range(3))
def test_a_merged_change_point_is_tested_again_and_bounds_nothing_when_it_fails(seed: int) -> None:
    """A 500 µs step at 10 s, then a 1 s excursion of +1000 µs at 25 s: the search finds change
    points at the step and at both edges of the excursion; the edges (two windows apart) merge into
    one point, which is no step (the level after it is the level before it). It is tested again
    and dropped, so the step's 'after' segment runs to the end of the series (3,000 echoes). Before,
    the merged point was never re-tested and, though not printed, cut the step's segment at 25 s
    (1,400-1,700 echoes), so the step's size came from half the data."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, 40.0, 0.01)
    y = 100.0 + rng.normal(0.0, 30.0, t.size)
    y[t >= 10.0] += 500.0
    y[(t >= 25.0) & (t < 26.0)] += 1000.0
    (step,) = _steps(t, y, 1.0, EventParams(), 0.0, None)
    assert step.time_s == pytest.approx(10.0, abs=0.05) and step.samples == np.sum(t >= step.time_s)
    assert step.size == pytest.approx(500.0, abs=10.0)
