"""Versioned Parquet files: written atomically with their schema version and kind, read back checked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from cloudbench.core.files import sha256_file
from cloudbench.errors import ResultError
from cloudbench.store import formats

T = TypeVar("T")
SCHEMA_KEY = b"cloudbench.schema"
KIND_KEY = b"cloudbench.kind"


class ParquetStream:
    """A Parquet file written in parts (row groups) in bounded memory, versioned and atomic.

    ``with ParquetStream(path, schema, kind) as out: out.write(table)`` for each part;
    the file appears at ``path`` only when the block ends without an error (then
    ``out.sha256`` is its checksum); on an error the partial file is removed. zstd at
    ``level``; ``encodings`` maps columns to Parquet encodings (e.g. BYTE_STREAM_SPLIT),
    the other string, dictionary and boolean columns are dictionary-encoded.
    """

    def __init__(self, path: Path, schema: pa.Schema, kind: str, level: int = 9, **encodings: str) -> None:
        meta = dict(schema.metadata or {})
        meta[SCHEMA_KEY] = str(formats.PARQUET.current).encode()
        meta[KIND_KEY] = kind.encode()
        self.path = path
        self.schema = schema.with_metadata(meta)
        self.tmp = path.with_name(path.name + ".tmp")
        self.kwargs: dict[str, Any] = {"compression": "zstd", "compression_level": level}
        if encodings:
            self.kwargs["use_dictionary"] = [
                f.name for f in schema if f.name not in encodings and _is_dict_candidate(f.type)]
            self.kwargs["column_encoding"] = dict(encodings)
        self.rows = 0
        self.sha256 = ""
        self._writer: pq.ParquetWriter | None = None

    def __enter__(self) -> ParquetStream:
        self._writer = pq.ParquetWriter(self.tmp, self.schema, **self.kwargs)
        return self

    def write(self, table: pa.Table) -> None:
        """Append ``table`` (this stream's schema) as one or more row groups."""
        assert self._writer is not None, "write inside the with block"
        self._writer.write_table(table.replace_schema_metadata(self.schema.metadata))
        self.rows += table.num_rows

    def __exit__(self, exc_type: object, *exc: object) -> None:
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                writer.close()
            if exc_type is None:
                self.tmp.replace(self.path)
                self.sha256 = sha256_file(self.path)
        finally:
            if exc_type is not None or not self.sha256:
                self.tmp.unlink(missing_ok=True)


def write_parquet(path: Path, table: pa.Table, kind: str, level: int = 9, **encodings: str) -> str:
    """Write ``table`` (zstd at ``level``) with the schema key; returns the file's sha256."""
    with ParquetStream(path, table.schema, kind, level, **encodings) as out:
        out.write(table)
    return out.sha256


def read_parquet_rows(path: Path) -> int:
    """The number of rows a Parquet file holds, from its footer (nothing else is read)."""
    try:
        return int(pq.read_metadata(path).num_rows)
    except (pa.ArrowInvalid, OSError) as e:
        raise ResultError(str(path), f"not a readable Parquet file (truncated or corrupted?): {e}") from e


def _is_dict_candidate(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_dictionary(t) or pa.types.is_boolean(t))


def check_parquet(path: Path, kind: str | None = None) -> pq.ParquetFile:
    """A cloudbench Parquet file opened, its version and kind checked from the footer (no rows read);
    its ``schema_arrow`` and ``metadata`` (row groups, statistics) come from that one footer read."""
    return _checked(path, kind, pq.ParquetFile, lambda pf: pf.schema_arrow)


def read_parquet(path: Path, kind: str | None = None) -> pa.Table:
    """Read a cloudbench Parquet file, refusing unknown schemas and damaged files."""
    return _checked(path, kind, pq.read_table, lambda t: t.schema)


def _checked(path: Path, kind: str | None, read: Callable[[Path], T], schema_of: Callable[[T], pa.Schema]) -> T:
    """``read(path)`` (an opened file or a table), after checking the file exists, reads, and is of a
    known schema version and of ``kind`` (``schema_of`` gives its Arrow schema)."""
    if not path.exists():
        raise ResultError(str(path), "file is missing")
    try:
        got = read(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise ResultError(str(path), f"not a readable Parquet file (truncated or corrupted?): {e}") from e
    meta = schema_of(got).metadata or {}
    raw = meta.get(SCHEMA_KEY)
    if raw is None:
        raise ResultError(str(path), "has no cloudbench schema version; not written by cloudbench")
    formats.PARQUET.check(raw.decode(errors="replace"), str(path))
    if kind is not None and meta.get(KIND_KEY, b"").decode() != kind:
        raise ResultError(str(path), f"is a {meta.get(KIND_KEY, b'?').decode()!r} file, expected {kind!r}")
    return got
