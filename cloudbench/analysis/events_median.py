"""The per-pair level's running median, compiled: sorted blocks instead of a double heap;
and numpy's percentile from one partition (:func:`percentile`).

:func:`cloudbench.analysis.events.detect_pair_events` takes the level of a pair's raw RTTs
as the running median of ``2·max_spike + 1`` echoes (6,001 at 100 rounds/s and a 30 s
window) over the whole series, its ends mirrored. bottleneck's ``move_median`` (a double
heap, O(log w) a step with scattered memory accesses) took 140–150 ms of CPU for a 6-hour
pair (2.16 M echoes), 44 % of the detector's time. Here the series is cut into blocks of
the window's width, each block is sorted once (numpy's ``argsort``), and the window slides
over two neighbouring blocks as two sorted doubly linked lists (Suomela, "Median filtering
is equivalent to sorting", 2014): the value leaving is unlinked from the first block's
list, the value arriving relinked into the second's (dancing links: the second list is
emptied in reverse order first, so every relink finds its neighbours in place), and two
cursors, one per list, keep the window's ``w // 2`` smallest values before them; each step
moves them by O(1) on average, inside two blocks' memory. 70–75 ms for the same pair
(argsort 25, the walk 45–50).

The walk is C (``events_median.c``), built with the machine's ``cc``/``gcc`` on first use,
cached by the hash of its source in the user's cache directory and called through ctypes,
which releases the GIL (the report's sender threads run their pairs at once). A numba
version of the same walk was measured too: its import and cached dispatch cost 1.0 s per
process, a quarter of what it saved on a 56-pair run. Without a compiler (or when the
build fails) bottleneck's ``move_median`` runs instead. The median of an odd window is one
of its values, so every path gives the same numbers (the tests compare them with each
other and with scipy's ``median_filter``).
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import bottleneck as bn
import numpy as np

C_SOURCE = Path(__file__).resolve().with_suffix(".c")
_lock = threading.Lock()
Kernel = Callable[..., int]
_kernel: list[Kernel | None] = []  # [the loaded function, or None: not available]


def cache_dir() -> Path:
    """Where the built kernel is kept: ``$XDG_CACHE_HOME/cloudbench`` (``~/.cache/cloudbench``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "cloudbench"


def _build() -> Kernel | None:
    """Compile (once per source version) and load the kernel; None without a compiler or when
    the build or the load fails."""
    src = C_SOURCE.read_bytes()
    lib = cache_dir() / f"events_median-{hashlib.sha256(src).hexdigest()[:12]}.so"
    try:
        if not lib.exists():
            cc = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
            if cc is None:
                return None
            lib.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = lib.with_name(f"{lib.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            p = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(C_SOURCE)],
                               capture_output=True, check=False)
            if p.returncode != 0:
                tmp.unlink(missing_ok=True)
                return None
            tmp.replace(lib)  # atomic: processes building at once each replace it whole
        fn = ctypes.CDLL(str(lib)).cb_slide
    except OSError:
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    out: Kernel = fn
    return out


def kernel() -> Kernel | None:
    """The compiled walk, built and loaded on the first call; None when it is not available."""
    with _lock:
        if not _kernel:
            _kernel.append(_build())
        return _kernel[0]


def sliding_median(x: np.ndarray, width: int) -> np.ndarray:
    """``out[j]`` = the median of ``x[j:j + width]`` for every ``j`` with a full window
    (``x`` finite float64, ``width`` odd, ``1 ≤ width ≤ len(x)``)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n, k = len(x), int(width)
    if k % 2 == 0 or not 1 <= k <= n:
        raise ValueError(f"the width must be odd and at most the series' length ({k}, {n})")
    fn = kernel()
    if fn is None:
        return np.asarray(bn.move_median(x, k)[k - 1:])
    blocks = -(-n // k) + 1  # a padding block at the end: every block has a successor
    padded = np.full(blocks * k, np.inf)
    padded[:n] = x
    order = np.ascontiguousarray(np.argsort(padded.reshape(blocks, k), axis=1), dtype=np.int64)
    out = np.empty(n - k + 1)
    if fn(padded.ctypes.data, order.ctypes.data, n, k, out.ctypes.data) != 0:
        raise MemoryError("the running median's lists")
    return out


def running_median(y: np.ndarray, width: int) -> np.ndarray:
    """:func:`cloudbench.analysis.levelshift.running_median` (the median of each value and the
    ``width // 2`` either side, the ends mirrored, the width cut to the series'), of a finite
    ``y``, by :func:`sliding_median`: the same values."""
    y = np.asarray(y, dtype=np.float64)
    half = max(0, min(width // 2, (len(y) - 1) // 2))
    if half == 0:
        return y.copy()
    mirrored = np.concatenate([y[half:0:-1], y, y[-2:-half - 2:-1]])
    return sliding_median(mirrored, 2 * half + 1)


def percentile(x: np.ndarray, q: float) -> float:
    """``np.percentile(x, q)`` of a non-empty 1-D finite ``x`` (the same value: numpy's
    linear method, its virtual index ``(n − 1)·q/100`` and its two-sided interpolation),
    from one single-point partition instead of numpy's partition at four points."""
    n = len(x)
    v = (n - 1) * np.true_divide(q, 100)
    if v >= n - 1:
        return float(np.max(x))
    i = math.floor(v)
    gamma = float(v - i)
    part = np.partition(x, i)
    a = part[i]
    b = part[i + 1:].min()
    diff = b - a
    # numpy's _lerp: from the nearer end of the interval
    return float(b - diff * (1 - gamma)) if gamma >= 0.5 else float(a + diff * gamma)
