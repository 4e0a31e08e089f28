"""Level-shift and spike detection: PELT against exhaustive optimal partitioning, synthetic truth."""

from __future__ import annotations

import numpy as np
import pytest

from cloudbench.analysis.levelshift import detect, pelt, robust_sigma


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
