"""The per-pair detector's compiled kernels equal the numpy (or pure Python) code they
replace, to the last bit, on inputs chosen to be awkward: ties, constant series, even and odd
counts, series shorter than a segment or a window, values far apart, values off the grid."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from cloudbench.analysis import events_median
from cloudbench.analysis.levelshift import pelt as plain_pelt

pytestmark = pytest.mark.skipif(not any(shutil.which(c) for c in ("cc", "gcc", "clang")),
                                reason="no C compiler: the numpy paths run (tested elsewhere)")


def _pelt_series(seed: int) -> list[tuple[np.ndarray, float, int]]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    noise = rng.normal(0, 1, n)
    steps = np.cumsum(rng.random(n) < 0.02) * rng.choice([0.5, 3.0, 10.0])
    ties = np.round(rng.normal(0, 1, n))  # few distinct values: equal costs, argmin's first wins
    far = noise * 1e-3 + 1e6  # cumulative sums that lose digits
    out = []
    for y in (noise, noise + steps, ties, ties + steps, far, np.zeros(n), np.full(n, 7.25)):
        for k in (0.0, 1.0, 4.0 * np.log(max(n, 2))):
            for m in (1, 2, 3):
                out.append((y, float(k), m))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_compiled_pelt_equals_levelshifts(seed: int) -> None:
    assert events_median.kernel() is not None
    for y, penalty, m in _pelt_series(seed):
        assert events_median.pelt(y, penalty, m) == plain_pelt(y, penalty, m), (len(y), penalty, m)


def test_the_compiled_pelt_finds_steps_on_short_and_tiny_series() -> None:
    """Not vacuous: the series above have change points, and the edge lengths are covered."""
    y = np.r_[np.zeros(50), np.full(50, 5.0), np.zeros(30)] + np.random.default_rng(1).normal(0, 0.1, 130)
    assert events_median.pelt(y, 1.0, 2) == plain_pelt(y, 1.0, 2) == [50, 100]
    for n in range(0, 8):
        for m in (1, 2, 3):
            z = np.arange(n, dtype=float) ** 2
            assert events_median.pelt(z, 0.5, m) == plain_pelt(z, 0.5, m)
