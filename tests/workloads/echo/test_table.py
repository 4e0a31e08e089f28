"""Worker records -> the echo Parquet table (no root, no sockets)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cloudbench.store.parquet import read_parquet, write_parquet
from cloudbench.workloads.echo.controller import ECHO_SCHEMA, echo_table
from cloudbench.workloads.echo.reader import ECHO_DTYPE, FLAG_CONN_LOST, FLAG_TIMEOUT, FLAG_WARMUP

T0 = 5_000_000_000


def records(rows: list[tuple[int, int, int, int, int]]) -> np.ndarray:
    rec = np.empty(len(rows), dtype=ECHO_DTYPE)
    for i, (rnd, peer, flags, send, recv) in enumerate(rows):
        rec[i] = (rnd, peer, flags, send, recv)
    return rec


def test_rows_are_typed_sorted_and_timeouts_are_null(tmp_path: Path) -> None:
    a = records([
        (1, 1, 0, T0 + 10_000_000, T0 + 10_050_000),
        (0, 1, FLAG_WARMUP, T0 + 1_000, T0 + 61_000),
        (0, 0, FLAG_WARMUP, T0 + 900, T0 + 30_900),
        (1, 0, FLAG_TIMEOUT | FLAG_CONN_LOST, T0 + 10_000_100, 0),
    ])
    b = records([(0, 0, 0, T0 + 2_000, T0 + 2_000 + 3_000_000_000)])  # a 3 s reply: beyond int32 ns
    t = echo_table([("a", {"t0_ns": T0}, a), ("b", {"t0_ns": T0}, b)], {0: "a", 1: "b"}, 4)
    assert t.schema == ECHO_SCHEMA
    assert t.column("src").cast("string").to_pylist() == ["a", "a", "a", "a", "b"]
    assert t.column("dst").cast("string").to_pylist() == ["a", "a", "b", "b", "a"]
    assert t.column("round").to_pylist() == [0, 1, 0, 1, 0]
    assert t.column("send_us").to_pylist() == [0, 10_000, 1, 10_000, 2]
    assert t.column("rtt_ns").to_pylist() == [30_000, None, 60_000, 50_000, 3_000_000_000]
    assert t.column("timeout").to_pylist() == [False, True, False, False, False]
    assert t.column("conn_lost").to_pylist() == [False, True, False, False, False]
    assert t.column("warmup").to_pylist() == [True, False, True, False, False]
    assert set(t.column("repetition").to_pylist()) == {4}
    path = tmp_path / "x.parquet"
    write_parquet(path, t, kind="echo", send_us="BYTE_STREAM_SPLIT", rtt_ns="BYTE_STREAM_SPLIT")
    assert read_parquet(path, kind="echo").equals(t)


def test_unknown_peer_ids_are_named_not_dropped() -> None:
    t = echo_table([("a", {"t0_ns": 0}, records([(0, 7, 0, 10, 20)]))], {0: "a"}, 0)
    assert t.column("dst").cast("string").to_pylist() == ["#7"]
