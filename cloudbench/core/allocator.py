"""The process's memory allocator, tuned for scans of large files (glibc malloc, Arrow's pool).

Nothing here queries data: the ``cloudbench`` command calls :func:`keep_freed_memory`
once for its own process, before any command runs, because its reports scan large
Parquet files row group by row group (the echo scan, DuckDB's queries alike).
"""

from __future__ import annotations

import ctypes
import platform

import pyarrow as pa

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def keep_freed_memory(trim_bytes: int = 1 << 30, mmap_bytes: int = 32 << 20) -> bool:
    """Tune this process for scans of large files; whether it applied (glibc only).

    A scan allocates and frees tens of MB per row group (Arrow buffers, numpy
    temporaries). Handed back to the kernel, each comes back as fresh pages the
    kernel zeroes again: 2-3 s of system time in the 6-hour report. Here glibc keeps
    up to ``trim_bytes`` of freed heap for reuse, serves blocks up to ``mmap_bytes``
    (its maximum) from that heap, and Arrow allocates through the same malloc instead
    of its own pool. Dask's nanny sets ``MALLOC_TRIM_THRESHOLD_`` for its workers for
    the same reason. The ``cloudbench`` command calls this for its own process; a
    notebook keeps its allocator unless it calls this itself.
    """
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    if not (libc.mallopt(_M_TRIM_THRESHOLD, trim_bytes) and libc.mallopt(_M_MMAP_THRESHOLD, mmap_bytes)):
        return False
    pa.set_memory_pool(pa.system_memory_pool())
    return True
