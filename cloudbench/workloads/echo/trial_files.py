"""A run's echo Parquet files as the scan reads them: footers, row groups, columns as numpy.

One file holds one trial (:mod:`cloudbench.workloads.echo.schema`). Its footer is read
once (:func:`trial_files`): the rounds and the largest RTT it holds, and per row group
the columns of :data:`~cloudbench.workloads.echo.schema.CONSTANT_COLUMNS` that hold a
single value there, which the scan then does not read. Row groups are read one at a
time (:func:`read_row_group`; each thread keeps its reader of a file); host names stay
dictionary codes, mapped to host indices through the (small) dictionaries, and integer
columns come to numpy from Arrow's buffers, without a filled copy. Nothing here calls
pyarrow's ``to_numpy`` on the columns: its first call imports pandas (0.36 s with the
bytecode cache, in a scan thread holding the GIL), and no other part of ``cloudbench
report`` needs pandas.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cloudbench.core.files import utc_stamp
from cloudbench.errors import ResultError
from cloudbench.store.parquet import check_parquet
from cloudbench.store.rundir import RunDir, iter_observation_files
from cloudbench.workloads.echo.schema import CONSTANT_COLUMNS, T0_UTC_KEY

NO_STATISTICS = -2
""":attr:`TrialFile.max_round` of a file whose footer has no statistics of its rounds."""


@dataclass
class TrialFile:
    """One trial's echo file, as its footer describes it (nothing of its rows read)."""

    path: Path
    trial: str
    t0_utc_us: dict[str, int]
    """Per host: CLOCK_REALTIME µs of its round 0 (file metadata; empty in older files)."""
    max_round: int
    """The last round the footer shows; :data:`NO_STATISTICS` when it does not say."""
    row_groups: int
    has_connect: bool = False
    """Written by echo worker 3 or later (the ``connect_ns`` column)."""
    max_rtt: int | None = 0
    """The largest RTT (ns) the footer shows; None: unknown."""
    constant: list[dict[str, Any]] = field(default_factory=list)
    """Per row group: each column of ``CONSTANT_COLUMNS`` with a single value (see :func:`footer_constants`)."""
    footer: Any = None
    """The file's parsed footer (``pq.FileMetaData``): each read skips parsing it again."""

    def t0_utc(self) -> float | None:
        """CLOCK_REALTIME µs of round 0 (the earliest host's), when the file says."""
        return min(self.t0_utc_us.values()) if self.t0_utc_us else None

    def row_group_rows(self, row_group: int) -> int:
        """The number of rows of one row group (from the footer)."""
        return int(self.footer.row_group(row_group).num_rows)


def trial_files(run: RunDir, workload: str, trials: Collection[str] | None = None) -> list[TrialFile]:
    """The workload's Parquet files (of ``trials`` only, when given) with what their footers say
    (versions checked, nothing read)."""
    out = []
    for path in iter_observation_files(run, workload):
        if trials is not None and path.stem not in trials:
            continue
        pf = check_parquet(path, kind="echo")
        schema = pf.schema_arrow
        meta = schema.metadata or {}
        t0 = {str(k): int(v) for k, v in json.loads(meta.get(T0_UTC_KEY, b"{}")).items()}
        f = TrialFile(path, path.stem, t0, -1, pf.metadata.num_row_groups, "connect_ns" in schema.names,
                      footer=pf.metadata)
        ri, ti = schema.get_field_index("round"), schema.get_field_index("rtt_ns")
        for g in range(f.row_groups):
            rg = pf.metadata.row_group(g)
            rs, ts = rg.column(ri).statistics, rg.column(ti).statistics
            if f.max_round != NO_STATISTICS:
                f.max_round = max(f.max_round, int(rs.max)) if rs is not None and rs.has_min_max else NO_STATISTICS
            if f.max_rtt is not None and ts is not None and ts.has_min_max:
                f.max_rtt = max(f.max_rtt, int(ts.max))
            elif rg.num_rows and (ts is None or ts.null_count != rg.num_rows):  # RTTs it says nothing of
                f.max_rtt = None
            f.constant.append(footer_constants(rg, schema))
        out.append(f)
    return out


def footer_constants(rg: Any, schema: pa.Schema) -> dict[str, Any]:
    """The columns of ``CONSTANT_COLUMNS`` that one row group's statistics show to hold one
    value (exactly, not a truncated bound), or, for ``connect_ns``, only nulls (None)."""
    out: dict[str, Any] = {}
    for name in CONSTANT_COLUMNS:
        i = schema.get_field_index(name)
        st = rg.column(i).statistics if i >= 0 else None
        if st is None:
            continue
        if st.null_count == rg.num_rows and name == "connect_ns":
            out[name] = None
        elif (st.has_min_max and st.null_count == 0 and st.min == st.max
              and getattr(st, "is_min_value_exact", True) and getattr(st, "is_max_value_exact", True)):
            out[name] = st.min
    return out


_readers = threading.local()
"""Per thread: (path, footer, the open reader) of the file it read last."""


