"""Repetition analysis in the style of CONFIRM (Maricq et al., OSDI'18), done exactly.

Repetitions are the unit of confidence. Every workload reduces a repetition to
rows of ``summaries.parquet`` (one value per metric and group), which
:mod:`cloudbench.report.confirm` loads with each repetition's key metadata; this module

1. refuses to pool repetitions whose metadata differ (unless told to),
2. gives the exact order-statistic CI of any quantile (:mod:`.stats`),
3. runs the convergence analysis: for each size ``n`` from the smallest with a
   CI up to ``N``, many random subsets of size ``n`` drawn without replacement;
   the mean estimate and mean CI per size; the smallest ``n`` whose mean CI lies
   within ±e of the mean estimate *and stays there* for every larger size; and
   when the data never get there, a labelled prediction from the 1/√n law,
4. runs the assumption checks (:mod:`.checks`) in repetition order.

Differences from CONFIRM: exact binomial ranks with coverage >= level (CONFIRM's
``n/2 ∓ 1.96√n/2`` ranks cover as little as 92 % at n = 12), any quantile, "and
stays inside" instead of the first size that fits, a prediction past the data.

Vectorisation: a uniformly random subset of the data has the distribution of a
uniformly random subset of *positions* in the sorted data, so only the
positions of the order statistics a CI needs are drawn, exactly, from their
joint law (beta-binomial gaps, :func:`subset_order_positions`): a few numpy
calls on arrays holding every (size, trial) pair at once, whatever the subset
sizes; the values are then gathered from every series of the same length in
one indexing step.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.checks import (
    MIN_N_INDEPENDENCE,
    MIN_N_MODES,
    MIN_N_STATIONARITY,
    MIN_N_TREND,
    CheckResult,
    run_checks,
    warning_messages,
)
from cloudbench.analysis.stats import (
    QuantileCI,
    SqrtLawFit,
    fit_sqrt_law,
    min_n_for_ci,
    quantile_ci,
    quantile_ci_ranks,
    quantile_name,
)
from cloudbench.errors import AnalysisError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
ProgressFn = Callable[[int, int], None]
"""Called as ``progress(done, total)``; a unit is one convergence size or one
series' assumption checks."""

# A prediction from the 1/√n law is *reliable* only when the data show the law:
# the slope's own interval -- the SLOPE_LEVEL percentile interval of
# the free log-log slope over SLOPE_BOOT moving-block bootstrap resamples of the
# repetitions in their order (blocks of ceil(n^(1/3)), see slope_bootstrap) --
# lies inside SLOPE_BAND (and so does the slope itself), the fit spans at least
# MIN_SPAN in n (two octaves: 24 repetitions for the median at 95 %), AND the
# independence, stationarity, trend and modes checks of the series ran and did
# not warn. A bootstrap cannot see drift or a regime switch in the order of the
# repetitions (the convergence curve draws random subsets, so it never sees the
# order either); the checks do, which is why both are needed.
# The band is not centred on -1/2: at n = 20-100 the exact-rank CI of i.i.d.
# data shrinks a little faster than the law (mean free slope -0.56..-0.62 in
# simulation: the subsets' extreme order statistics are wider than the normal
# approximation), so it reaches further down than up. Coverage of the interval:
# tests/analysis/coverage; the rates: bench/bench_confirm_reliable.py.
LAW_SLOPE = -0.5
SLOPE_BAND = (-0.8, -0.3)
SLOPE_LEVEL = 0.80
MIN_SPAN = 4.0
SLOPE_BOOT = 200
RELIABILITY_CHECKS = ("independence", "stationarity", "trend", "modes")
# The law fitted on small n overshoots: exact ranks are conservative there, so the
# half-widths it extrapolates from are wide. On i.i.d. normal samples of 40 the
# prediction was 1.2-4x (2.5-97.5 %) the n at which the CI really reaches the
# target (tests/analysis/coverage); the range's lower end is divided by this.
LAW_OVERSHOOT = 2.5
SLOPE_BOOT_TRIALS = 100
SLOPE_BOOT_SIZES = 50  # a geometric grid is enough for a slope (N = 1000: 0.03 s, not 2 s)


# --------------------------------------------------------------------------- data


@dataclass(frozen=True, order=True)
class RepetitionRef:
    """One repetition of one run."""

    run_id: str
    repetition: int

    def __str__(self) -> str:
        return f"{self.run_id}#{self.repetition}"


