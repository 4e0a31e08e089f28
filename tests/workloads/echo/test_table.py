"""Worker records -> the echo Parquet table (no root, no sockets)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from cloudbench.store.parquet import ParquetStream, read_parquet, write_parquet
from cloudbench.workers.echo_protocol import MAGIC, RECORD, SCHEMA
from cloudbench.workloads.echo.controller import echo_host_table, echo_table
from cloudbench.workloads.echo.reader import (
    ECHO_DTYPE,
    FLAG_CONN_LOST,
    FLAG_TIMEOUT,
    FLAG_WARMUP,
    open_echo_file,
    read_echo_file,
)
from cloudbench.workloads.echo.schema import ECHO_SCHEMA

T0 = 5_000_000_000


def records(rows: list[tuple[int, ...]]) -> np.ndarray:
    """Records (round, peer, flags, send_ns, recv_ns[, connect_ns]); connect_ns -1 when left out."""
    rec = np.empty(len(rows), dtype=ECHO_DTYPE)
    for i, r in enumerate(rows):
        rec[i] = (*r, -1) if len(r) == 5 else r
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
    assert t.column("connect_ns").to_pylist() == [None] * 5  # persistent connections: no handshake
    path = tmp_path / "x.parquet"
    write_parquet(path, t, kind="echo", send_us="BYTE_STREAM_SPLIT", rtt_ns="BYTE_STREAM_SPLIT")
    assert read_parquet(path, kind="echo").equals(t)


def test_per_round_handshakes_are_kept_and_missing_ones_are_null() -> None:
    a = records([(0, 0, 0, T0 + 900, T0 + 30_900, 120_000),
                 (1, 0, FLAG_TIMEOUT | FLAG_CONN_LOST, T0 + 10_000_000, 0, -1),
                 (2, 0, FLAG_TIMEOUT, T0 + 20_000_000, 0, 95_000)])
    t = echo_table([("a", {"t0_ns": T0}, a)], {0: "a"}, 0)
    # a handshake that never completed is null; a completed one is kept even when the echo timed out
    assert t.column("connect_ns").to_pylist() == [120_000, None, 95_000]
    assert t.column("rtt_ns").to_pylist() == [30_000, None, None]


def test_unknown_peer_ids_are_named_not_dropped() -> None:
    t = echo_table([("a", {"t0_ns": 0}, records([(0, 7, 0, 10, 20)]))], {0: "a"}, 0)
    assert t.column("dst").cast("string").to_pylist() == ["#7"]


def write_worker_file(path: Path, host: str, rows: list[tuple[int, int, int, int, int]], tail: bytes = b"") -> None:
    """A raw file as the echo worker writes it (magic, JSON header, 32-byte records)."""
    header = {"schema": SCHEMA, "worker_version": "test", "clock": "CLOCK_MONOTONIC", "host": host,
              "host_id": 0, "peers": [], "rate": 10, "payload": 64, "timeout_s": 1, "warmup_s": 0,
              "t0_ns": T0}
    head = json.dumps(header).encode()
    body = b"".join(RECORD.pack(*r, -1) for r in rows)
    path.write_bytes(MAGIC + len(head).to_bytes(4, "big") + head + body + tail)


def test_chunked_ingest_streams_every_row_as_the_whole_table_would(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    names = {0: "a", 1: "b", 2: "c"}
    files = {}
    for i, host in names.items():
        rows = [(rnd, peer, int(rng.integers(0, 2)) * FLAG_WARMUP, T0 + rnd * 10_000_000 + peer,
                 T0 + rnd * 10_000_000 + peer + int(rng.integers(20_000, 90_000)))
                for rnd in range(50) for peer in (0, 1, 2, 9) if (rnd, peer) != (7, i)]
        rng.shuffle(rows)  # completion order
        files[host] = tmp_path / f"{host}.bin"
        write_worker_file(files[host], host, rows, tail=b"\x01\x02" if host == "c" else b"")
    opened = [(h, open_echo_file(p)) for h, p in files.items()]
    assert [f.records for _, f in opened] == [199, 199, 199] and opened[2][1].header["truncated"]
    whole = echo_table([(h, *read_echo_file(p)) for h, p in files.items()], names, 2)
    out_path = tmp_path / "t.parquet"
    with ParquetStream(out_path, ECHO_SCHEMA, "echo", 3, rtt_ns="BYTE_STREAM_SPLIT") as out:
        for host, f in opened:
            for chunk in f.chunks(size=37):  # many chunks per host
                out.write(echo_host_table(host, T0, chunk, names, 2))
    assert out.rows == whole.num_rows == 3 * 199
    streamed = read_parquet(out_path, kind="echo")

    def rows_of(t: pa.Table) -> list[tuple[object, ...]]:
        cols = [t.column(c).cast(pa.string()) if c in ("src", "dst") else t.column(c) for c in ECHO_SCHEMA.names]
        return sorted(zip(*(c.to_pylist() for c in cols), strict=True), key=repr)

    assert rows_of(streamed) == rows_of(whole)
    assert set(streamed.column("dst").cast(pa.string()).to_pylist()) == {"a", "b", "c", "#9"}


def test_a_failed_stream_leaves_no_file(tmp_path: Path) -> None:
    out_path = tmp_path / "t.parquet"
    try:
        with ParquetStream(out_path, ECHO_SCHEMA, "echo") as out:
            out.write(echo_host_table("a", 0, records([(0, 0, 0, 10, 20)]), {0: "a"}, 0))
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert list(tmp_path.iterdir()) == []
