"""More than one mode in a latency distribution: test, locate, and weigh them.

Percentiles of a multimodal distribution mislead: the Latency Sensei blog shows
three variants of one benchmark with the same median (0.45 ms) and p90s of 12,
9 and 0.77 ms, because a few percent of the round trips sat in modes near 10
and 20 ms and p90 fell on one side or the other of a gap. So every latency
distribution of the report is tested for more than one mode, and when it has
several the modes and their shares are shown beside the percentiles.

Method:

* **Test: Hartigan & Hartigan's dip test** (Ann. Statist. 13, 1985), from the
  ``diptest`` package (p-values interpolated from its table of the null
  distribution, the uniform, the least favourable unimodal one). It runs on the
  logarithm of the values, where latency modes are separated by their ratio
  (0.45, 10 and 20 ms) rather than drowned by the tail's scale.
* **Bounded input**, so that 138 M observations cost what 20 000 do: the test
  takes a uniform random sample without replacement of at most ``max_n``
  values (:func:`bounded_sample`), or a sample drawn from a histogram
  (:func:`sample_from_histogram`, uniform within each bin).
* **Modes**: the local maxima of a Gaussian kernel density estimate of the log
  sample (Silverman's bandwidth from ``scipy.stats.gaussian_kde``, the density
  summed in numpy, :func:`_density`; the bandwidth halved up to
  four times while the dip test says multimodal and the density shows one
  peak). Each mode owns the values between the density minima (antimodes) on
  either side; a mode with less than ``min_share`` of the observations is
  merged into its larger neighbour. Shares are counted
  on *all* the values (or the whole histogram), not on the sample.
* **Unstable percentiles**: a percentile whose level is near a cumulative share
  at an antimode (e.g. p90 with 85 % of the values in the first mode and 92 % in
  the first two) lands on one side of a gap or the other depending on small
  changes in the shares (:meth:`ModeTest.unstable_percentiles`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import diptest
import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

METHOD = (
    "Hartigan's dip test on log values (diptest), modes from a Gaussian KDE of the log sample "
    "(Silverman bandwidth), shares counted on all values"
)
MAX_N = 20_000  # sample the test and the KDE see (the dip test is O(n log n); KDE O(n × grid))
GRID = 512


@dataclass(frozen=True)
class Mode:
    """One mode: where the density peaks, the range it owns (antimodes), its share of all values."""

    location: float
    low: float  # -inf for the first mode
    high: float  # +inf for the last
    share: float


@dataclass(frozen=True)
class ModeTest:
    """The dip test's verdict on one distribution and the modes found."""

    n: int  # values in the input (or the histogram's total count)
    n_tested: int  # the bounded sample the test and the KDE used
    dip: float
    p_value: float
    alpha: float
    modes: tuple[Mode, ...]

    @property
    def multimodal(self) -> bool:
        """The dip test rejects unimodality at ``alpha`` and the density shows several modes."""
        return self.p_value < self.alpha and len(self.modes) > 1

    def unstable_percentiles(
        self, percentiles: Sequence[float], margin: float = 0.05, relative: float = 0.5
    ) -> list[float]:
        """The percentiles (0–100) that a small change in the modes' shares moves across a gap.

        Percentile level ``q`` is unstable near the cumulative share ``c`` at an antimode
        when ``|q - c| <= margin`` and the mass on q's side of c (``c`` below, ``1 - c``
        above) would change by at most ``relative`` of itself to move q across: p90
        with cuts at 0.85 and 0.92 is, p99.99 with a 2 % tail mode above 0.98 is not
        (that mode would have to vanish).
        """
        if not self.multimodal:
            return []
        cuts = np.cumsum([m.share for m in self.modes])[:-1]
        out = []
        for p in percentiles:
            q = p / 100.0
            dist = np.abs(q - cuts)
            side = np.where(q > cuts, 1.0 - cuts, cuts)
            if bool(np.any((dist <= margin) & (dist <= relative * side))):
                out.append(p)
        return out


