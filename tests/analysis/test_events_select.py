"""The compiled radix select (``cb_select``) gives numpy's order statistics, and the jitter's
medians and percentiles through it give numpy's values, with the kernel and without it.

The series are chosen to reach every branch of the select: values spread over many top-16-bit
buckets, values sharing their top 16, 32 or 48 bits (so the gather goes one, two or three
levels down), a bucket holding most of the series (one value repeated), ties at the last 16
bits, ranks at the edge of a bucket (the two order statistics in two buckets), negatives,
±0.0, subnormals and huge magnitudes, and n = 1, 2."""

from __future__ import annotations

import itertools
import shutil

import numpy as np
import pytest

from cloudbench.analysis import events_jitter, events_median

pytestmark = pytest.mark.skipif(not any(shutil.which(c) for c in ("cc", "gcc", "clang")),
                                reason="no C compiler: the numpy paths run (tested elsewhere)")


def _near(rng: np.random.Generator, n: int, base: float, span: int) -> np.ndarray:
    """``n`` doubles within ``span`` ulps over ``base``: they share the bits above ``span``'s."""
    return (np.full(n, base).view(np.uint64) + rng.integers(0, span, n).astype(np.uint64)).view(np.float64)


def _series(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    spread = rng.normal(0, 1, n) * 10.0 ** rng.integers(-300, 300, n)  # many buckets, both signs
    odd = rng.choice([-0.0, 0.0, 5e-324, -5e-324, 2.2e-308, 1e308, -1e308, 1.0, -1.0], n)
    mostly_one = np.where(rng.random(n) < 0.9, 1.5, rng.normal(1.5, 0.01, n))  # one bucket holds most
    out = [spread, odd, mostly_one, np.full(n, -3.25), np.round(rng.normal(0, 2, n)), rng.random(n)]
    for span in (1 << 4, 1 << 14, 1 << 20, 1 << 30, 1 << 40, 1 << 50):  # the levels: shared bits above span's
        out.append(_near(rng, n, 1.5, span))
        out.append(-_near(rng, n, 1e-200, span))
    return out


def _ranks(n: int, rng: np.random.Generator) -> list[int]:
    if n <= 70:
        return list(range(n))
    return sorted({0, 1, n // 2 - 1, n // 2, n - 2, n - 1, *rng.integers(0, n, 20).tolist()})


@pytest.mark.parametrize("seed", range(10))
def test_the_radix_select_gives_numpys_order_statistics(seed: int) -> None:
    """Every rank asked (all of them for a short series) with and without the next one: the
    sorted series' values (== : numpy's own pick between -0.0 and 0.0 is whichever it met),
    the input untouched."""
    assert events_median.kernel() is not None
    rng = np.random.default_rng(seed + 100)
    for x in _series(seed):
        before = x.copy()
        srt = np.sort(x)
        for k in _ranks(len(x), rng):
            low, none = events_median.select(x, k) or (np.nan, np.nan)
            assert low == srt[k] == np.partition(x, k)[k] and np.isnan(none), (len(x), k)
            if k + 1 < len(x):
                got = events_median.select(x, k, two=True)
                assert got == (srt[k], srt[k + 1]), (len(x), k)
        assert before.tobytes() == x.tobytes()


def test_the_radix_select_on_edge_sizes_and_ranks() -> None:
    """n = 1, 2; ranks out of range refused; two order statistics astride a bucket edge at
    each level (the largest of one bucket, the smallest of the next)."""
    one = events_median.select(np.array([2.5]), 0)
    assert one is not None and one[0] == 2.5 and np.isnan(one[1])
    assert events_median.select(np.array([3.0, -1.0]), 0, two=True) == (-1.0, 3.0)
    for bad in ((np.array([1.0]), 0, True), (np.array([1.0, 2.0]), 2, False), (np.array([1.0]), -1, False)):
        with pytest.raises(IndexError):
            events_median.select(*bad)
    rng = np.random.default_rng(7)
    for step in (1 << 48, 1 << 32, 1 << 16, 1):  # the edge between two buckets at each level
        base = np.full(1, 1.25).view(np.uint64)[0]
        x = np.r_[np.full(300, base), np.full(300, base + np.uint64(step))].view(np.float64)
        x = x + 0.0 * rng.random(600)  # same values, a fresh array
        rng.shuffle(x)
        srt = np.sort(x)
        for k in (298, 299, 300):
            assert events_median.select(x, k, two=True) == (srt[k], srt[k + 1]), (step, k)


def _without_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_jitter, "select", lambda x, k, two=False: None)


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_the_jitters_median_percentile_and_rest_percentile_equal_numpys(
        seed: int, kernel: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``median``, ``percentile`` and ``RestPercentile`` of long series (the select's range:
    SELECT_MIN lowered so short ones take it too) are numpy's, bit for bit, with the kernel and
    through numpy's partition without it."""
    if kernel:
        monkeypatch.setattr(events_jitter, "SELECT_MIN", 1)
    else:
        _without_kernel(monkeypatch)
    rng = np.random.default_rng(seed)
    for x in _series(seed):
        x = x[np.abs(x) < 1e300]  # np.percentile's interpolation overflows near the largest doubles
        if len(x) == 0:
            continue
        want = float(np.median(x))
        mine = x.copy()
        for got in (events_jitter.median(x), events_jitter.median(mine, inplace=True)):
            assert got == want and (got == 0 or got.hex() == want.hex()), len(x)
        assert sorted(mine) == sorted(x)
        for q in (50.0, 99.0, 99.9, 12.5):
            want = float(np.percentile(x, q))
            got = events_jitter.percentile(x.copy(), q)
            assert got == want and (got == 0 or got.hex() == want.hex()), (len(x), q)
        m_min = max(1, len(x) - int(rng.integers(0, len(x) // 5 + 1)))
        rest = events_jitter.RestPercentile(x, 99.0, m_min)
        assert rest.top.tolist() == np.sort(x)[rest.start:].tolist()
        want = float(np.percentile(x, 99.0))
        assert rest.whole() == want and (want == 0 or rest.whole().hex() == want.hex())


@pytest.mark.parametrize("kernel", [True, False])
def test_the_jitters_statistics_of_a_pair_length_series_equal_numpys(kernel: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """At a 6-hour pair's scale (the select's own range, and RestPercentile's top from the
    sample's threshold or, when it misleads, from the select's order statistic)."""
    if not kernel:
        _without_kernel(monkeypatch)
    rng = np.random.default_rng(3)
    n = 300_001
    heavy = np.abs(rng.standard_t(2, n)) * 0.05
    period = np.where(np.arange(n) % 64 == 0, 0.0, rng.random(n) + 1.0)  # _top_from gathers everything
    peaks = np.where(np.arange(n) % 64 == 0, 1e6 + rng.random(n), rng.random(n))  # _top_from gives up
    assert events_jitter._top_from(peaks, n - 5000) is None
    for x in (heavy, heavy[:-1], np.round(heavy, 2), period, peaks, np.ones(n)):
        assert events_jitter.median(x.copy(), inplace=True) == float(np.median(x))
        rest = events_jitter.RestPercentile(x, 99.0, len(x) - 5000)
        assert rest.top.tolist() == np.sort(x)[rest.start:].tolist()
        assert rest.whole().hex() == float(np.percentile(x, 99.0)).hex()


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_window_medians_equal_numpys(seed: int) -> None:
    """``window_medians`` (a radix select per window in C, 11 bits at a time from the highest
    its values differ in) against np.median per window: random values, sorted either way,
    organ pipes, one value, few values, negatives and zeros, windows of 1 to ~5,000 echoes of
    odd and even counts."""
    rng = np.random.default_rng(seed)
    n = 40_000
    t = np.cumsum(rng.exponential(1.0, n))  # windows of differing counts
    for width, m in ((1.0, 3000), (2.0, 3000), (37.0, n), (333.0, n), (5000.0, n)):  # ~m / width windows
        organ = np.r_[np.arange(n // 2), np.arange(n - n // 2)[::-1]].astype(float)
        for y in (rng.normal(0, 1, n), np.sort(rng.normal(0, 1, n)), -np.sort(rng.normal(0, 1, n)), organ,
                  np.full(n, 4.0), rng.integers(-2, 3, n).astype(float), rng.choice([-0.0, 0.0, -1.0], n),
                  np.tile(np.r_[np.arange(50.0), np.arange(50.0)[::-1]], n // 100)):
            y = y[:m]
            found = events_median.window_medians(t[:m], y, width)
            assert found is not None
            _keys, bounds, med = found
            want = [float(np.median(y[a:b])) for a, b in itertools.pairwise(bounds.tolist())]
            assert med.tolist() == want, width
            assert np.diff(bounds).min() >= 1 and bounds[-1] == m
