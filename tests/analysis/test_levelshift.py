"""Level-shift and spike detection: PELT against exhaustive optimal partitioning, synthetic truth."""

from __future__ import annotations

import numpy as np
import pytest

from cloudbench.analysis.levelshift import detect, median_rows, pelt, robust_sigma


def optimal_partitioning(y: np.ndarray, penalty: float, min_seg: int) -> list[int]:
    """Jackson et al.'s O(n²) dynamic programme, no pruning: the exact answer PELT must match."""
    n = len(y)
    f = [0.0] + [np.inf] * n
    last = [0] * (n + 1)
    f[0] = -penalty
    for t in range(1, n + 1):
        for s in range(0, t - min_seg + 1):
            seg = y[s:t]
            c = f[s] + float(((seg - seg.mean()) ** 2).sum()) + penalty
            if c < f[t]:
                f[t], last[t] = c, s
    cps, t = [], n
    while t > 0:
        t = last[t]
        if t > 0:
            cps.append(t)
    return sorted(cps)


@pytest.mark.parametrize("seed", range(6))
def test_pelt_matches_exhaustive_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    levels = rng.choice([0.0, 3.0, -2.0, 5.0], size=4)
    y = np.repeat(levels, rng.integers(5, 15, size=4))
    y = y + rng.normal(0, 1.0, len(y))
    pen = 3 * np.log(len(y))
    assert pelt(y, pen, 2) == optimal_partitioning(y, pen, 2)


def test_steps_and_spikes_with_times_and_sizes() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(120) * 0.5
    y = np.r_[np.full(50, 20_000.0), np.full(40, 26_000.0), np.full(30, 23_000.0)] + rng.normal(0, 80, 120)
    y[20] += 9_000  # one-window spike
    y[100:102] += 4_000  # two-window spike
    shifts = detect(t, y)
    steps = [s for s in shifts if s.kind == "step"]
    spikes = [s for s in shifts if s.kind == "spike"]
    assert [s.index for s in steps] == [50, 90]
    assert steps[0].size == pytest.approx(6_000, rel=0.05)
    assert steps[1].size == pytest.approx(-3_000, rel=0.05)
    assert steps[0].time_s == 25.0
    assert sorted((s.index, s.windows) for s in spikes) == [(20, 1), (100, 2)]
    assert spikes[0].size == pytest.approx(9_000, rel=0.05)


def test_noise_alone_gives_nothing() -> None:
    rng = np.random.default_rng(11)
    found = sum(len(detect(np.arange(300.0), 100 + rng.normal(0, 2, 300))) for _ in range(20))
    assert found <= 2  # at most a rare false alarm over 6000 windows


def test_robust_sigma_ignores_steps() -> None:
    rng = np.random.default_rng(5)
    y = np.r_[np.zeros(200), np.full(200, 50.0)] + rng.normal(0, 1.0, 400)
    assert robust_sigma(y) == pytest.approx(1.0, rel=0.15)


