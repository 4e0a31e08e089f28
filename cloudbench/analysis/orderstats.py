"""Exact quantiles of data too large to hold, in two passes over it (bounded memory).

Method: multi-pass selection through a histogram (Munro & Paterson 1980, "Selection
and sorting with limited storage"; the "histogram refinement" of exact out-of-core
quantiles). Pass 1 counts the values of every key (a latency group, a pair…) in
fine logarithmic bins of the value; that fixes, for each wanted order statistic,
the bin that holds it and its rank inside the bin. Pass 2 keeps only the values
that fall in those bins, and sorting them gives the order statistics exactly.
Memory is the histograms (keys × bins) plus the values of the chosen bins — never
the data. Values are non-negative integers (nanoseconds); percentiles interpolate
between order statistics like numpy's default (Hyndman & Fan type 7), so the
result equals ``np.percentile(values, ps)`` on the same integers.

Everything here is pure: arrays in, numbers out. The scans are the caller's.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cloudbench.core import ckernels

SUB_BITS = 9
"""Bins per octave of the value: 2**SUB_BITS, linear inside the octave (relative width ≤ 0.2 %),
so a chosen bin holds few values."""
MAX_OCTAVE = 35
"""Values from 2**35 (34 s in ns) on share the last bin."""
NBINS = MAX_OCTAVE * (1 << SUB_BITS) + 2
_SHIFT = 52 - SUB_BITS  # float64 mantissa bits below the bin's
_ONE = 1023 << SUB_BITS  # (bits of 1.0) >> _SHIFT


def value_bins(values: np.ndarray) -> np.ndarray:
    """The bin of each value (int64), monotone in v: 0 for values < 1; for v ≥ 1 the octave
    ⌊log2 v⌋ and the next SUB_BITS bits of v's float64 mantissa, plus 1 (exact for values below
    2**53: no logarithm, two integer operations on the float's bits)."""
    b = values.astype(np.float64).view(np.int64)
    b >>= _SHIFT
    b -= _ONE - 1
    out: np.ndarray = np.clip(b, 0, NBINS - 1, out=b)
    return out


_C_SOURCE = Path(__file__).resolve().with_name("orderstats_bins.c")
_P, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
_SIGNATURES: dict[str, ckernels.Signature] = {
    **{f"cb_hist_{t}": (None, (_P, _I64, _INT, _I64, _I64, _P)) for t in ("u32", "u64")},
    **{f"cb_select_{t}": (_I64, (_P, _I64, _P, _INT, _I64, _I64, _P, _P, _I64)) for t in ("u32", "u64")},
}


def _compiled() -> ckernels.Functions | None:
    """The bins' kernels (``orderstats_bins.c``: one pass, the GIL released) by C name, from
    :func:`cloudbench.core.ckernels.load`; None without a compiler (then numpy runs)."""
    return ckernels.load(_C_SOURCE, _SIGNATURES)


_KERNEL_TYPES = {np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64"}


def histogram(values: np.ndarray) -> np.ndarray:
    """``np.bincount(value_bins(values), minlength=NBINS)``: for unsigned 4- and 8-byte values in
    one compiled pass (four numpy passes and a bincount, which holds the GIL, otherwise)."""
    t = _KERNEL_TYPES.get(values.dtype)
    fns = _compiled() if t is not None and values.flags.c_contiguous else None
    if fns is None:
        return np.bincount(value_bins(values), minlength=NBINS)
    hist = np.zeros(NBINS, dtype=np.int64)
    fns[f"cb_hist_{t}"](values.ctypes.data, len(values), _SHIFT, _ONE - 1, NBINS, hist.ctypes.data)
    return hist


def needed_values(cells: np.ndarray, need: np.ndarray, room: int) -> tuple[np.ndarray, np.ndarray]:
    """(bins, values as int64) of the values in bins that ``need`` (NBINS booleans) marks, in
    order, from cells that store a value v as v + 2 (0 and 1: no value); ``room``: at most how
    many there are (e.g. from the histogram), for the compiled pass."""
    t = _KERNEL_TYPES.get(cells.dtype)
    fns = _compiled() if t is not None and cells.flags.c_contiguous else None
    if fns is not None:
        bins, vals = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
        need8 = np.ascontiguousarray(need, dtype=np.uint8)
        k = int(fns[f"cb_select_{t}"](cells.ctypes.data, len(cells), need8.ctypes.data, _SHIFT, _ONE - 1, NBINS,
                                   bins.ctypes.data, vals.ctypes.data, room))
        if k <= room:
            return bins[:k], vals[:k]
    two = cells.dtype.type(2)
    v = cells[cells >= two]
    v -= two
    b = value_bins(v)
    keep = need.take(b)
    return b[keep], v[keep].astype(np.int64)


def bin_edges(divisor: float = 1.0) -> np.ndarray:
    """The NBINS + 1 edges of :func:`value_bins` (bin b holds values in [edge b, edge b+1)), over ``divisor``."""
    b = np.arange(NBINS + 1, dtype=np.int64)
    edges = ((b - 1 + _ONE) << _SHIFT).view(np.float64)
    edges[0] = 0.0
    out: np.ndarray = edges / divisor
    return out


@dataclass
class Targets:
    """Pass 1's result for a set of keys: which bins pass 2 must keep, and the ranks wanted.

    ``need[key, bin]`` marks the bins; ``ranks[key]`` lists (order statistic, bin,
    rank inside the bin) for every order statistic the percentiles of that key use.
    """

    need: np.ndarray
    wanted: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)


