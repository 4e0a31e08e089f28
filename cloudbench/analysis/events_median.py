"""The per-pair level's running median, compiled: by counting for RTTs on a grid, by sorted
blocks for any other series.

:func:`cloudbench.analysis.events.detect_pair_events` takes the level of a pair's raw RTTs
as the running median of ``2·max_spike + 1`` echoes (6,001 at 100 rounds/s and a 30 s
window) over the whole series, its ends mirrored, and the residuals from it.

RTTs on a grid (the echo scan hands in whole µs as ms) are counted: each value's key is
``rint(y·scale)`` (checked: ``key / scale == y``, so keys order the values as the values do
and give them back), the window's values are counted per key, with a bit a key that holds
any (and flags over lines and groups of those words), and a cursor on the median's key moves to the next key
with a value by a bit scan as one value leaves and one arrives (``cb_level``, which also
writes the residuals and their absolute values in the same pass). 24-25 ms of CPU for a
6-hour pair (2.16 M echoes; the residuals included; 29-30 before the cursor's move was
decided by masks instead of branches) against 75-85 ms for the sorted blocks and the two
passes of numpy after them. A median among values far above the series'
smallest (2^20 keys: 1 s at µs) ends the count and the sorted blocks run instead.

Any other series: it is cut into blocks of
the window's width, each block is sorted once (numpy's ``argsort``), and the window slides
over two neighbouring blocks as two sorted doubly linked lists (Suomela, "Median filtering
is equivalent to sorting", 2014): the value leaving is unlinked from the first block's
list, the value arriving relinked into the second's (dancing links: the second list is
emptied in reverse order first, so every relink finds its neighbours in place), and two
cursors, one per list, keep the window's ``w // 2`` smallest values before them; each step
moves them by O(1) on average, inside two blocks' memory. bottleneck's ``move_median`` (a
double heap) took 140–150 ms for the same pair, the sorted blocks 70–75 ms (argsort 25, the
walk 45–50).

The kernels are C (``events_median.c``), built with the machine's ``cc``/``gcc`` on first use,
cached by the hash of their source and flags in the user's cache directory and called through
ctypes, which releases the GIL (the report's sender threads run their pairs at once). A numba
version of the walk was measured too: its import and cached dispatch cost 1.0 s per
process, a quarter of what it saved on a 56-pair run. Without a compiler (or when the
build fails) bottleneck's ``move_median`` runs instead. The median of an odd window is one
of its values, so every path gives the same numbers (the tests compare them with each
other and with scipy's ``median_filter``).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bottleneck as bn
import numpy as np

from cloudbench.analysis.levelshift import pelt as plain_pelt
from cloudbench.core import ckernels

C_SOURCE = Path(__file__).resolve().with_suffix(".c")
_P, _I64 = ctypes.c_void_p, ctypes.c_int64
SIGNATURES: dict[str, ckernels.Signature] = {
    "cb_slide": (ctypes.c_int, (_P, _P, _I64, _I64, _P)),
    "cb_level": (ctypes.c_int, (_P, _I64, _I64, ctypes.c_double, _P, _P, _P, _P)),
    "cb_windows": (_I64, (_P, _I64, ctypes.c_double, _P, _P)),
    "cb_quiet": (_I64, (_P, _I64, ctypes.c_double, _P, _P)),
    "cb_pelt": (None, (_P, _P, _I64, ctypes.c_double, _I64, _P, _P, _P, _P)),
    "cb_ordered": (ctypes.c_int, (_P, _P, _I64)),
    "cb_select": (ctypes.c_int, (_P, _I64, _I64, ctypes.c_int, _P, _P, _P)),
    "cb_window_medians": (None, (_P, _P, _I64, _P, _P)),
}
"""The kernels' ctypes signatures (``events_median.c``), by C name."""


