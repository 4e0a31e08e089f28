"""The echo engine's reads from Arrow's buffers: values and null positions of ``rtt_ns``,
and the true positions of ``timeout`` (:mod:`cloudbench.workloads.echo.trial_files`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from cloudbench.workloads.echo.trial_files import ints_and_nulls, true_at

GARBAGE = -123_456_789


def _with_garbage_under_nulls(values: list[int | None]) -> pa.Array:
    """An int64 array whose null slots hold GARBAGE (Arrow leaves them unspecified)."""
    valid = np.array([v is not None for v in values])
    data = np.array([GARBAGE if v is None else v for v in values], dtype=np.int64)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(pa.int64(), len(values), [bitmap, pa.py_buffer(data.tobytes())],
                                 null_count=int((~valid).sum()))


VALUES = [5, None, 7, 8, None, None, 11, 12, 13, None, 15]


def _check(col: pa.ChunkedArray, values: list[int | None]) -> None:
    vals, nulls = ints_and_nulls(col)
    want_nulls = [i for i, v in enumerate(values) if v is None]
    assert nulls.tolist() == want_nulls and nulls.dtype == np.int64
    assert len(vals) == len(values) and vals.dtype == np.int64
    assert [int(vals[i]) for i, v in enumerate(values) if v is not None] == \
        [v for v in values if v is not None]


@pytest.mark.parametrize("start", [0, 1, 3])
def test_values_and_nulls_come_from_the_buffers_at_any_offset(start: int) -> None:
    arr = _with_garbage_under_nulls(VALUES)
    assert np.frombuffer(arr.buffers()[1], dtype=np.int64)[1] == GARBAGE
    _check(pa.chunked_array([arr.slice(start)]), VALUES[start:])


def test_several_chunks_narrow_types_and_no_nulls() -> None:
    arr = _with_garbage_under_nulls(VALUES)
    _check(pa.chunked_array([arr.slice(0, 4), arr.slice(4)]), VALUES)
    narrow = pa.array(VALUES, type=pa.int32())
    _check(pa.chunked_array([narrow]), VALUES)
    full = [v for v in VALUES if v is not None]
    _check(pa.chunked_array([pa.array(full, type=pa.int64())]), full)
    vals, nulls = ints_and_nulls(pa.chunked_array([], type=pa.int64()))
    assert len(vals) == 0 and len(nulls) == 0


def test_true_positions_skip_false_and_null() -> None:
    col = pa.chunked_array([pa.array([True, None, False]), pa.array([True, True, None])])
    assert true_at(col).tolist() == [0, 3, 4]
    assert true_at(col.chunk(0).slice(1)).tolist() == []
    assert true_at(pa.chunked_array([], type=pa.bool_())).tolist() == []
