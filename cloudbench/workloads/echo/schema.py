"""The echo workload's Parquet format: one trial's observations in one file.

The controller writes it (:mod:`cloudbench.workloads.echo.controller`), the scan reads
it (:mod:`cloudbench.workloads.echo.trial_files`), and the fakes of
:mod:`cloudbench.testing.fake_results` write it as the controller does. The format's
version and history are in :mod:`cloudbench.store.formats` (``echo``); this module holds
its layout:

    repetition int16, round int32, src, dst (dictionary strings),
    send_us int64 (µs since the sender's round 0), rtt_ns int64 (null on timeout),
    timeout bool, warmup bool, conn_lost bool,
    connect_ns int64 (the TCP handshake of the round's own connection with
    ``connection: per_round``; null on persistent connections; absent in files
    written before it existed)

sorted by (src, dst, round), with byte-stream-split encoding of the times and
zstd, so that a row costs under 4 bytes on disk at full nanosecond precision.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pyarrow as pa

ECHO_SCHEMA = pa.schema(
    [
        ("run_id", pa.dictionary(pa.int16(), pa.string())),
        ("repetition", pa.int16()),
        ("trial", pa.dictionary(pa.int16(), pa.string())),
        ("round", pa.int32()),
        ("src", pa.dictionary(pa.int16(), pa.string())),
        ("dst", pa.dictionary(pa.int16(), pa.string())),
        ("group", pa.dictionary(pa.int8(), pa.string())),
        ("send_us", pa.int64()),
        ("rtt_ns", pa.int64()),
        ("timeout", pa.bool_()),
        ("warmup", pa.bool_()),
        ("conn_lost", pa.bool_()),
        ("connect_ns", pa.int64()),
    ]
)
"""Echo observations, Parquet schema 2: one row per (sender, peer, round). ``run_id``,
``trial`` and the pair's latency ``group`` are columns (constant or in long runs, so
dictionary and RLE make them nearly free), so a campaign's files are one dataset any
engine can group; ``send_us`` counts from the sender's round 0, whose CLOCK_REALTIME
the file metadata holds per host (:data:`T0_UTC_KEY`)."""

T0_UTC_KEY = b"cloudbench.t0_utc_us"
"""File metadata (schema 2): JSON {host: CLOCK_REALTIME µs of that host's round 0}."""
RUN_ID_KEY = b"cloudbench.run_id"
"""File metadata: the run the file belongs to."""
TRIAL_KEY = b"cloudbench.trial"
"""File metadata: the trial the file holds."""

# Measured on testbed runs (bytes/row): rtt_ns DELTA 2.85, PLAIN 2.93, BYTE_STREAM_SPLIT 2.49;
# send_us DELTA 2.03, BYTE_STREAM_SPLIT 1.33 (zstd 19). Lossless, unlike rounding RTTs.
ENCODINGS = {"round": "DELTA_BINARY_PACKED", "send_us": "BYTE_STREAM_SPLIT", "rtt_ns": "BYTE_STREAM_SPLIT",
             "connect_ns": "BYTE_STREAM_SPLIT"}
"""Column encodings of an echo file (the others: dictionary, Parquet's default)."""

# By measurement (bench/bench_scale.py; quickstart testbed rows re-encoded):
# level 9: 3.84 B/row real, 4.0 M rows/s ingest; 12: 3.69 B/row real, 2.8 M rows/s (6 h trial
# ≈ 50 s); 15: 3.58, 1.7 M rows/s; 19: 3.57, 0.6 M rows/s (6 h ≈ 230 s, over the 120 s budget).
ZSTD_LEVEL = 12
"""The zstd level the controller writes echo files with."""

CONSTANT_COLUMNS = ("repetition", "src", "warmup", "connect_ns")
"""Columns a reader need not read from a row group whose footer statistics show one value (or only
nulls)."""


def echo_schema_metadata(t0_utc_us: Mapping[str, int], run_id: str, trial: str) -> dict[bytes, bytes]:
    """File metadata of an echo observation file: each host's round 0 in UTC µs, run and trial."""
    return {T0_UTC_KEY: json.dumps(dict(t0_utc_us), sort_keys=True).encode(),
            RUN_ID_KEY: run_id.encode(), TRIAL_KEY: trial.encode()}