@dataclass(frozen=True)
class RepetitionValue:
    """One value of one (metric, group) for one repetition, with its key metadata."""

    ref: RepetitionRef
    workload: str
    metric: str
    group: str
    value: float
    unit: str
    n_obs: int
    metadata: Mapping[str, str]


@dataclass(frozen=True, order=True)
class SeriesKey:
    workload: str
    metric: str
    group: str


@dataclass(frozen=True)
class Series:
    """The values of one (workload, metric, group), one per repetition, in run order."""

    key: SeriesKey
    unit: str
    refs: tuple[RepetitionRef, ...]
    values: FloatArray
    dropped: tuple[RepetitionRef, ...] = ()
    mismatches: tuple[MetadataMismatch, ...] = ()

    @property
    def n(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class MetadataMismatch:
    """A metadata key whose value differs between repetitions."""

    key: str
    values: dict[str, tuple[RepetitionRef, ...]]

    def describe(self) -> str:
        items = list(self.values.items())
        (v1, refs1), (v2, refs2) = items[0], items[1]
        if self.key in _JSON_KEYS:
            what, root = _JSON_KEYS[self.key]
            text = (f"{what} differ ({_json_difference(v1, v2, root)}): "
                    f"{_describe_refs(refs1)} vs {_describe_refs(refs2)}")
        else:
            text = (f"{self.key} differs: {v1!r} in {_describe_refs(refs1)} vs {v2!r} in "
                    f"{_describe_refs(refs2)}")
        if len(items) > 2:
            text += f" (and {len(items) - 2} more value(s))"
        return text


@dataclass
class Dataset:
    """Per-repetition values of a campaign (or one run), pooled under the guard."""

    path: Path
    campaign: str
    runs: list[str]
    values: list[RepetitionValue]
    metadata: dict[str, str]
    mismatches: dict[SeriesKey, list[MetadataMismatch]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    allow_mixed: bool = False

    def mismatch_descriptions(self) -> list[str]:
        """Every distinct metadata difference pooled under ``allow_mixed``."""
        return list(dict.fromkeys(m.describe() for ms in self.mismatches.values() for m in ms))

    def series(self) -> list[Series]:
        """Values grouped per (workload, metric, group), ordered by run then repetition.

        Non-finite values are dropped (and listed), never silently pooled.
        """
        by_key: dict[SeriesKey, list[RepetitionValue]] = defaultdict(list)
        for v in self.values:
            by_key[SeriesKey(v.workload, v.metric, v.group)].append(v)
        run_pos = {run: i for i, run in enumerate(self.runs)}
        out = []
        for key in sorted(by_key):
            rows = sorted(by_key[key], key=lambda r: (run_pos[r.ref.run_id], r.ref.repetition))
            keep = [r for r in rows if math.isfinite(r.value)]
            dropped = tuple(r.ref for r in rows if not math.isfinite(r.value))
            units = sorted({r.unit for r in keep}) or [""]
            out.append(
                Series(
                    key=key,
                    unit=units[0] if len(units) == 1 else "/".join(units),
                    refs=tuple(r.ref for r in keep),
                    values=np.array([r.value for r in keep], dtype=np.float64),
                    dropped=dropped,
                    mismatches=tuple(self.mismatches.get(key, ())),
                )
            )
        return out


def _compress(indices: Iterable[int]) -> str:
    xs = sorted(set(indices))
    spans: list[str] = []
    start = prev = xs[0]
    for x in [*xs[1:], None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ",".join(spans)


def _describe_refs(refs: Sequence[RepetitionRef]) -> str:
    by_run: dict[str, list[int]] = defaultdict(list)
    for r in refs:
        by_run[r.run_id].append(r.repetition)
    parts = [f"run {run} repetition(s) {_compress(reps)}" for run, reps in by_run.items()]
    if len(parts) > 3:
        parts = [*parts[:3], f"{len(parts) - 3} more run(s)"]
    return "; ".join(parts)


# Pooling keys whose values are JSON documents: (what they are, root of a field's path).
_JSON_KEYS = {
    "workloads": ("workload parameters", "workloads"),
    "vm_type_definitions": ("vm_type definitions", "vm_types"),
    "wan": ("wan settings", "wan"),
    "sweeps": ("swept values", "sweeps"),
}


def _json_difference(a: str, b: str, root: str = "workloads") -> str:
    """First differing field of two JSON documents, as ``path: a vs b``."""
    try:
        ja, jb = json.loads(a), json.loads(b)
    except json.JSONDecodeError:
        return f"{a!r} vs {b!r}"

    def walk(x: Any, y: Any, path: str) -> str | None:
        if isinstance(x, list) and isinstance(y, list):
            named = all(isinstance(i, dict) and "name" in i for i in [*x, *y])
            if named:
                dx = {i["name"]: i for i in x}
                dy = {i["name"]: i for i in y}
                for name in sorted(set(dx) | set(dy)):
                    if name not in dx or name not in dy:
                        here = ("present" if name in dx else "absent",
                                "present" if name in dy else "absent")
                        return f"{path}[{name}]: {here[0]} vs {here[1]}"
                    found = walk(dx[name], dy[name], f"{path}[{name}]")
                    if found:
                        return found
                return None
            if len(x) != len(y):
                return f"{path}: {len(x)} vs {len(y)} entries"
            for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
                found = walk(xi, yi, f"{path}[{i}]")
                if found:
                    return found
            return None
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                if (k in x) != (k in y):
                    return f"{path}.{k}: {'present' if k in x else 'absent'} vs " \
                           f"{'present' if k in y else 'absent'}"
                found = walk(x[k], y[k], f"{path}.{k}")
                if found:
                    return found
            return None
        return None if x == y else f"{path}: {x!r} vs {y!r}"

    return walk(ja, jb, root) or f"{root} differ"


def find_mismatches(metas: Mapping[RepetitionRef, Mapping[str, str]]) -> list[MetadataMismatch]:
    """Key metadata values that differ between repetitions (first seen value first).

    Keys are reported in the order of the metadata mappings (the store's
    ``POOLING_METADATA`` order). A key is compared among the repetitions that
    have it: a repetition without it (a manifest that predates the key) is not
    evidence of a difference; the caller says so in a note.
    """
    out = []
    refs = sorted(metas)
    keys = list(dict.fromkeys(k for ref in refs for k in metas[ref]))
    for key in keys:
        groups: dict[str, list[RepetitionRef]] = {}
        for ref in refs:
            if key in metas[ref]:
                groups.setdefault(metas[ref][key], []).append(ref)
        if len(groups) > 1:
            out.append(MetadataMismatch(key, {v: tuple(r) for v, r in groups.items()}))
    return out


def check_pooling(path: Path, series_refs: Mapping[SeriesKey, Iterable[RepetitionRef]],
                  metas: Mapping[RepetitionRef, Mapping[str, str]],
                  allow_mixed: bool) -> dict[SeriesKey, list[MetadataMismatch]]:
    """Pooling guard: raise AnalysisError naming every differing key, unless allowed.

    pyperf-style checked metadata (STYLE.md §6): the repetitions pooled into one
    series are exchangeable only when every key of the store's
    ``POOLING_METADATA`` matches (names, the vm_type definitions, ``wan:``
    settings, workload parameters with defaults, swept values, worker versions). Each series is checked on the
    repetitions it pools, so a run that adds only other metrics does not block it.
    """
    found: dict[SeriesKey, list[MetadataMismatch]] = {}
    for key, refs in series_refs.items():
        ms = find_mismatches({r: metas[r] for r in refs})
        if ms:
            found[key] = ms
    if found and not allow_mixed:
        texts = list(dict.fromkeys(m.describe() for ms in found.values() for m in ms))
        names = ", ".join(f"{k.metric}/{k.group}" for k in list(found)[:4])
        more = f" and {len(found) - 4} more" if len(found) > 4 else ""
        raise AnalysisError(
            f"{path}: refusing to pool repetitions whose key metadata differ "
            f"(series {names}{more}):\n  " + "\n  ".join(texts) + "\n"
            "Analyse the runs separately (pass one run directory), or pass --allow-mixed "
            "to pool them anyway."
        )
    return found


# -------------------------------------------------------------------- convergence


@dataclass(frozen=True)
class Convergence:
    """Mean estimate and mean CI bounds over random subsets, per subset size."""

    sizes: IntArray
    estimate: FloatArray
    lower: FloatArray
    upper: FloatArray
    trials: int
    every_size: bool

    @property
    def relative_half_width(self) -> FloatArray:
        """``max(est - lo, hi - est) / |est|`` per size (inf where est is 0 and the CI is not)."""
        half = np.maximum(self.estimate - self.lower, self.upper - self.estimate)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = half / np.abs(self.estimate)
        return np.where(half == 0, 0.0, rel)


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
                           ranks: IntArray, trials: int) -> IntArray:
    """0-based positions, in ``range(population)``, of the ``ranks``-th smallest
    members of ``trials`` uniformly random subsets (without replacement) per size.

    ``ranks`` has shape ``(R, S)`` (1-based, ``<= sizes``); the result has shape
    ``(R, S, trials)``, drawn from the exact joint law of those order statistics.

    Method: a size-n subset of ``range(N)`` is a composition of the ``N - n``
    left-out positions into ``n + 1`` gaps (before the first member, between
    members, after the last); a uniform subset is a uniform composition, i.e.
    Dirichlet-multinomial with all weights 1. The r-th member sits at
    ``r - 1 + (sum of the first r gaps)``, and by the aggregation property that
    sum is beta-binomial ``BB(N - n, r, n + 1 - r)``; given it, the remaining gaps
    are again a uniform composition. So ranks are placed in increasing order
    with one beta and one binomial draw each: ``O(R * S * trials)`` work, no
    subset is ever materialised.
    """
    order = np.argsort(ranks, axis=0, kind="stable")
    ranked = np.take_along_axis(ranks, order, axis=0)
    shape = (len(sizes), trials)
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
                trials: int = 200, seed: int = 0, max_sizes: int = 1000,
                progress: Callable[[int], None] | None = None) -> list[Convergence]:
    """Convergence curves of the exact p-quantile CI for series of equal length.

    Method: CONFIRM (Maricq et al., OSDI'18) with exact binomial ranks
    (Le Boudec, Thm. 2.1): for each size ``n`` from :func:`min_n_for_ci` to
    ``N`` (or a grid, see :func:`size_grid`), ``trials`` subsets of size ``n``
    drawn without replacement, independently per size; per size the mean (over
    trials) estimate (Hyndman & Fan 7) and mean CI bounds.

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
    chunk = max(1, _CHUNK_SUBSETS // trials)
    for start in range(0, len(sizes), chunk):
        part = slice(start, start + chunk)
        pos = subset_order_positions(rng, big_n, sizes[part], ranks[:, part], trials)
        mean = x[:, pos].mean(axis=-1)  # (m, 4, sizes in chunk)
        lo[:, part], hi[:, part] = mean[:, 0], mean[:, 1]
        est[:, part] = mean[:, 2] + frac[part] * (mean[:, 3] - mean[:, 2])
        if progress is not None:
            progress(min(start + chunk, len(sizes)))
    every = len(sizes) == max(0, big_n - n_min + 1)
    return [Convergence(sizes, est[s], lo[s], hi[s], trials, every) for s in range(m)]


def smallest_stable_n(conv: Convergence, rel_error: float) -> int | None:
    """Smallest size whose mean CI is within ±e of the mean estimate at it and at
    every larger evaluated size; None when even the full sample is not within."""
    within = conv.relative_half_width <= rel_error
    if len(within) == 0 or not within[-1]:
        return None
    outside = np.flatnonzero(~within)
    first = 0 if len(outside) == 0 else int(outside[-1]) + 1
    return int(conv.sizes[first])


@dataclass(frozen=True)
class Prediction:
    """Repetitions needed by the 1/√n law when the data never reach the target.

    ``n_low``–``n_high``: the 2.5–97.5 % range of the prediction over the
    bootstrap data sets that gave ``slope_sd`` (0 when not computed);
    ``slope_low``–``slope_high``: the slope's :data:`SLOPE_LEVEL` interval (nan when
    not computed)."""

    n: int
    more: int
    fit: SqrtLawFit
    reliable: bool
    note: str
    slope_sd: float = math.nan
    reason: str = ""
    n_low: int = 0
    n_high: int = 0
    slope_low: float = math.nan
    slope_high: float = math.nan


@dataclass(frozen=True)
class SlopeBootstrap:
    """The free slope and the law's constant ``a`` over bootstrap resamples of a series."""

    slopes: FloatArray
    a: FloatArray

    @property
    def slope_sd(self) -> float:
        s = self.slopes[np.isfinite(self.slopes)]
        return float(np.std(s, ddof=1)) if len(s) >= 3 else math.nan

    def slope_interval(self, level: float = SLOPE_LEVEL) -> tuple[float, float]:
        """Percentile interval of the slope at ``level`` (nan, nan with fewer than 10 finite
        slopes or when a tenth of the resamples had none: a slope that often undefined has
        no interval)."""
        s = self.slopes[np.isfinite(self.slopes)]
        if len(s) < 10 or len(s) < 0.9 * len(self.slopes):
            return math.nan, math.nan
        lo, hi = np.percentile(s, [50 * (1 - level), 50 * (1 + level)])
        return float(lo), float(hi)

    def n_range(self, rel_error: float) -> tuple[int, int]:
        """2.5–97.5 % of the bootstrap predictions, the lower end divided by
        ``LAW_OVERSHOOT`` (the model's error: see there)."""
        a = self.a[np.isfinite(self.a)]
        if len(a) < 3:
            return 0, 0
        lo, hi = np.percentile((a / rel_error) ** 2, [2.5, 97.5])
        return math.floor(float(lo) / LAW_OVERSHOOT), math.ceil(float(hi))


