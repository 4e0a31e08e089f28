"""Versioned Parquet files: written atomically with their schema version and kind, read back checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cloudbench.core.files import sha256_file
from cloudbench.errors import ResultError
from cloudbench.store import formats

SCHEMA_KEY = b"cloudbench.schema"
KIND_KEY = b"cloudbench.kind"


def write_parquet(path: Path, table: pa.Table, kind: str, level: int = 9, **encodings: str) -> str:
    """Write ``table`` (zstd at ``level``) with the schema key; returns the file's sha256."""
    meta = dict(table.schema.metadata or {})
    meta[SCHEMA_KEY] = str(formats.PARQUET.current).encode()
    meta[KIND_KEY] = kind.encode()
    table = table.replace_schema_metadata(meta)
    tmp = path.with_name(path.name + ".tmp")
    kwargs: dict[str, Any] = {"compression": "zstd", "compression_level": level}
    if encodings:
        kwargs["use_dictionary"] = [
            c for c in table.column_names if c not in encodings and _is_dict_candidate(table, c)
        ]
        kwargs["column_encoding"] = dict(encodings)
    try:
        pq.write_table(table, tmp, **kwargs)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return sha256_file(path)


def _is_dict_candidate(table: pa.Table, col: str) -> bool:
    t = table.schema.field(col).type
    return bool(pa.types.is_string(t) or pa.types.is_dictionary(t) or pa.types.is_boolean(t))


def read_parquet(path: Path, kind: str | None = None) -> pa.Table:
    """Read a cloudbench Parquet file, refusing unknown schemas and damaged files."""
    if not path.exists():
        raise ResultError(str(path), "file is missing")
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise ResultError(str(path), f"not a readable Parquet file (truncated or corrupted?): {e}") from e
    meta = table.schema.metadata or {}
    raw = meta.get(SCHEMA_KEY)
    if raw is None:
        raise ResultError(str(path), "has no cloudbench schema version; not written by cloudbench")
    formats.PARQUET.check(raw.decode(errors="replace"), str(path))
    if kind is not None and meta.get(KIND_KEY, b"").decode() != kind:
        raise ResultError(str(path), f"is a {meta.get(KIND_KEY, b'?').decode()!r} file, expected {kind!r}")
    return table
