"""Reader of the raw files written by the echo worker (``cloudbench/workers/echo.py``).

Layout (schema 2; schema 1 lacks ``connect_ns``, its records are 24 bytes)::

    b"CBECHO1\\n"
    u32 big-endian N, then N bytes of UTF-8 JSON header
    records, 32 bytes each, little-endian ``<IHBxqqq``:
        round u32, peer u16, flags u8, pad, send_ns i64, recv_ns i64 (0 on timeout),
        connect_ns i64 (handshake of a per-round connection; -1 otherwise)

Records of schema 1 files are read with ``connect_ns`` -1 (they had persistent
connections only).

Times are CLOCK_MONOTONIC nanoseconds of the sending host; ``header["t0_ns"]`` is
round 0's scheduled send. Every (round, peer) has exactly one record, written in
completion order; :func:`read_echo_file` sorts them by (round, peer).

The wire constants (magic, record layout, flags, schema) are the worker's own,
imported from it: the worker is the one place they are defined. The format's
history is :data:`cloudbench.store.formats.ECHO_RAW`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cloudbench.errors import ResultError
from cloudbench.store.formats import ECHO_RAW
from cloudbench.workers.echo_protocol import (
    FLAG_CONN_LOST,
    FLAG_SEND_FAILED,
    FLAG_TIMEOUT,
    FLAG_WARMUP,
    MAGIC,
    RECORD,
    SCHEMA,
)

RECORD_SIZE = RECORD.size  # of the current schema
MAX_HEADER_BYTES = 16 * 1024 * 1024

# On-disk records (with their pad byte) of each schema, and the packed array handed to callers.
_DISK_DTYPES = {
    1: np.dtype({
        "names": ["round", "peer", "flags", "send_ns", "recv_ns"],
        "formats": ["<u4", "<u2", "u1", "<i8", "<i8"],
        "offsets": [0, 4, 6, 8, 16],
        "itemsize": 24,
    }),
    2: np.dtype({
        "names": ["round", "peer", "flags", "send_ns", "recv_ns", "connect_ns"],
        "formats": ["<u4", "<u2", "u1", "<i8", "<i8", "<i8"],
        "offsets": [0, 4, 6, 8, 16, 24],
        "itemsize": 32,
    }),
}
assert _DISK_DTYPES[SCHEMA].itemsize == RECORD_SIZE
ECHO_DTYPE = np.dtype([
    ("round", np.uint32),
    ("peer", np.uint16),
    ("flags", np.uint8),
    ("send_ns", np.int64),
    ("recv_ns", np.int64),
    ("connect_ns", np.int64),
])

REQUIRED_HEADER_KEYS = (
    "schema", "worker_version", "clock", "host", "host_id", "peers", "rate", "payload",
    "timeout_s", "warmup_s", "t0_ns",
)


CHUNK_RECORDS = 1 << 21  # records per read: 64 MiB on disk (32-byte records); keeps ingest under 1 GB


@dataclass(frozen=True)
class EchoFile:
    """One worker file opened: its checked header, where the records start, how many there are."""

    path: Path
    header: dict[str, Any]
    offset: int  # byte offset of the first record
    records: int  # whole records (a truncated last one is not counted)
    schema: int = SCHEMA  # the file's record layout

    def chunks(self, size: int = CHUNK_RECORDS) -> Iterator[np.ndarray]:
        """The records in file (completion) order, at most ``size`` at a time, as ``ECHO_DTYPE``."""
        left = self.records
        dtype = _DISK_DTYPES[self.schema]
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                while left > 0:
                    n = min(size, left)
                    disk = np.fromfile(f, dtype=dtype, count=n)
                    if len(disk) != n:
                        raise ResultError(str(self.path), "echo file shrank while it was read")
                    out = np.empty(n, dtype=ECHO_DTYPE)
                    for name in ECHO_DTYPE.names or ():
                        out[name] = disk[name] if name in (dtype.names or ()) else -1
                    left -= n
                    yield out
        except OSError as e:
            raise ResultError(str(self.path), f"cannot read echo file: {e}") from e


def open_echo_file(path: Path) -> EchoFile:
    """Read and check a worker file's header; the records are read later, in chunks.

    A truncated final record (a worker killed mid-write) is not counted and
    ``header["truncated"]`` is set to True (False otherwise). Raises
    :class:`ResultError` for a bad magic, an unknown schema or a bad header.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(len(MAGIC) + 4)
            if not head.startswith(MAGIC):
                raise ResultError(str(path), f"not an echo worker file (magic {head[:8]!r}, "
                                             f"expected {MAGIC!r})")
            if len(head) < len(MAGIC) + 4:
                raise ResultError(str(path), "echo file ends before its header length")
            n = int.from_bytes(head[len(MAGIC):], "big")
            raw = f.read(n) if n <= MAX_HEADER_BYTES else b""
    except OSError as e:
        raise ResultError(str(path), f"cannot read echo file: {e}") from e
    if n > MAX_HEADER_BYTES or len(raw) < n:
        raise ResultError(str(path), f"echo header of {n} bytes is truncated or too large")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ResultError(str(path), f"echo header is not valid JSON: {e}") from e
    if not isinstance(header, dict):
        raise ResultError(str(path), "echo header is not a JSON object")
    schema = ECHO_RAW.check(header.get("schema"), str(path))
    missing = [k for k in REQUIRED_HEADER_KEYS if k not in header]
    if missing:
        raise ResultError(str(path), f"echo header lacks {', '.join(missing)}")
    if header["clock"] != "CLOCK_MONOTONIC" or not isinstance(header["t0_ns"], int):
        raise ResultError(str(path), "echo header has an unknown clock or no integer t0_ns")
    offset = len(MAGIC) + 4 + n
    body = size - offset
    size_of = _DISK_DTYPES[schema].itemsize
    header["truncated"] = body % size_of != 0
    header.setdefault("connection", "persistent")
    header.setdefault("idle_s", 0.0)
    return EchoFile(path, header, offset, body // size_of, schema)


def read_echo_file(path: Path) -> tuple[dict[str, Any], np.ndarray]:
    """One worker file whole: its header and its records sorted by (round, peer).

    For files of any size use :func:`open_echo_file` and read its chunks.
    """
    f = open_echo_file(path)
    parts = list(f.chunks())
    records = np.concatenate(parts) if parts else np.empty(0, dtype=ECHO_DTYPE)
    records.sort(order=["round", "peer"], kind="stable")
    return f.header, records


__all__ = [
    "ECHO_DTYPE",
    "FLAG_CONN_LOST",
    "FLAG_SEND_FAILED",
    "FLAG_TIMEOUT",
    "FLAG_WARMUP",
    "MAGIC",
    "SCHEMA",
    "EchoFile",
    "open_echo_file",
    "read_echo_file",
]
