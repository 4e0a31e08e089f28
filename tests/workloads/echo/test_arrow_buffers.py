"""The echo engine's reads from Arrow's buffers: values and null positions of ``rtt_ns``,
and the true positions of ``timeout`` (:mod:`cloudbench.workloads.echo.trial_files`)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cloudbench.testing.fake_results import write_echo_run
from cloudbench.workloads.echo.trial_files import ints_and_nulls, to_numpy, true_at
from tests.paths import ROOT

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


ENDS = [None, 2, 3, None, None, 6, 7, None, 9, None]  # nulls first and last, and beside each other


@pytest.mark.parametrize(("start", "stop"), [(0, 10), (0, 4), (3, 8), (3, 5), (7, 10), (9, 10), (1, 3)])
def test_int64_values_are_the_buffers_bytes_from_the_offset_with_nulls_at_the_ends(start: int, stop: int) -> None:
    """A sliced int64 chunk (an offset into its buffer) with a null at its first and/or last
    position: the values are the buffer's own 8-byte words from the offset on, the garbage
    under the nulls included (no fill, no copy), and the nulls' positions are the chunk's."""
    arr = _with_garbage_under_nulls(ENDS)
    part = arr.slice(start, stop - start)
    assert part.offset == start
    vals, nulls = ints_and_nulls(pa.chunked_array([part]))
    words = np.frombuffer(arr.buffers()[1], dtype=np.int64)
    assert vals.dtype == np.int64 and vals.tobytes() == words[start:stop].tobytes()
    assert np.shares_memory(vals, words)
    assert nulls.tolist() == [i for i, v in enumerate(ENDS[start:stop]) if v is None]


def test_chunks_that_begin_and_end_with_nulls_join_in_order() -> None:
    arr = _with_garbage_under_nulls(ENDS)
    for cuts in ([0, 4, 10], [0, 3, 5, 8, 10], [1, 4, 8, 10], [0, 1, 10]):
        chunks = [arr.slice(a, b - a) for a, b in itertools.pairwise(cuts)]
        _check(pa.chunked_array(chunks), ENDS[cuts[0]:cuts[-1]])


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


@pytest.mark.parametrize("start", [0, 3, 9])
@pytest.mark.parametrize("typ", [pa.int8(), pa.int16(), pa.int32(), pa.uint16(), pa.int64(), pa.uint64(),
                                 pa.float32(), pa.float64(), pa.bool_()])
def test_columns_come_to_numpy_as_arrow_gives_them_at_any_offset(typ: pa.DataType, start: int) -> None:
    rng = np.random.default_rng(start)
    raw = rng.integers(0, 2, 20) if typ == pa.bool_() else rng.integers(0, 100, 20)
    arr = pa.array(raw, type=typ).slice(start)
    want = np.array(arr.to_pylist(), dtype=arr.type.to_pandas_dtype())
    for col in (arr, pa.chunked_array([arr]), pa.chunked_array([arr.slice(0, 4), arr.slice(4)]),
                pa.chunked_array([], type=typ)):
        got = to_numpy(col)
        expect = want if len(col) else want[:0]
        assert got.dtype == expect.dtype and got.tolist() == expect.tolist()
    assert to_numpy(pa.chunked_array([arr]), np.int64).tolist() == want.astype(np.int64).tolist()


def test_a_scan_imports_no_pandas(tmp_path: Path) -> None:
    """pyarrow's ``to_numpy`` imports pandas on its first call (0.36 s under the GIL in a scan
    thread); `cloudbench report` needs pandas nowhere else."""
    run = write_echo_run(tmp_path, seed=0, window=0.5, repetitions=1, rounds=300)  # the writer uses pandas
    code = """
import sys
from pathlib import Path
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.echo.aggregates import aggregate_echo
from cloudbench.workloads.echo.summaries import spec_quorums
run = RunDir(Path(sys.argv[1]))
manifest = run.manifest()
agg = aggregate_echo(run, manifest, "echo", 0.5, spec_quorums(manifest, manifest.workloads()[0]),
                     round_interval_s=0.01)
assert agg.rows
print("pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code, str(run.path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=180, check=True)
    assert out.stdout.split() == ["False"]
