"""Reader of the raw files written by the echo worker (``cloudbench/workers/echo.py``).

Layout (schema 1)::

    b"CBECHO1\\n"
    u32 big-endian N, then N bytes of UTF-8 JSON header
    records, 24 bytes each, little-endian ``<IHBxqq``:
        round u32, peer u16, flags u8, pad, send_ns i64, recv_ns i64 (0 on timeout)

Times are CLOCK_MONOTONIC nanoseconds of the sending host; ``header["t0_ns"]`` is
round 0's scheduled send. Every (round, peer) has exactly one record, written in
completion order; :func:`read_echo_file` sorts them by (round, peer).

The wire constants (magic, record layout, flags, schema) are the worker's own,
imported from it: the worker is the one place they are defined. The format's
history is :data:`cloudbench.store.formats.ECHO_RAW`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from cloudbench.errors import ResultError
from cloudbench.store.formats import ECHO_RAW
from cloudbench.workers.echo import (
    FLAG_CONN_LOST,
    FLAG_SEND_FAILED,
    FLAG_TIMEOUT,
    FLAG_WARMUP,
    MAGIC,
    RECORD,
    SCHEMA,
)

RECORD_SIZE = RECORD.size
MAX_HEADER_BYTES = 16 * 1024 * 1024

# On-disk record (with its pad byte) and the packed array handed to callers.
_DISK_DTYPE = np.dtype({
    "names": ["round", "peer", "flags", "send_ns", "recv_ns"],
    "formats": ["<u4", "<u2", "u1", "<i8", "<i8"],
    "offsets": [0, 4, 6, 8, 16],
    "itemsize": RECORD_SIZE,
})
ECHO_DTYPE = np.dtype([
    ("round", np.uint32),
    ("peer", np.uint16),
    ("flags", np.uint8),
    ("send_ns", np.int64),
    ("recv_ns", np.int64),
])

REQUIRED_HEADER_KEYS = (
    "schema", "worker_version", "clock", "host", "host_id", "peers", "rate", "payload",
    "timeout_s", "warmup_s", "t0_ns",
)


def read_echo_file(path: Path) -> tuple[dict[str, Any], np.ndarray]:
    """Read one worker file: its header and its records sorted by (round, peer).

    A truncated final record (a worker killed mid-write) is dropped and
    ``header["truncated"]`` is set to True (False otherwise). Raises
    :class:`ResultError` for a bad magic, an unknown schema or a bad header.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ResultError(str(path), f"cannot read echo file: {e}") from e
    if not data.startswith(MAGIC):
        raise ResultError(str(path), f"not an echo worker file (magic {data[:8]!r}, "
                                     f"expected {MAGIC!r})")
    pos = len(MAGIC)
    if len(data) < pos + 4:
        raise ResultError(str(path), "echo file ends before its header length")
    n = int.from_bytes(data[pos:pos + 4], "big")
    pos += 4
    if n > MAX_HEADER_BYTES or len(data) < pos + n:
        raise ResultError(str(path), f"echo header of {n} bytes is truncated or too large")
    try:
        header = json.loads(data[pos:pos + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ResultError(str(path), f"echo header is not valid JSON: {e}") from e
    if not isinstance(header, dict):
        raise ResultError(str(path), "echo header is not a JSON object")
    ECHO_RAW.check(header.get("schema"), str(path))
    missing = [k for k in REQUIRED_HEADER_KEYS if k not in header]
    if missing:
        raise ResultError(str(path), f"echo header lacks {', '.join(missing)}")
    if header["clock"] != "CLOCK_MONOTONIC" or not isinstance(header["t0_ns"], int):
        raise ResultError(str(path), "echo header has an unknown clock or no integer t0_ns")
    pos += n
    body = len(data) - pos
    whole = body - body % RECORD_SIZE
    header["truncated"] = whole != body
    disk = np.frombuffer(data, dtype=_DISK_DTYPE, count=whole // RECORD_SIZE, offset=pos)
    records = np.empty(len(disk), dtype=ECHO_DTYPE)
    for name in ECHO_DTYPE.names or ():
        records[name] = disk[name]
    records.sort(order=["round", "peer"], kind="stable")
    return header, records


__all__ = [
    "ECHO_DTYPE",
    "FLAG_CONN_LOST",
    "FLAG_SEND_FAILED",
    "FLAG_TIMEOUT",
    "FLAG_WARMUP",
    "MAGIC",
    "SCHEMA",
    "read_echo_file",
]
