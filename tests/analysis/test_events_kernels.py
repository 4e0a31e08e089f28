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


def test_finite_and_ordered_equals_numpys_three_passes() -> None:
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 3, 17, 1000):
        t = np.sort(rng.uniform(0, 10, n))
        t[n // 3:n // 3 + 2] = t[n // 3] if n else 0.0  # equal times: in order
        y = rng.lognormal(3, 1, n)
        cases = [(t, y)]
        for at in {0, n // 2, n - 1} if n else set():
            for bad in (np.nan, np.inf, -np.inf):
                for which in (0, 1):
                    arrs = [t.copy(), y.copy()]
                    arrs[which][at] = bad
                    cases.append((arrs[0], arrs[1]))
            if at:
                back = t.copy()
                back[at] = np.nextafter(back[at - 1], -np.inf)  # one ulp back in time
                cases.append((back, y))
        for a, b in cases:
            want = bool(np.isfinite(a).all() and np.isfinite(b).all() and not (a[1:] < a[:-1]).any())
            assert events_median.finite_and_ordered(a, b) is want, (n, a, b)
    assert not all(events_median.finite_and_ordered(a, b) for a, b in cases)


def test_ordered_check_reads_only_arrays_it_can() -> None:
    """Arrays the kernel would misread (another dtype, another length) take numpy's path."""
    t = np.arange(8, dtype=np.int64)
    y = np.array([1.0, 2.0, np.nan])
    assert events_median.finite_and_ordered(t, np.ones(8, dtype=np.float32)) is True
    assert events_median.finite_and_ordered(t[::-1].copy(), np.ones(8)) is False  # int64 read as int64
    assert events_median.finite_and_ordered(np.arange(3.0), y) is False
    assert events_median.finite_and_ordered(np.arange(3.0), y[:2]) is True  # numpy's answer, no overread


def test_round_numbers_as_a_function_are_asked_for_only_by_an_event() -> None:
    from cloudbench.analysis.events import detect_pair_events

    rng = np.random.default_rng(5)
    n = 6000
    t = np.arange(n) * 0.01 + rng.uniform(0, 2e-4, n)
    t[3000:3040] += 0.004  # late rounds under the spike
    flat = np.round(50 + rng.exponential(1.0, n), 3)
    spiky = flat.copy()
    spiky[3000:3040] += 40.0
    calls: list[int] = []

    def rounds() -> np.ndarray:
        calls.append(1)
        return np.arange(n)

    assert detect_pair_events(t, flat, 0.01, 5.0, round_index=rounds) == []
    assert calls == []
    lazy = detect_pair_events(t, spiky, 0.01, 5.0, round_index=rounds)
    assert calls and lazy == detect_pair_events(t, spiky, 0.01, 5.0, round_index=np.arange(n))
    assert lazy and lazy[0].late_share > 0.5
    unordered = t.copy()
    unordered[[10, 11]] = unordered[[11, 10]]  # the sorting path asks at once, with the same result
    assert (detect_pair_events(unordered, spiky, 0.01, 5.0, round_index=rounds)
            == detect_pair_events(unordered, spiky, 0.01, 5.0, round_index=np.arange(n)))
    with pytest.raises(ValueError, match="differ in length"):
        detect_pair_events(t, spiky, 0.01, 5.0, round_index=lambda: np.arange(n - 1))


def test_pairs_in_threads_at_once_give_each_pairs_own_events() -> None:
    """The detector's scratch arrays are per thread and reused pair after pair (left-over values
    from a longer pair included): pairs run in threads at once, in another order, give the
    events each gives alone."""
    from concurrent.futures import ThreadPoolExecutor

    from cloudbench.analysis.events import detect_pair_events
    from tests.analysis.test_events_fast import DT, generated

    pairs = [generated(s, n) for s, n in ((1, 120000), (2, 6000), (3, 120000), (4, 60000), (5, 3000))]
    alone = [repr(detect_pair_events(t, y, DT, 1.0, round_index=r)) for t, y, r in pairs]
    with ThreadPoolExecutor(3) as pool:
        for _ in range(2):
            order = list(np.random.default_rng(_).permutation(len(pairs)))
            got = list(pool.map(lambda i: repr(detect_pair_events(pairs[i][0], pairs[i][1], DT, 1.0,
                                                                  round_index=pairs[i][2])), order))
            assert got == [alone[i] for i in order]
    assert sum("spike" in a for a in alone) >= 2


@pytest.mark.parametrize("seed", range(3))
def test_the_level_of_a_range_equals_the_whole_series_level_there(seed: int) -> None:
    """``level_between`` (a spike's level, the whole series' never written on the grid) against
    the whole running median, sliced, and the residuals the counting kernel wrote without the
    level against numpy's: ranges at either end (mirrored windows), inside, empty, the whole
    series; windows wider than the series allows; ties; odd and even lengths; off the grid."""
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    for n in (1, 2, 3, 4, 9, 10, 101, 2000):
        for y in (np.round(rng.lognormal(4, 0.5, n), 3), rng.integers(0, 3, n).astype(float),
                  rng.lognormal(4, 0.5, n)):
            for width in (1, 3, 11, 201, 6001):
                half = max(0, min(width // 2, (n - 1) // 2))
                whole = events_median.running_median(y, width)
                if half:
                    assert whole.tolist() == ndimage.median_filter(y, 2 * half + 1, mode="mirror").tolist()
                for a, b in {(0, n), (0, min(3, n)), (max(n - 3, 0), n), (n // 3, n // 2), (n // 2, n // 2)}:
                    got = events_median.level_between(y, width, a, b)
                    assert got.tolist() == whole[a:b].tolist(), (n, width, a, b)
                level, resid, absr = events_median.level_and_residuals(y, width, scratch=True)
                if level is None:  # counted: the residuals are still numpy's
                    assert resid.tolist() == (y - whole).tolist() and absr.tolist() == np.abs(y - whole).tolist()


def test_the_counted_level_declines_one_value_off_the_grid_wherever_it_lies() -> None:
    """cb_level's key pass runs two values at a time and the last one alone: one value off the
    grid, NaN, or past 32-bit keys, at the first, second, middle or last place of odd and even
    series, makes it decline (1); on the grid, negative values and zeros included, it counts."""
    from tests.analysis.test_events_fast import _counted_level

    rng = np.random.default_rng(2)
    for n in (3, 4, 7, 8, 101):
        y = np.round(rng.normal(0, 5, n), 3)
        y[n // 2] = -0.0
        rc, _level, resid, _ = _counted_level(y, 1, 1e3)
        assert rc == 0 and resid.tolist() == (y - events_median.running_median(y, 3)).tolist()
        for at in sorted({0, 1, n // 2, n - 1}):
            for bad in (y[at] + 1e-4, np.nan, 2.2e6, -2.2e6):  # 2.2e6 ms: 2.2e9 µs, past 2^31 - 1
                z = y.copy()
                z[at] = bad
                assert _counted_level(z, 1, 1e3)[0] == 1, (n, at, bad)
    assert _counted_level(np.round(rng.normal(0, 5, 9)) + 2.1e9, 1, 1.0)[0] == 0  # under 2^31 - 1


def test_the_oracle_takes_round_numbers_as_a_function_too() -> None:
    """bench_scale --oracle swaps the full detector in for the scan's call, which hands round
    numbers in as a function: the oracle gives the same events either way."""
    from tests.analysis.events_reference import detect_pair_events as reference
    from tests.analysis.test_events_fast import DT, generated

    t, y, r = generated(7, 6000)
    assert repr(reference(t, y, DT, 1.0, round_index=lambda: r)) == repr(reference(t, y, DT, 1.0, round_index=r))


@pytest.mark.parametrize("seed", range(4))
def test_the_fast_path_equals_the_full_detector_on_the_scans_grid(seed: int) -> None:
    """As tests/analysis/test_events_fast.py, with RTTs in ms on the µs grid (as the scan hands
    them in: the level counted at scale 10^3, no level written, the spikes' level from
    level_between), spikes included."""
    from cloudbench.analysis.events import detect_pair_events
    from tests.analysis.events_reference import detect_pair_events as reference
    from tests.analysis.test_events_fast import DT, generated

    kinds = []
    for n in (3000, 12000, 24000):
        t, y, r = generated(100 + seed, n)
        y = np.round(y / 7.0 + np.random.default_rng(seed).uniform(0, 1, n), 3)  # thousandths, not whole
        fast = detect_pair_events(t, y, DT, 1.0, round_index=r)
        assert repr(fast) == repr(reference(t, y, DT, 1.0, round_index=r))
        kinds += [e.kind for e in fast]
    assert "spike" in kinds or seed % 2  # the comparison is not vacuous (checked on the even seeds)
