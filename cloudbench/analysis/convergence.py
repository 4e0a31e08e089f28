"""Convergence of a quantile's exact CI over random subsets of the repetitions (CONFIRM).

For each size ``n`` from the smallest with a CI up to ``N``, many random subsets of size
``n`` drawn without replacement; per size the mean estimate and the mean CI bounds
(:func:`convergence`), and the smallest ``n`` whose mean CI lies within ±e of the mean
estimate and stays there for every larger size (:func:`smallest_stable_n`).

Vectorisation: a uniformly random subset of the data has the distribution of a
uniformly random subset of *positions* in the sorted data, so only the
positions of the order statistics a CI needs are drawn, exactly, from their
joint law (beta-binomial gaps, :func:`subset_order_positions`): a few numpy
calls on arrays holding every (size, subset) pair at once, whatever the subset
sizes; the values are then gathered from every series of the same length in
one indexing step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.stats import min_n_for_ci, quantile_ci_ranks

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def finite_or_none(x: float | None) -> float | None:
    """``x`` as a JSON number, or None (JSON has no nan or inf)."""
    return None if x is None or not math.isfinite(x) else float(x)


def _floats_or_nan(xs: list[float | None]) -> FloatArray:
    return np.array([math.nan if x is None else x for x in xs], dtype=np.float64)


class ConvergenceJSON(TypedDict):
    """``convergence`` of a series in ``confirm.json``."""

    trials: int
    every_size: bool
    sizes: list[int]
    estimate: list[float | None]
    lower: list[float | None]
    upper: list[float | None]
    relative_half_width: list[float | None]


def relative_half_width(estimate: FloatArray, lower: FloatArray, upper: FloatArray) -> FloatArray:
    """``max(est - lo, hi - est) / |est|`` elementwise (inf where est is 0 and the CI is not, 0 where
    the CI has no width)."""
    half = np.maximum(estimate - lower, upper - estimate)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = half / np.abs(estimate)
    return np.where(half == 0, 0.0, rel)


@dataclass(frozen=True)
class Convergence:
    """Mean estimate and mean CI bounds over random subsets, per subset size."""

    sizes: IntArray
    estimate: FloatArray
    lower: FloatArray
    upper: FloatArray
    subsets: int  # random subsets per size
    every_size: bool

    @property
    def relative_half_width(self) -> FloatArray:
        """``max(est - lo, hi - est) / |est|`` per size (inf where est is 0 and the CI is not)."""
        return relative_half_width(self.estimate, self.lower, self.upper)

    def to_json(self) -> ConvergenceJSON:
        """The curve as ``confirm.json`` holds it (non-finite values as null; the number of
        subsets per size under its on-disk name ``trials``)."""
        return {
            "trials": self.subsets,
            "every_size": self.every_size,
            "sizes": self.sizes.tolist(),
            "estimate": [finite_or_none(float(x)) for x in self.estimate],
            "lower": [finite_or_none(float(x)) for x in self.lower],
            "upper": [finite_or_none(float(x)) for x in self.upper],
            "relative_half_width": [finite_or_none(float(x)) for x in self.relative_half_width],
        }

    @classmethod
    def from_json(cls, doc: ConvergenceJSON) -> Convergence:
        """The curve back from :meth:`to_json`."""
        return cls(np.array(doc["sizes"], dtype=np.int64), _floats_or_nan(doc["estimate"]),
                   _floats_or_nan(doc["lower"]), _floats_or_nan(doc["upper"]), int(doc["trials"]),
                   bool(doc["every_size"]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Convergence):
            return NotImplemented
        return (self.subsets == other.subsets and self.every_size == other.every_size
                and all(np.array_equal(x, y, equal_nan=True) for x, y in
                        ((self.sizes, other.sizes), (self.estimate, other.estimate),
                         (self.lower, other.lower), (self.upper, other.upper))))

    __hash__ = None  # type: ignore[assignment]


def size_grid(n_min: int, n_max: int, max_sizes: int) -> IntArray:
    """Every size in ``[n_min, n_max]``, or a geometric grid of at most ``max_sizes``.

    The grid is dense where sizes are small (every size until its geometric
    step exceeds one) and always includes both ends.
    """
    if n_max < n_min:
        return np.empty(0, dtype=np.int64)
    if n_max - n_min + 1 <= max_sizes:
        return np.arange(n_min, n_max + 1, dtype=np.int64)

    def grid(num: int) -> IntArray:
        return np.unique(np.rint(np.geomspace(n_min, n_max, num)).astype(np.int64))

    lo, hi = max_sizes, n_max - n_min + 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(grid(mid)) <= max_sizes:
            lo = mid
        else:
            hi = mid - 1
    return grid(lo)


def subset_order_positions(rng: np.random.Generator, population: int, sizes: IntArray,
                           ranks: IntArray, subsets: int) -> IntArray:
    """0-based positions, in ``range(population)``, of the ``ranks``-th smallest
    members of ``subsets`` uniformly random subsets (without replacement) per size.

    ``ranks`` has shape ``(R, S)`` (1-based, ``<= sizes``); the result has shape
    ``(R, S, subsets)``, drawn from the exact joint law of those order statistics.

    Method: a size-n subset of ``range(N)`` is a composition of the ``N - n``
    left-out positions into ``n + 1`` gaps (before the first member, between
    members, after the last); a uniform subset is a uniform composition, i.e.
    Dirichlet-multinomial with all weights 1. The r-th member sits at
    ``r - 1 + (sum of the first r gaps)``, and by the aggregation property that
    sum is beta-binomial ``BB(N - n, r, n + 1 - r)``; given it, the remaining gaps
    are again a uniform composition. So ranks are placed in increasing order
    with one beta and one binomial draw each: ``O(R * S * subsets)`` work, no
    subset is ever materialised.
    """
    order = np.argsort(ranks, axis=0, kind="stable")
    ranked = np.take_along_axis(ranks, order, axis=0)
    shape = (len(sizes), subsets)
    left_out = np.broadcast_to(population - sizes[:, None], shape).astype(np.int64)
    gaps = np.broadcast_to(sizes[:, None] + 1, shape).astype(np.int64)
    skipped = np.zeros(shape, dtype=np.int64)
    prev = np.zeros((len(sizes), 1), dtype=np.int64)
    found = np.empty((len(ranks), *shape), dtype=np.int64)
    for i in range(len(ranks)):
        r = ranked[i][:, None]
        block = r - prev  # gaps between the previous rank and this one
        # Beta needs a > 0; a repeated rank (block 0) takes no gaps at all.
        q = rng.beta(np.maximum(block, 1), gaps - block, size=shape)
        drawn = np.where(block > 0, rng.binomial(left_out, q), 0)
        skipped += drawn
        left_out -= drawn
        gaps -= block
        found[i] = skipped + r - 1
        prev = r
    out = np.empty_like(found)
    np.put_along_axis(out, np.broadcast_to(order[:, :, None], found.shape), found, axis=0)
    return out


# Sizes are processed in chunks of about this many subsets: large enough that
# numpy's per-call overhead vanishes, small enough for a steady progress bar.
_CHUNK_SUBSETS = 1 << 15


def convergence(sorted_values: FloatArray, p: float = 0.5, level: float = 0.95, *,
                subsets: int = 200, seed: int = 0, max_sizes: int = 1000,
                progress: Callable[[int], None] | None = None) -> list[Convergence]:
    """Convergence curves of the exact p-quantile CI for series of equal length.

    Method: CONFIRM (Maricq et al., OSDI'18) with exact binomial ranks
    (Le Boudec, Thm. 2.1): for each size ``n`` from :func:`min_n_for_ci` to
    ``N`` (or a grid, see :func:`size_grid`), ``subsets`` subsets of size ``n``
    drawn without replacement, independently per size; per size the mean (over
    subsets) estimate (Hyndman & Fan 7) and mean CI bounds.

    A uniformly random subset of the data is a uniformly random subset of
    positions in the sorted data, so only the positions of the needed order
    statistics are drawn (:func:`subset_order_positions`), never whole subsets.

    ``sorted_values`` has shape ``(m, N)`` (or ``(N,)``) and is ascending along
    its last axis. All ``m`` series share the same random positions, so a
    series' curve depends only on its values, ``seed`` and ``N``, never on which
    other series are analysed with it. ``progress(k)`` is called with the number
    of sizes done so far.
    """
    x = np.atleast_2d(np.asarray(sorted_values, dtype=np.float64))
    m, big_n = x.shape
    n_min = min_n_for_ci(p, level)
    sizes = size_grid(n_min, big_n, max_sizes)
    est = np.empty((m, len(sizes)))
    lo = np.empty_like(est)
    hi = np.empty_like(est)
    # Rank of the lower/upper CI bound and of the two order statistics that
    # Hyndman & Fan 7 interpolates between, per size (1-based).
    ranks = np.empty((4, len(sizes)), dtype=np.int64)
    frac = np.empty(len(sizes))
    for i, n in enumerate(sizes.tolist()):
        ci = quantile_ci_ranks(n, p, level)
        assert ci is not None  # sizes start at the smallest n with a CI
        h = (n - 1) * p
        a = math.floor(h)
        ranks[:, i] = (ci.j, ci.k, a + 1, min(a + 2, n))
        frac[i] = h - a
    rng = np.random.default_rng([seed, big_n])
    chunk = max(1, _CHUNK_SUBSETS // subsets)
    for start in range(0, len(sizes), chunk):
        part = slice(start, start + chunk)
        pos = subset_order_positions(rng, big_n, sizes[part], ranks[:, part], subsets)
        mean = x[:, pos].mean(axis=-1)  # (m, 4, sizes in chunk)
        lo[:, part], hi[:, part] = mean[:, 0], mean[:, 1]
        est[:, part] = mean[:, 2] + frac[part] * (mean[:, 3] - mean[:, 2])
        if progress is not None:
            progress(min(start + chunk, len(sizes)))
    every = len(sizes) == max(0, big_n - n_min + 1)
    return [Convergence(sizes, est[s], lo[s], hi[s], subsets, every) for s in range(m)]


def smallest_stable_n(conv: Convergence, rel_error: float) -> int | None:
    """Smallest size whose mean CI is within ±e of the mean estimate at it and at
    every larger evaluated size; None when even the full sample is not within."""
    within = conv.relative_half_width <= rel_error
    if len(within) == 0 or not within[-1]:
        return None
    outside = np.flatnonzero(~within)
    first = 0 if len(outside) == 0 else int(outside[-1]) + 1
    return int(conv.sizes[first])