@dataclass(frozen=True)
class Kernels:
    """The compiled functions (``events_median.c``)."""

    slide: Callable[..., int]  # cb_slide: the sorted-blocks walk
    level: Callable[..., int]  # cb_level: the level by counting, for RTTs on a grid
    windows: Callable[..., int]  # cb_windows: the step search's windows
    quiet: Callable[..., int]  # cb_quiet: the jitter's quiet residuals
    pelt: Callable[..., None]  # cb_pelt: PELT's recursion on the window medians
    ordered: Callable[..., int]  # cb_ordered: a pair's echoes finite and in send order
    select: Callable[..., int]  # cb_select: an order statistic (and the next) by radix select
    window_medians: Callable[..., None]  # cb_window_medians: the step search's window medians


def kernel() -> Kernels | None:
    """The compiled kernels from :func:`cloudbench.core.ckernels.load` (built and loaded once a
    process, :data:`SIGNATURES` applied); None without a compiler or when the build fails."""
    fns = ckernels.load(C_SOURCE, SIGNATURES)
    if fns is None:
        return None
    return Kernels(fns["cb_slide"], fns["cb_level"], fns["cb_windows"], fns["cb_quiet"], fns["cb_pelt"],
                   fns["cb_ordered"], fns["cb_select"], fns["cb_window_medians"])