def bounded_sample(values: NDArray[np.floating], max_n: int = MAX_N, seed: int = 0) -> FloatArray:
    """The finite positive values, or a uniform sample of ``max_n`` of them without replacement."""
    xs: FloatArray = np.asarray(values, dtype=np.float64)
    valid = np.isfinite(xs) & (xs > 0)
    n = int(np.count_nonzero(valid))
    if n <= max_n:
        small: FloatArray = xs[valid]
        return small
    picks = np.random.default_rng(seed).choice(n, size=max_n, replace=False)
    out: FloatArray = (xs if n == len(xs) else xs[valid])[picks]  # all valid: no copy of the input
    return out


def sample_from_histogram(
    edges: NDArray[np.floating], counts: NDArray[np.integer], max_n: int = MAX_N, seed: int = 0
) -> FloatArray:
    """A sample of ``min(max_n, total)`` values drawn from a histogram, uniform within each bin.

    Bins are drawn in proportion to their counts without replacement of the
    observations (multivariate hypergeometric; multinomial beyond 10⁹ values,
    where numpy's exact draw stops), so a sample of the whole histogram is the
    histogram itself, spread within its bins.
    """
    edges = np.asarray(edges, dtype=float)
    counts = np.asarray(counts, dtype=np.int64)
    if len(edges) != len(counts) + 1 or np.any(np.diff(edges) <= 0) or np.any(counts < 0):
        raise ValueError("a histogram needs increasing edges, one more than its non-negative counts")
    total = int(counts.sum())
    rng = np.random.default_rng(seed)
    k = min(max_n, total)
    if k == total:
        per_bin = counts
    elif total < 10**9:  # numpy's limit for the exact draw
        per_bin = rng.multivariate_hypergeometric(counts, k)
    else:  # k << total: drawing with replacement is the same to within k / total
        per_bin = rng.multinomial(k, counts / total)
    bins = np.repeat(np.arange(len(counts)), per_bin)
    out: FloatArray = edges[bins] + rng.random(len(bins)) * (edges[bins + 1] - edges[bins])
    return out


def find_modes(
    values: NDArray[np.floating], *, alpha: float = 0.01, min_share: float = 0.01, max_n: int = MAX_N, seed: int = 0
) -> ModeTest:
    """Test ``values`` (e.g. RTTs in µs, any size) for more than one mode; see the module docstring."""
    xs: FloatArray = np.asarray(values, dtype=np.float64)
    sample = bounded_sample(xs, max_n, seed)
    valid = np.isfinite(xs) & (xs > 0)
    n = int(np.count_nonzero(valid))
    return _test(sample, n, alpha, min_share, lambda cuts: _shares_of_values(xs, valid, n, cuts))


def find_modes_histogram(
    edges: NDArray[np.floating],
    counts: NDArray[np.integer],
    *,
    alpha: float = 0.01,
    min_share: float = 0.01,
    max_n: int = MAX_N,
    seed: int = 0,
) -> ModeTest:
    """:func:`find_modes` of a distribution given as a histogram (edges > 0, counts per bin)."""
    e: FloatArray = np.asarray(edges, dtype=np.float64)
    c: NDArray[np.int64] = np.asarray(counts, dtype=np.int64)
    sample = sample_from_histogram(e, c, max_n, seed)
    sample = sample[sample > 0]
    return _test(sample, int(c.sum()), alpha, min_share, lambda cuts: _shares_of_histogram(e, c, cuts))


def _test(
    sample: FloatArray, n: int, alpha: float, min_share: float, shares_of: Callable[[FloatArray], FloatArray]
) -> ModeTest:
    if len(sample) < 10 or np.ptp(sample) == 0:  # too few, or all equal: one mode by definition
        loc = float(np.median(sample)) if len(sample) else float("nan")
        return ModeTest(n, len(sample), 0.0, 1.0, alpha, (Mode(loc, -np.inf, np.inf, 1.0),) if n else ())
    logs = np.log(sample)
    dip, p = diptest.diptest(logs)
    dip, p = float(dip), float(p)
    peaks, cuts = _kde_modes(logs, several=p < alpha)
    shares = shares_of(np.exp(cuts))
    peaks, cuts, shares = _merge_small(peaks, cuts, shares, min_share)
    bounds = np.concatenate([[-np.inf], np.exp(cuts), [np.inf]])
    modes = tuple(
        Mode(float(np.exp(pk)), float(bounds[i]), float(bounds[i + 1]), float(s))
        for i, (pk, s) in enumerate(zip(peaks, shares, strict=True))
    )
    return ModeTest(n, len(sample), dip, p, alpha, modes)