def plan_selection(hist: np.ndarray, ps: Sequence[float], with_max: bool = True,
                   extra: Mapping[int, Sequence[float]] | None = None) -> Targets:
    """From per-key histograms ``hist[key, bin]`` (counts), the bins and ranks of percentiles ``ps``.

    Order statistics i = ⌊h⌋ and ⌈h⌉ with h = (n-1)·p/100 (type 7); the largest
    value too when ``with_max``; ``extra[key]``: more percentiles for that key.
    """
    extra = extra or {}
    need = np.zeros(hist.shape, dtype=bool)
    wanted: dict[int, list[tuple[int, int, int]]] = {}
    cum = np.cumsum(hist, axis=1)
    for key in range(hist.shape[0]):
        n = int(cum[key, -1]) if hist.shape[1] else 0
        if n == 0:
            continue
        stats: set[int] = set()
        for p in (*ps, *extra.get(key, ())):
            h = (n - 1) * (p / 100.0)
            stats.update((int(np.floor(h)), int(np.ceil(h))))
        if with_max:
            stats.add(n - 1)
        wanted[key] = _ranks(cum[key], stats)
        need[key, [b for _, b, _ in wanted[key]]] = True
    return Targets(need, wanted)


def _ranks(cum: np.ndarray, stats: Iterable[int]) -> list[tuple[int, int, int]]:
    """(order statistic, bin, rank inside the bin) of each statistic, from one key's cumulative
    bin counts."""
    idx = sorted(stats)
    at = np.searchsorted(cum, idx, side="right")
    return [(i, int(b), i - (int(cum[b - 1]) if b else 0)) for i, b in zip(idx, at.tolist(), strict=True)]


def select(targets: Targets, keys: np.ndarray, bins: np.ndarray, values: np.ndarray) -> dict[int, dict[int, Any]]:
    """Pass 2's answer: for each key, order statistic index -> value (a Python int or float).

    ``keys``, ``bins``, ``values``: every value pass 2 kept (those in a needed bin of
    its key), in any order. The values are grouped by key (a radix sort of the small
    key numbers) and each key's wanted ranks are selected by partition: the bins
    being monotone in the value, a statistic in bin b is the value at (the key's kept
    values in lower bins + its rank in b) of the key's kept values in order.
    """
    out: dict[int, dict[int, Any]] = {}
    if not targets.wanted:
        return out
    small = bool(len(keys)) and int(keys.min()) >= 0 and int(keys.max()) < 1 << 16
    order = np.argsort(keys.astype(np.uint16) if small else keys, kind="stable")
    sorted_keys = keys[order]
    for key, rows in targets.wanted.items():
        lo = int(np.searchsorted(sorted_keys, key, side="left"))
        hi = int(np.searchsorted(sorted_keys, key, side="right"))
        mine = order[lo:hi]
        out[key] = _select_ranks(rows, bins[mine], values[mine])
    return out


def _select_ranks(rows: list[tuple[int, int, int]], bins: np.ndarray, kept: np.ndarray) -> dict[int, Any]:
    """One key's statistics (rows of :func:`_ranks`) from its kept values and their bins, in any
    order; ``kept`` is partitioned in place."""
    below = np.concatenate([[0], np.cumsum(np.bincount(bins, minlength=max(b for _, b, _ in rows) + 1))])
    pos = [int(below[b]) + r for _, b, r in rows]
    kept.partition(sorted(set(pos)))
    return {i: kept[p].item() for (i, _, _), p in zip(rows, pos, strict=True)}


def percentiles_from(stats: dict[int, int], n: int, ps: Sequence[float], divisor: float = 1.0) -> list[float]:
    """Type-7 percentiles from the order statistics ``stats`` (index -> value) of ``n`` values, over ``divisor``.

    Interpolates in the divided values, as numpy does on the divided array.
    """
    out = []
    for p in ps:
        h = (n - 1) * (p / 100.0)
        lo, hi = int(np.floor(h)), int(np.ceil(h))
        a, b = stats[lo] / divisor, stats[hi] / divisor
        out.append(float(a + (b - a) * (h - lo)))
    return out


HISTOGRAM_FROM = 1 << 16
"""From this many values :func:`order_statistics` selects through the histogram."""