def read_row_group(f: TrialFile, row_group: int, columns: Sequence[str]) -> pa.Table:
    """Some columns of one row group (host columns as dictionaries); an unreadable file is an
    error naming it.

    Each thread keeps its reader of the file it read last (opening one per row group cost
    ~1 ms of the ~22 ms a row group's five columns take). Not ``pre_buffer``: it hands the
    reads to Arrow's I/O threads, whose CPU the calling thread's clock does not show, and
    waits for them (no less CPU in all, and more wall time on a busy machine)."""
    try:
        held = getattr(_readers, "file", None)
        if held is None or held[0] != f.path or held[1] is not f.footer:
            pf = pq.ParquetFile(f.path, read_dictionary=["src", "dst"], metadata=f.footer)
            held = _readers.file = (f.path, f.footer, pf)
        return held[2].read_row_group(row_group, columns=list(columns), use_threads=False)
    except (pa.ArrowInvalid, OSError) as e:
        raise ResultError(str(f.path), f"not a readable Parquet file (truncated or corrupted?): {e}") from e


def host_index(col: pa.ChunkedArray, index: dict[str, int], where: Path) -> np.ndarray:
    """Host indices of a dictionary column, through its (small) dictionaries."""
    codes, lut = host_codes(col, index)
    return known_hosts(lut[codes], where)


def host_codes(col: pa.ChunkedArray, index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """A host column's dictionary codes and the host index of each code (-1: a name the manifest
    does not list); the codes of a column in several chunks are offset to be distinct. Runs of
    one host are found on the small codes, without mapping every row."""
    luts, parts, offset = [], [], 0
    for chunk in col.chunks:
        if not pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_encode()
        assert isinstance(chunk, pa.DictionaryArray)
        codes = numpy_of(chunk.indices)
        parts.append(codes.astype(np.int64) + offset if offset else codes)
        luts.append(np.array([index.get(str(s), -1) for s in chunk.dictionary.to_pylist()], dtype=np.int64))
        offset += len(luts[-1])
    if len(parts) == 1:
        return parts[0], luts[0]
    return concat(parts), concat(luts)


def known_hosts(hosts: np.ndarray, where: Path) -> np.ndarray:
    """``hosts`` (indices), or an error naming the file when one is a name the manifest does not list."""
    if (hosts < 0).any():
        raise ResultError(str(where), "names hosts that the manifest does not list")
    return hosts


def to_numpy(col: pa.ChunkedArray | pa.Array, dtype: Any = None) -> np.ndarray:
    """A column without nulls as a numpy array of ``dtype`` (its own type by default)."""
    arr = col if isinstance(col, pa.Array) else col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    out = numpy_of(arr)
    return out if dtype is None else out.astype(dtype, copy=False)


def numpy_of(arr: pa.Array) -> np.ndarray:
    """An array as numpy: without nulls, integers and floats read from Arrow's buffer (no copy,
    and not through pyarrow's ``to_numpy``, whose first call imports pandas) and booleans
    unpacked from their bits; anything else through ``to_numpy``."""
    t, n = arr.type, len(arr)
    if not arr.null_count and (pa.types.is_integer(t) or pa.types.is_floating(t)):
        kind = "u" if pa.types.is_unsigned_integer(t) else "f" if pa.types.is_floating(t) else "i"
        return _buffer_values(arr, np.dtype(f"{kind}{t.bit_width // 8}"))
    if not arr.null_count and pa.types.is_boolean(t):
        if not n:
            return np.empty(0, dtype=bool)
        bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
        return np.unpackbits(bits, count=arr.offset + n, bitorder="little")[arr.offset:].view(bool)
    out: np.ndarray = arr.to_numpy(zero_copy_only=False)
    return out


def _buffer_values(arr: pa.Array, dtype: np.dtype) -> np.ndarray:
    """A fixed-width array's values buffer as numpy of ``dtype`` (its width), from the array's
    offset, no copy; whatever the buffer holds at a null."""
    if not len(arr):
        return np.empty(0, dtype=dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def ints_and_nulls(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """An integer column's values as int64 (anything at a null) and the positions of its nulls,
    from Arrow's buffers: no filled copy and no conversion through float."""
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if not arr.null_count:
        return to_numpy(arr, np.int64), np.empty(0, dtype=np.int64)
    if arr.type != pa.int64():
        return to_numpy(arr.fill_null(0), np.int64), true_at(arr.is_null())
    return _buffer_values(arr, np.dtype(np.int64)), true_at(arr.is_null())


def true_at(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Positions of the true values of a boolean column (nulls are not true)."""
    return to_numpy(pc.indices_nonzero(col), np.int64) if len(col) else np.empty(0, np.int64)


def concat(parts: list[np.ndarray]) -> np.ndarray:
    """The arrays end to end (an empty int64 array for none)."""
    out: np.ndarray = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    return out


def utc_of(t0_us: float | None, offset_s: float) -> str | None:
    """ISO 8601 UTC of ``offset_s`` after ``t0_us`` (µs since the epoch, a file's round 0);
    None when unknown."""
    if t0_us is None:
        return None
    return utc_stamp(t0_us / 1e6 + offset_s, micro=True)