def _kde_modes(logs: FloatArray, several: bool) -> tuple[FloatArray, FloatArray]:
    """Peaks and the antimodes between them of a KDE of ``logs`` (bandwidth halved while one peak)."""
    from scipy.stats import gaussian_kde  # noqa: PLC0415 - 0.6 s to import; the registry imports this module

    kde = gaussian_kde(logs, bw_method="silverman")
    lo, hi = float(logs.min()), float(logs.max())
    pad = 3 * float(np.sqrt(kde.covariance[0, 0]))
    grid = np.linspace(lo - pad, hi + pad, GRID)
    factor = float(kde.factor)
    for _ in range(5):
        dens = _density(logs, grid, float(np.sqrt(kde.covariance[0, 0])))
        inner = dens[1:-1]
        peaks = np.flatnonzero((inner > dens[:-2]) & (inner >= dens[2:])) + 1
        if len(peaks) > 1 or not several:
            break
        factor /= 2
        kde.set_bandwidth(factor)
    cuts = np.array([grid[a + int(np.argmin(dens[a : b + 1]))] for a, b in itertools.pairwise(peaks)])
    return grid[peaks], cuts


def _density(xs: FloatArray, grid: FloatArray, bw: float, chunk: int = 4) -> FloatArray:
    """The Gaussian KDE of ``xs`` with bandwidth ``bw`` on ``grid``: what ``gaussian_kde``
    evaluates, to about 1e-14 of the peak, in numpy, a few grid points at a time.

    scipy's evaluation holds the GIL and takes the slow path of ``exp`` where the
    kernel underflows (most of a wide log-RTT range): about 130 ms against 45 ms
    here for 20 000 values on 512 points, and this one runs beside other work.
    """
    out = np.empty(len(grid))
    scale = -0.5 / (bw * bw)
    for i in range(0, len(grid), chunk):
        d = grid[i : i + chunk, None] - xs[None, :]
        d *= d
        d *= scale
        np.exp(d, out=d)
        out[i : i + chunk] = d.sum(axis=1)
    out /= len(xs) * bw * np.sqrt(2 * np.pi)
    return out


def _merge_small(
    peaks: FloatArray, cuts: FloatArray, shares: FloatArray, min_share: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Merge the smallest mode under ``min_share`` into a neighbour until none is left (the
    larger neighbour keeps its peak)."""
    pk, ct, sh = [float(x) for x in peaks], [float(x) for x in cuts], [float(x) for x in shares]
    while len(pk) > 1 and min(sh) < min_share:
        i = int(np.argmin(sh))
        if i == 0:
            j = 1
        elif i == len(pk) - 1:
            j = i - 1
        else:
            j = i - 1 if sh[i - 1] >= sh[i + 1] else i + 1
        keep, drop = (j, i) if sh[j] >= sh[i] else (i, j)
        sh[keep] += sh[drop]
        del ct[min(i, j)]
        del pk[drop]
        del sh[drop]
    return np.array(pk), np.array(ct), np.array(sh)


def _shares_of_values(values: FloatArray, valid: NDArray[np.bool_], n: int, cuts: FloatArray) -> FloatArray:
    """Counted with one boolean pass per cut: no copy or index array the size of ``values``."""
    below = [int(np.count_nonzero(valid & (values < c))) for c in cuts]
    out: FloatArray = np.diff(np.array([0, *below, n], dtype=float)) / max(n, 1)
    return out


def _shares_of_histogram(edges: FloatArray, counts: NDArray[np.int64], cuts: FloatArray) -> FloatArray:
    """A bin is split at a cut in proportion to the width on either side."""
    cum = np.concatenate([[0.0], np.cumsum(counts, dtype=float)])
    at = np.interp(np.concatenate([[edges[0]], cuts, [edges[-1]]]), edges, cum)
    out: FloatArray = np.diff(at) / max(cum[-1], 1.0)
    return out


__all__ = [
    "MAX_N",
    "METHOD",
    "Mode",
    "ModeTest",
    "bounded_sample",
    "find_modes",
    "find_modes_histogram",
    "sample_from_histogram",
]