def order_statistics(values: np.ndarray, indices: Sequence[int]) -> dict[int, Any]:
    """The values at positions ``indices`` of ``values`` sorted (no NaN), as a full sort gives them.

    Large arrays are selected as the echo scan's two passes select one key:
    :func:`value_bins`' histogram names the bin of each wanted position and only
    the values in those bins are partitioned (:func:`_select_ranks`); small arrays
    are partitioned whole.
    """
    idx = sorted(set(indices))
    n = len(values)
    if idx and not 0 <= idx[0] <= idx[-1] < n:
        raise ValueError(f"positions must lie in 0..{n - 1}")
    if not idx:
        return {}
    if n < HISTOGRAM_FROM:
        part = np.partition(values, idx)
        return {i: part[i].item() for i in idx}
    bins = value_bins(values)
    rows = _ranks(np.cumsum(np.bincount(bins, minlength=NBINS)), idx)
    need = np.zeros(NBINS, dtype=bool)
    need[[b for _, b, _ in rows]] = True
    keep = need[bins]
    return _select_ranks(rows, bins[keep], values[keep])


NETWORK_ROWS = 16
"""Up to this many rows :func:`column_order_stats` sorts by a compare-exchange network."""


def column_order_stats(rows: np.ndarray | Sequence[np.ndarray], ks: Sequence[int],
                       offset: int = 0) -> dict[int, np.ndarray]:
    """The k-th smallest value (k from 1) of every column of ``rows`` (m × n, no NaN; or m
    rows of n) for each k, of the values minus ``offset`` (in their type: unsigned ones wrap).

    For a few rows (quorum members: m ≤ :data:`NETWORK_ROWS`) an odd-even transposition
    network sorts the columns with m·⌊m/2⌋ vectorised min/max pairs, which numpy runs
    at memory speed; ``np.partition`` along the short axis spends a call on every
    column. The values are the same. The rows are left as they are: the network works on
    one copy of each row (with the offset taken off as it is made), so a caller passes
    views (the scan passes a quorum's rows of a sender's matrix, not a gathered copy).
    """
    m = len(rows)
    if not 1 <= min(ks, default=1) <= max(ks, default=1) <= m:
        raise ValueError(f"k must lie in 1..{m}")
    off = rows[0].dtype.type(offset)
    if m > NETWORK_ROWS:
        whole = rows if isinstance(rows, np.ndarray) else np.stack(rows)
        part = np.partition(np.subtract(whole, off), sorted({k - 1 for k in ks}), axis=0)
        return {k: part[k - 1] for k in ks}
    r = [np.subtract(rows[i], off) for i in range(m)]
    spare = np.empty_like(r[0]) if m > 1 else r[0]
    for p in range(m):
        for i in range(p % 2, m - 1, 2):
            np.minimum(r[i], r[i + 1], out=spare)
            np.maximum(r[i], r[i + 1], out=r[i + 1])
            r[i], spare = spare, r[i]
    return {k: r[k - 1] for k in ks}


def window_medians(values: np.ndarray, valid: np.ndarray, window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median of the valid ``values`` in each window (``window``: each value's window id).

    Returns (window ids that hold a valid value, their medians); see :func:`window_stats`.
    """
    ids, _, _, med = window_stats(values[valid], window[valid])
    return ids, med


def window_stats(values: np.ndarray, window: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per window id present in ``window`` (each value's window, usually non-decreasing):
    (ids, counts, sums, medians), ids ascending.

    Sums keep the values' kind (exact for integers). Linear time when the ids are
    non-decreasing (else one stable sort first): the windows are laid out as rows of
    a matrix and partitioned, rows of equal length together.
    """
    w, v = window, values
    if not len(v):
        return (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.zeros(0, dtype=v.dtype),
                np.empty(0))
    if (w[1:] < w[:-1]).any():
        order = np.argsort(w, kind="stable")
        w, v = w[order], v[order]
    lo_id, hi_id = int(w[0]), int(w[-1])
    if (hi_id - lo_id) * 16 < len(w):  # few ids (windows of many values): find each by binary search
        ids = np.arange(lo_id, hi_id + 1, dtype=w.dtype)
        starts, ends = np.searchsorted(w, ids, side="left"), np.searchsorted(w, ids, side="right")
        present = ends > starts
        starts = starts[present]
        lengths = ends[present] - starts
    else:
        starts = np.concatenate([[0], np.flatnonzero(np.diff(w)) + 1])
        lengths = np.diff(np.append(starts, len(v)))
    sums = np.add.reduceat(v, starts, dtype=np.int64 if v.dtype.kind in "iu" else np.float64)
    med = np.empty(len(starts))
    for n in np.unique(lengths):
        rows = np.flatnonzero(lengths == n)
        block = v[starts[rows, None] + np.arange(n)[None, :]]
        hi = n // 2
        block.partition(hi, axis=1)  # in place: the gathered block is a copy already
        upper = block[:, hi]
        # n even: the lower middle is the largest value left of the upper one (no second selection)
        lower = block[:, :hi].max(axis=1) if n % 2 == 0 else upper
        med[rows] = (lower.astype(np.float64) + upper) / 2.0
    return w[starts].astype(np.int64), lengths.astype(np.int64), sums, med