def block_length(n: int) -> int:
    """Block length of the moving-block bootstrap: ``ceil(n^(1/3))`` (the usual rate
    for variances, Hall, Horowitz & Jing 1995), at least 1."""
    return max(1, math.ceil(math.pow(n, 1 / 3) - 1e-9))


def moving_block_resamples(rng: np.random.Generator, n: int, n_boot: int,
                           length: int) -> IntArray:
    """``(n_boot, n)`` indices of moving-block bootstrap resamples (Künsch 1989).

    Each resample joins ``ceil(n / length)`` blocks of ``length`` consecutive
    repetitions, their starts uniform over the ``n - length + 1`` possible ones,
    cut to ``n``: neighbouring repetitions stay neighbours inside a block, so the
    resamples keep short-range dependence that an i.i.d. bootstrap would erase.
    """
    length = min(max(1, length), n)
    blocks = math.ceil(n / length)
    starts = rng.integers(0, n - length + 1, (n_boot, blocks))
    idx: IntArray = (starts[:, :, None] + np.arange(length)).reshape(n_boot, -1)[:, :n]
    return idx


def slope_bootstrap(values: FloatArray, p: float, level: float, *, n_boot: int = SLOPE_BOOT,
                    trials: int = SLOPE_BOOT_TRIALS, seed: int = 0,
                    max_sizes: int = 1000) -> SlopeBootstrap:
    """Moving-block bootstrap of the 1/√n fit over the repetitions in their order.

    Method: ``n_boot`` resamples of the same size (:func:`moving_block_resamples`,
    blocks of :func:`block_length`), each run through :func:`convergence`
    (sharing its random subsets, so one vectorised call) and
    :func:`fit_sqrt_law`. ``values`` must be in repetition order. The slope's
    interval is :meth:`SlopeBootstrap.slope_interval`; its coverage of the slope
    that independent samples give is checked in tests/analysis/coverage."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) < min_n_for_ci(p, level) or n_boot < 3:
        return SlopeBootstrap(np.full(0, math.nan), np.full(0, math.nan))
    rng = np.random.default_rng([seed, len(x), 23])
    sets = np.sort(x[moving_block_resamples(rng, len(x), n_boot, block_length(len(x)))], axis=1)
    curves = convergence(sets, p, level, trials=trials, seed=seed, max_sizes=max_sizes)
    fits = [fit_sqrt_law(c.sizes, c.relative_half_width) for c in curves]
    return SlopeBootstrap(np.array([f.slope if f else math.nan for f in fits]),
                          np.array([f.a if f else math.nan for f in fits]))


def min_n_for_reliable(p: float, level: float) -> int:
    """The fewest repetitions with which a prediction can be labelled reliable at all:
    a convergence curve spanning :data:`MIN_SPAN` in n from the smallest n with a CI,
    and enough values for every check of :data:`RELIABILITY_CHECKS` (24 for the
    median at 95 %, 116 for p90)."""
    span = math.ceil(MIN_SPAN * min_n_for_ci(p, level) - 1e-9)
    return max(span, MIN_N_INDEPENDENCE, MIN_N_STATIONARITY, MIN_N_TREND, MIN_N_MODES)


def law_reliability(fit: SqrtLawFit, boot: SlopeBootstrap | None,
                    checks: Sequence[CheckResult] = ()) -> tuple[bool, str]:
    """Whether a 1/√n prediction may be called reliable, and if not why.

    Reliable: the fit spans at least :data:`MIN_SPAN` in n, the slope and its
    :data:`SLOPE_LEVEL` block-bootstrap interval lie inside :data:`SLOPE_BAND`,
    and every check of :data:`RELIABILITY_CHECKS` ran on the series and did not warn.
    """
    reasons: list[str] = []
    if not fit.span >= MIN_SPAN:
        reasons.append(f"the fit spans only n={fit.slope_n_lo}..{fit.slope_n_hi} "
                       f"(less than {MIN_SPAN:g}× in n)")
    lo, hi = boot.slope_interval() if boot is not None else (math.nan, math.nan)
    band = f"[{SLOPE_BAND[0]:g}, {SLOPE_BAND[1]:g}]"
    if not math.isfinite(fit.slope):
        reasons.append("the CI half-width has no log-log slope")
    elif not (math.isfinite(lo) and math.isfinite(hi)):
        reasons.append(f"the slope n^{fit.slope:.2f} has no interval (too few repetitions)")
    elif not (SLOPE_BAND[0] <= lo <= hi <= SLOPE_BAND[1]
              and SLOPE_BAND[0] <= fit.slope <= SLOPE_BAND[1]):
        reasons.append(
            f"the CI half-width scales as n^{fit.slope:.2f}, {SLOPE_LEVEL:.0%} interval "
            f"{lo:.2f}..{hi:.2f}, not inside {band} around n^-0.5 (too few repetitions to "
            "show the law, a tail-quantile CI still ending at the sample max or min, a gap "
            "between modes, or dependent data)")
    by_name = {c.name: c for c in checks}
    warned = [n for n in RELIABILITY_CHECKS if n in by_name and by_name[n].warned]
    unchecked = [n for n in RELIABILITY_CHECKS if n not in by_name or by_name[n].status == "skipped"]
    if warned:
        reasons.append(f"the {', '.join(warned)} check(s) warn (see the warnings)")
    if unchecked:
        reasons.append(f"the {', '.join(unchecked)} check(s) did not run (too few "
                       "repetitions for them)")
    return not reasons, "; ".join(reasons)


@dataclass(frozen=True)
class Target:
    """Outcome for one error bound ``e``."""

    error: float
    n_needed: int | None
    prediction: Prediction | None
    note: str

    @property
    def reached(self) -> bool:
        return self.n_needed is not None


def evaluate_target(conv: Convergence | None, n: int, rel_error: float, p: float,
                    level: float, boot: SlopeBootstrap | None = None,
                    checks: Sequence[CheckResult] = ()) -> Target:
    """n needed for ``rel_error``, or a labelled 1/√n-law prediction."""
    if conv is None or len(conv.sizes) == 0:
        need = min_n_for_ci(p, level)
        return Target(rel_error, None, None,
                      f"no CI below n={need}; run at least {need - n} more repetition(s) first")
    found = smallest_stable_n(conv, rel_error)
    if found is not None:
        return Target(rel_error, found, None,
                      f"within ±{rel_error * 100:.3g}% from n={found} on, and at every "
                      "larger size")
    fit = fit_sqrt_law(conv.sizes, conv.relative_half_width)
    if fit is None:
        return Target(rel_error, None, None,
                      "not reached, and too few sizes with a finite relative CI to predict")
    need = fit.required_n(rel_error)
    slope_sd = boot.slope_sd if boot is not None else math.nan
    n_low, n_high = boot.n_range(rel_error) if boot is not None else (0, 0)
    slope_lo, slope_hi = boot.slope_interval() if boot is not None else (math.nan, math.nan)
    reliable, reason = law_reliability(fit, boot, checks)
    span = f", 95 % range {n_low}..{n_high}" if n_high > 0 else ""
    if reliable:
        note = (f"PREDICTED from the 1/√n law (fit on n={fit.n_lo}..{fit.n_hi}, slope "
                f"{fit.slope:.2f}, {SLOPE_LEVEL:.0%} interval {slope_lo:.2f}..{slope_hi:.2f} "
                f"inside [{SLOPE_BAND[0]:g}, {SLOPE_BAND[1]:g}]; checks pass): about {need} "
                f"repetitions{span}, {max(0, need - n)} more than the {n} measured")
    else:
        note = (f"ROUGH GUESS from the 1/√n law: about {need} repetitions, "
                f"{max(0, need - n)} more than the {n} measured; not reliable: {reason}")
    pred = Prediction(need, max(0, need - n), fit, reliable, note, slope_sd, reason, n_low, n_high,
                      slope_lo, slope_hi)
    return Target(rel_error, None, pred, note)


# ----------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class ConfirmParams:
    """What to estimate (a quantile at a level), the error bounds, and how many random subsets."""

    quantile: float = 0.5
    level: float = 0.95
    errors: tuple[float, ...] = (0.01, 0.05)
    trials: int = 200
    seed: int = 0
    max_sizes: int = 1000
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if not 0 < self.quantile < 1:
            raise AnalysisError(f"quantile must be in (0, 1), got {self.quantile}")
        if not 0 < self.level < 1:
            raise AnalysisError(f"confidence level must be in (0, 1), got {self.level}")
        if not self.errors or any(not 0 < e < 1 for e in self.errors):
            raise AnalysisError(f"error bounds must be in (0, 1), got {list(self.errors)}")
        if self.trials < 1:
            raise AnalysisError(f"trials must be >= 1, got {self.trials}")
        if self.seed < 0:
            raise AnalysisError(f"seed must be >= 0, got {self.seed}")
        if self.max_sizes < 2:
            raise AnalysisError(f"max_sizes must be >= 2, got {self.max_sizes}")


@dataclass(frozen=True)
class SeriesResult:
    series: Series
    ci: QuantileCI
    convergence: Convergence | None
    targets: tuple[Target, ...]
    checks: tuple[CheckResult, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class ConfirmResult:
    """The analysis of a campaign: its dataset, the parameters, one result per series."""

    dataset: Dataset
    params: ConfirmParams
    series: tuple[SeriesResult, ...]

    @property
    def quantile_name(self) -> str:
        return quantile_name(self.params.quantile)


def analyse_series(series: Sequence[Series], params: ConfirmParams, *,
                   progress: ProgressFn | None = None) -> list[SeriesResult]:
    """CI, convergence, targets and checks for each series (see module docstring)."""
    p, level = params.quantile, params.level
    n_min = min_n_for_ci(p, level)
    by_len: dict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(series):
        if s.n >= n_min:
            by_len[s.n].append(i)
    # Progress units: one per convergence size, one per series' checks.
    total = sum(len(size_grid(n_min, n, params.max_sizes)) for n in by_len) + len(series)
    done = 0
    convs: dict[int, Convergence] = {}
    for _, members in sorted(by_len.items()):
        stacked = np.sort(np.stack([series[i].values for i in members]), axis=1)

        def tick(k: int, base: int = done) -> None:
            if progress is not None:
                progress(base + k, total)

        curves = convergence(stacked, p, level, trials=params.trials, seed=params.seed,
                             max_sizes=params.max_sizes, progress=tick)
        done += len(curves[0].sizes)
        convs.update(zip(members, curves, strict=True))

    out = []
    for i, s in enumerate(series):
        ci = quantile_ci(s.values, p, level)
        conv = convs.get(i)
        boot = None
        if conv is not None and any(smallest_stable_n(conv, e) is None for e in params.errors):
            boot = slope_bootstrap(s.values, p, level, seed=params.seed,
                                   trials=min(params.trials, SLOPE_BOOT_TRIALS),
                                   max_sizes=min(params.max_sizes, SLOPE_BOOT_SIZES))
        checks = tuple(run_checks(s.values, params.alpha))
        targets = tuple(evaluate_target(conv, s.n, e, p, level, boot, checks)
                        for e in params.errors)
        done += 1
        if progress is not None:
            progress(done, total)
        warns = [f"pooled despite differing metadata: {m.describe()}" for m in s.mismatches]
        if not ci.exists:
            warns.append(ci.note)
        if s.dropped:
            warns.append(f"{len(s.dropped)} non-finite value(s) dropped "
                         f"({', '.join(map(str, s.dropped[:5]))})")
        warns += warning_messages(list(checks))
        warns += [t.note for t in targets if t.prediction is not None and not t.prediction.reliable]
        if ci.exists and ci.estimate == 0:
            warns.append("the estimate is 0: a relative error bound is undefined")
        out.append(SeriesResult(s, ci, conv, targets, checks, tuple(warns)))
    return out


def analyse(dataset: Dataset, params: ConfirmParams,
            progress: ProgressFn | None = None) -> ConfirmResult:
    """The whole repetition analysis of a loaded campaign."""
    results = analyse_series(dataset.series(), params, progress=progress)
    return ConfirmResult(dataset, params, tuple(results))


