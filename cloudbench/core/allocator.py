"""The process's memory allocator, tuned for scans of large files (glibc malloc, Arrow's pool).

Nothing here queries data: the ``cloudbench`` command calls :func:`limit_arenas` as its
package is imported and :func:`keep_freed_memory` before any command runs, because its
reports scan large Parquet files row group by row group (the echo scan, DuckDB's queries
alike). numpy and pyarrow are imported only inside the functions: importing pyarrow starts
a thread, which takes a malloc arena of its own before :func:`limit_arenas` could apply.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameters (malloc.h)


def one_blas_thread() -> None:
    """OpenBLAS (numpy's and scipy's) without threads of its own, unless ``OPENBLAS_NUM_THREADS``
    says otherwise; before numpy is imported. cloudbench's commands run their work in their own
    threads and call BLAS only on small matrices (a KDE's covariance, a regression), after which
    OpenBLAS's threads spin waiting for more: 0.58 s of CPU in the 6-hour report (perf), taken
    from the scan's and the tail's threads on two cores."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def keep_freed_memory(trim_bytes: int = 1 << 30, mmap_bytes: int = 32 << 20, arenas: int = 1) -> bool:
    """Tune this process for scans of large files; whether it applied (glibc only).

    A scan allocates and frees tens of MB per row group (Arrow buffers, numpy
    temporaries). Handed back to the kernel, each comes back as fresh pages the
    kernel zeroes again: 2-3 s of system time in the 6-hour report. Here glibc keeps
    up to ``trim_bytes`` of freed heap for reuse, serves blocks up to ``mmap_bytes``
    (its maximum) from that heap, and Arrow allocates through the same malloc instead
    of its own pool. Dask's nanny sets ``MALLOC_TRIM_THRESHOLD_`` for its workers for
    the same reason.

    Threads allocate from ``arenas`` arenas (:func:`limit_arenas`). The ``cloudbench``
    command calls this for its own process; a notebook keeps its allocator unless it
    calls this itself.
    """
    libc = _glibc()
    if libc is None or not limit_arenas(arenas):
        return False
    if not (libc.mallopt(_M_TRIM_THRESHOLD, trim_bytes) and libc.mallopt(_M_MMAP_THRESHOLD, mmap_bytes)):
        return False
    import pyarrow as pa  # noqa: PLC0415 - see the module's docstring
    pa.set_memory_pool(pa.system_memory_pool())
    return True


def _glibc() -> ctypes.CDLL | None:
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def limit_arenas(arenas: int = 1) -> bool:
    """Threads that start from now on allocate from at most ``arenas`` malloc arenas (glibc's
    default: 8 per core); whether it applied (glibc only).

    A thread's own arena grows in 64 MiB heaps of its own, and glibc unmaps such a heap
    whenever its last block is freed, whatever the trim threshold: the scan's and the
    detector's per-pair arrays (17 MB each) came back as new mappings, which numpy
    advises huge pages for and the kernel zeroes 2 MiB at a time. In the main heap the
    freed blocks stay (:func:`keep_freed_memory`) for the next thread's arrays. The threads
    allocate a few large blocks per row group or pair, so they seldom wait for its lock.
    A thread that has taken an arena before keeps it, and an arena freed by a thread's
    end is reused: call this before any thread starts (``import pyarrow`` starts one)."""
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(_M_ARENA_MAX, arenas))


def small_page_zeros(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A new array of zeros whose pages the kernel maps 4 KiB at a time, as they are first
    written (an anonymous private mapping advised ``MADV_NOHUGEPAGE``); numpy's own ``zeros``
    where that advice does not exist.

    numpy advises transparent huge pages for every large array. For the echo scan's round
    matrices (553 MB for a 6-hour trial, written row group by row group) the kernel then
    compacts memory to find 2 MiB pages as the first writes land: measured on this 2-vCPU
    machine, allocating and filling 553 MB took 0.9-1.45 s of CPU the first time in a
    process that way (0.1 s later, from pages it had freed), and 0.21 s every time with
    small pages, which also leave the cells no row ever lands in unmapped."""
    import numpy as np  # noqa: PLC0415 - see the module's docstring

    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    advice = getattr(mmap, "MADV_NOHUGEPAGE", None)
    if nbytes == 0 or advice is None:
        return np.zeros(shape, dtype=dt)
    mm = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mm.madvise(advice)
    out: np.ndarray = np.frombuffer(mm, dtype=dt).reshape(shape)  # the array keeps the mapping alive
    return out