def sliding_median(x: np.ndarray, width: int) -> np.ndarray:
    """``out[j]`` = the median of ``x[j:j + width]`` for every ``j`` with a full window
    (``x`` finite float64, ``width`` odd, ``1 ≤ width ≤ len(x)``)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n, k = len(x), int(width)
    if k % 2 == 0 or not 1 <= k <= n:
        raise ValueError(f"the width must be odd and at most the series' length ({k}, {n})")
    lib = kernel()
    if lib is None:
        return np.asarray(bn.move_median(x, k)[k - 1:])
    blocks = -(-n // k) + 1  # a padding block at the end: every block has a successor
    padded = np.full(blocks * k, np.inf)
    padded[:n] = x
    order = np.ascontiguousarray(np.argsort(padded.reshape(blocks, k), axis=1), dtype=np.int64)
    out = np.empty(n - k + 1)
    if lib.slide(padded.ctypes.data, order.ctypes.data, n, k, out.ctypes.data) != 0:
        raise MemoryError("the running median's lists")
    return out


# the grids cb_level tries, as 1 / the step: whole units, thousandths (µs in ms), millionths
GRIDS = (1.0, 1e3, 1e6)


def level_and_residuals(y: np.ndarray, width: int,
                        scratch: bool = False) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """``(level, y − level, |y − level|)`` with ``level`` = :func:`running_median` of a finite ``y``.

    RTTs on a grid (whole µs in ms, as the echo scan hands them in; whole units; millionths)
    are counted per value by the kernel ``cb_level``, which writes all three in one pass;
    any other series takes the sorted-blocks walk (or bottleneck's). The median of an odd
    window is one of its values, so the paths give the same numbers. ``scratch``: the
    residuals are the thread's :func:`scratch_array` arrays (valid until its next call), and
    the counted level is not written (None; :func:`level_between` gives its ranges)."""
    y = np.ascontiguousarray(y, dtype=np.float64)
    n = len(y)
    half = max(0, min(width // 2, (n - 1) // 2))
    lib = kernel() if half else None
    if lib is not None:
        level = None if scratch else np.empty(n)
        resid, absr = (scratch_array("resid", n), scratch_array("absr", n)) if scratch else (np.empty(n), np.empty(n))
        key = scratch_array("keys", n, np.int32)  # the kernel's own, never returned
        for scale in GRIDS:
            rc = lib.level(y.ctypes.data, n, half, scale, None if level is None else level.ctypes.data,
                           resid.ctypes.data, absr.ctypes.data, key.ctypes.data)
            if rc == 0:
                return level, resid, absr
            if rc < 0:
                raise MemoryError("the running median's counts")
            if rc != 1:
                break  # the grid fits, its range does not: no finer grid will
    level = running_median(y, width)
    resid = y - level
    return level, resid, np.abs(resid)


def level_between(y: np.ndarray, width: int, a: int, b: int) -> np.ndarray:
    """``running_median(y, width)[a:b]`` (``0 ≤ a ≤ b ≤ len(y)``), from the values its windows
    see alone (the mirrored indices ``a − half … b − 1 + half``): a spike's level, where the
    whole series' was never written. :func:`running_median` is this over ``[0, len(y))``."""
    y = np.asarray(y, dtype=np.float64)
    n = len(y)
    half = max(0, min(width // 2, (n - 1) // 2))
    if half == 0 or b <= a:
        return y[a:b].copy()
    lo, hi = a - half, b + half  # the windows' indices; -j stands for j, n - 1 + j for n - 1 - j
    # half <= (n - 1) // 2: one reflection at either end, and 2n - 2 - hi >= 0 (a slice's stop, not from the end)
    mirrored = np.concatenate([y[-lo:0:-1] if lo < 0 else y[:0], y[max(lo, 0):min(hi, n)],
                               y[n - 2:2 * n - 2 - hi:-1] if hi > n else y[:0]])
    return sliding_median(mirrored, 2 * half + 1)


_scratch = threading.local()


SCRATCH_HEADROOM = 16
"""A scratch array is allocated 1/16 longer than asked: a run's pairs differ in length by a few
echoes, and an array sized to the first pair was allocated anew (and its pages zeroed) for
every pair longer than all before it."""


def scratch_array(name: str, n: int, dtype: type = np.float64) -> np.ndarray:
    """``n`` values of this thread's array ``name``, kept for its next pair (the values left
    over): a 6-hour pair's 17 MB arrays, each allocated fresh, were mapped and zeroed page by
    page (~10 ms of kernel time a pair). For the caller's scratch only: nothing that outlives
    the caller's call may be one, and one name is one caller's (the scan's inputs to the
    detector are ``input_*``)."""
    bufs: dict[str, np.ndarray] | None = getattr(_scratch, "bufs", None)
    if bufs is None:
        bufs = _scratch.bufs = {}
    buf = bufs.get(name)
    if buf is None or len(buf) < n or buf.dtype != dtype:
        buf = bufs[name] = np.empty(n + n // SCRATCH_HEADROOM, dtype=dtype)
    return buf[:n]


def running_median(y: np.ndarray, width: int) -> np.ndarray:
    """:func:`cloudbench.analysis.levelshift.running_median` (the median of each value and the
    ``width // 2`` either side, the ends mirrored, the width cut to the series'), of a finite
    ``y``, by :func:`sliding_median` (:func:`level_between` over the whole series): the same values."""
    return level_between(y, width, 0, len(y))


def window_medians(t: np.ndarray, y: np.ndarray, window_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(keys, bounds, medians)`` of the windows ``floor((t − t[0]) / window_s)`` present (``t``
    ascending and non-empty, ``y`` finite, both float64): ``bounds[k]`` the first echo of the
    k-th (``bounds[-1] = len(t)``), its median ``np.median``'s value. The kernel ``cb_windows``
    finds the windows' edges by bisection (instead of dividing every echo's time),
    ``cb_window_medians`` each window's middle order statistics by a radix select of the
    values' bits, all windows in one call (the Python loop of np.partition it replaced took
    ~24 ms for a 6-hour pair's 720 windows). None without the kernel."""
    lib = kernel()
    if lib is None:
        return None
    t = np.ascontiguousarray(t, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    most = min(len(t), int(np.floor((t[-1] - t[0]) / window_s)) + 1)
    keys, bounds = np.empty(most, dtype=np.int64), np.empty(most + 1, dtype=np.int64)
    nw = lib.windows(t.ctypes.data, len(t), window_s, keys.ctypes.data, bounds.ctypes.data)
    med = np.empty(nw)
    keys_scratch = scratch_array("window_keys", int(np.diff(bounds[:nw + 1]).max()), np.uint64)
    lib.window_medians(y.ctypes.data, bounds.ctypes.data, nw, med.ctypes.data, keys_scratch.ctypes.data)
    return keys[:nw], bounds[:nw + 1], med


def quiet_residuals(resid: np.ndarray, cut: float, scratch: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """``(resid[quiet], |resid[quiet]|)``, new arrays (``scratch``: this thread's
    :func:`scratch_array`), for ``quiet`` = no ``|resid|`` over ``cut`` at an echo or either
    neighbour (a binary dilation by one), in one compiled pass (``cb_quiet``) instead of six;
    None without the kernel."""
    lib = kernel()
    if lib is None:
        return None
    resid = np.ascontiguousarray(resid, dtype=np.float64)
    n = len(resid)
    base, absbase = (scratch_array("base", n), scratch_array("absbase", n)) if scratch else (np.empty(n), np.empty(n))
    m = lib.quiet(resid.ctypes.data, n, cut, base.ctypes.data, absbase.ctypes.data)
    return base[:m], absbase[:m]


def pelt(y: np.ndarray, penalty: float, min_segment: int = 2) -> list[int]:
    """:func:`cloudbench.analysis.levelshift.pelt` (the change points of a piecewise-constant
    mean) by the kernel ``cb_pelt``: the same cumulative sums (numpy's), the same recursion
    operation for operation, the same change points; its loop over the window medians in
    Python took 9-12 ms on a 6-hour pair's 720 windows. levelshift's without the kernel."""
    return plain_pelt(y, penalty, min_segment, None if kernel() is None else _compiled_recursion)


def _compiled_recursion(cs: np.ndarray, cs2: np.ndarray, n: int, penalty: float,
                        min_segment: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cloudbench.analysis.levelshift.pelt_recursion` by ``cb_pelt``."""
    lib = kernel()
    assert lib is not None
    f, last = np.empty(n + 1), np.empty(n + 1, dtype=np.int64)
    cands, fc = np.empty(n + 1, dtype=np.int64), np.empty(n + 1)
    lib.pelt(cs.ctypes.data, cs2.ctypes.data, n, float(penalty), int(min_segment), f.ctypes.data,
             last.ctypes.data, cands.ctypes.data, fc.ctypes.data)
    return f, last


def select(x: np.ndarray, k: int, two: bool = False) -> tuple[float, float] | None:
    """``(x_(k), x_(k+1))``: the ``k``-th and (``two``) the ``(k + 1)``-th smallest of a finite
    float64 ``x`` (0-based; without ``two`` the second is NaN), numpy's ``np.partition(x, k)[k]``
    by value (a zero's sign aside: numpy's is whichever it met), by the kernel ``cb_select`` (a
    radix select on the values' bits; ``x`` is read, not moved; the gathered keys go to this
    thread's :func:`scratch_array`, 8 bytes a value, its pages touched only as far as the
    largest bucket gathered). None without the kernel."""
    lib = kernel()
    n = len(x)
    if lib is None or n >= 1 << 32:
        return None
    if not 0 <= k < n - (1 if two else 0):
        raise IndexError(f"rank {k}{' and the next' if two else ''} outside {n} values")
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.full(2, np.nan)
    buf, hist = scratch_array("select_keys", n, np.uint64), scratch_array("select_counts", 1 << 16, np.uint32)
    if lib.select(x.ctypes.data, n, k, int(two), out.ctypes.data, buf.ctypes.data, hist.ctypes.data) != 0:
        raise IndexError(f"rank {k} of {n} values refused by cb_select")  # checked above: a bug if reached
    return float(out[0]), float(out[1])


def finite_and_ordered(t: np.ndarray, y: np.ndarray) -> bool:
    """Every ``t`` and ``y`` finite and ``t`` never decreasing (1-D float64 arrays of one
    length), in one compiled pass (``cb_ordered``; numpy's three passes and two masks took
    5-6 ms on a 6-hour pair)."""
    lib = kernel()
    if (lib is None or t.dtype != np.float64 or y.dtype != np.float64 or t.shape != y.shape or t.ndim != 1
            or not (t.flags.c_contiguous and y.flags.c_contiguous)):
        return bool(np.isfinite(t).all() and np.isfinite(y).all() and not (t[1:] < t[:-1]).any())
    return bool(lib.ordered(t.ctypes.data, y.ctypes.data, len(t)))