def lan_windows(rng: np.random.Generator, seconds: int, rate: int = 100) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A quiet LAN pair (RTT ≈ 100 µs) where 1 echo in 10,000 waits for a 200 ms
    retransmission timeout: 1 s window starts, means and medians."""
    y = 80.0 + rng.gamma(4.0, 5.0, seconds * rate)
    y[rng.random(len(y)) < 1e-4] += 200_000.0
    w = y.reshape(seconds, rate)
    return np.arange(seconds, dtype=float), w.mean(axis=1), np.median(w, axis=1)


def test_retransmission_timeouts_make_shifts_in_window_means_not_medians() -> None:
    """200 quiet 5-minute series, 1 s windows: on means most series show shifts
    (191 of 200 here), on medians none."""
    rng = np.random.default_rng(23)
    on_means = on_medians = 0
    for _ in range(200):
        t, mean, med = lan_windows(rng, 300)
        on_means += bool(detect(t, mean))
        on_medians += bool(detect(t, med))
    assert on_means >= 150 and on_medians <= 2, (on_means, on_medians)


def test_group_shifts_run_on_the_pairs_window_medians() -> None:
    """The group series is the median of its pairs' window medians: quiet LAN groups with
    retransmission timeouts give no group shift; a step of the whole group is found."""
    from cloudbench.analysis.levelshift import GROUP_STATISTIC, level_shift_rows

    rng = np.random.default_rng(5)
    series = []
    for r in range(40):
        for pair in ("a>b", "b>a", "a>c"):
            t, _, med = lan_windows(rng, 300)
            if r == 0:
                med = med + np.where(t >= 150.0, 50.0, 0.0)  # the whole group, +50 µs at 150 s
            series.append((r, f"t{r}", pair, "cross-subnet", t, med))
    groups = [row for row in level_shift_rows(series) if row["series"].startswith("group:")]
    assert all(row["statistic"] == GROUP_STATISTIC for row in groups)
    assert [(row["repetition"], row["kind"], row["time_s"]) for row in groups] == [(0, "step", 150.0)]
    assert groups[0]["size"] == pytest.approx(50.0, abs=5.0)


def test_a_step_needs_the_windows_its_test_was_measured_on() -> None:
    """Below step_windows_needed (15 at 1e-3) windows no step is sought; from there a clear
    step is found with its bootstrap p-value."""
    from cloudbench.analysis.levelshift import step_windows_needed

    rng = np.random.default_rng(2)
    for n, found in ((14, False), (15, True), (20, True)):
        y = np.r_[np.full(n // 2, 100.0), np.full(n - n // 2, 130.0)] + rng.normal(0, 1.0, n)
        steps = [s for s in detect(np.arange(float(n)), y) if s.kind == "step"]
        assert bool(steps) == found, (n, steps)
        assert (n >= step_windows_needed(1e-3)) == found
    assert steps[0].p_value < 1e-3 and steps[0].to_row()["p_value"] == steps[0].p_value


def test_the_known_step_windows_are_what_the_search_finds() -> None:
    """STEP_WINDOWS_NEEDED spares the report the search: each entry must be the search's result
    (a change to step_p that moves it fails here), and other levels are searched."""
    from cloudbench.analysis.levelshift import STEP_WINDOWS_NEEDED, search_step_windows, step_windows_needed

    for alpha, n in STEP_WINDOWS_NEEDED.items():
        assert search_step_windows(alpha) == n, alpha
    assert step_windows_needed(0.05) == search_step_windows(0.05) < STEP_WINDOWS_NEEDED[1e-3]


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.8])
def test_step_p_holds_alpha_on_flat_ar1_windows(phi: float) -> None:
    """The old Mann–Whitney p between PELT's segments rejected on 239 of
    1,000 flat AR(1) φ = 0.8 series. The bootstrap p repeats the search on AR(1) null
    series: on 300 flat series of 16 windows its rate at 0.05 stays within 3 MC SEs
    (the old test rejected 0.05 in 30-50 % here)."""
    from cloudbench.analysis.levelshift import step_p
    from cloudbench.testing.adversarial import ar1

    rng = np.random.default_rng(int(phi * 10) + 1)
    y = 100.0 + ar1(rng, (300, 16), phi)
    rate = float(np.mean([step_p(v, 0.05, seed=i) < 0.05 for i, v in enumerate(y)]))
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 300), rate


def test_a_one_window_dip_is_not_a_spike() -> None:
    rng = np.random.default_rng(4)
    y = 20_000.0 + rng.normal(0, 80, 60)
    y[30] -= 9_000  # an RTT cannot fall far below its path: a dip is no spike
    y[40] += 9_000
    assert [(s.kind, s.index) for s in detect(np.arange(60.0), y)] == [("spike", 40)]


@pytest.mark.parametrize("n", [1, 2, 5, 20, 21, 360])
def test_median_rows_is_numpys_median_to_the_bit(n: int) -> None:
    rng = np.random.default_rng(n)
    x = np.round(rng.standard_t(2, (300, n)) * 100.0) / 7.0  # heavy tails and ties
    x[::17, rng.integers(0, n)] = np.nan  # a row with a NaN: NaN
    x[::23] = 5.0  # a constant row
    got, want = median_rows(x), np.median(x, axis=1)
    assert got.tobytes() == want.tobytes()
