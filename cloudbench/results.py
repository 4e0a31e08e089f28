"""The result store: layout, manifest, schema versions, checksums, loading.

Layout::

    results/<campaign>/<run-id>/manifest.json          what ran, where, with what
    results/<campaign>/<run-id>/<workload>/*.parquet   observations, one row each
    results/<campaign>/<run-id>/summaries.parquet      one value per
                                                       (repetition, workload, metric, group)

Every workload reduces each repetition to rows of ``summaries.parquet``; the
repetition analyzer (``cloudbench confirm``) reads only those rows and the
manifest, so a new workload plugs in by writing summaries, nothing else.

Format history (readers refuse versions they do not know):
    manifest schema 1 -- first version.
    parquet schema 1  -- first version; key ``cloudbench.schema`` in file metadata.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cloudbench.errors import ResultError

MANIFEST_SCHEMA = 1
PARQUET_SCHEMA = 1
KNOWN_MANIFEST_SCHEMAS = frozenset({1})
KNOWN_PARQUET_SCHEMAS = frozenset({1})
SCHEMA_KEY = b"cloudbench.schema"
KIND_KEY = b"cloudbench.kind"

SUMMARY_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("repetition", pa.int32()),
        ("workload", pa.string()),
        ("metric", pa.string()),
        ("group", pa.string()),
        ("value", pa.float64()),
        ("unit", pa.string()),
        ("n_obs", pa.int64()),
    ]
)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        json.dump(data, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def write_parquet(path: Path, table: pa.Table, kind: str, level: int = 9, **encodings: str) -> str:
    """Write ``table`` (zstd at ``level``) with the schema key; returns the file's sha256."""
    meta = dict(table.schema.metadata or {})
    meta[SCHEMA_KEY] = str(PARQUET_SCHEMA).encode()
    meta[KIND_KEY] = kind.encode()
    table = table.replace_schema_metadata(meta)
    tmp = path.with_name(path.name + ".tmp")
    kwargs: dict[str, Any] = {"compression": "zstd", "compression_level": level}
    if encodings:
        kwargs["use_dictionary"] = [
            c for c in table.column_names if c not in encodings and _is_dict_candidate(table, c)
        ]
        kwargs["column_encoding"] = dict(encodings)
    pq.write_table(table, tmp, **kwargs)
    tmp.replace(path)
    return sha256_file(path)


def _is_dict_candidate(table: pa.Table, col: str) -> bool:
    t = table.schema.field(col).type
    return bool(pa.types.is_string(t) or pa.types.is_dictionary(t) or pa.types.is_boolean(t))


def write_csv(path: Path, rows: list[dict[str, Any]]) -> bool:
    """A table as CSV (columns from the first row); nothing is written for no rows."""
    if not rows:
        return False
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return True


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
    try:
        version = int(raw)
    except ValueError as e:
        raise ResultError(str(path), f"schema version {raw!r} is not a number") from e
    if version not in KNOWN_PARQUET_SCHEMAS:
        raise ResultError(
            str(path),
            f"schema version {version} is unknown to this cloudbench (knows "
            f"{sorted(KNOWN_PARQUET_SCHEMAS)}); upgrade cloudbench to read it",
        )
    if kind is not None and meta.get(KIND_KEY, b"").decode() != kind:
        raise ResultError(str(path), f"is a {meta.get(KIND_KEY, b'?').decode()!r} file, expected {kind!r}")
    return table


@dataclass(order=True)
class RunDir:
    """One run of a campaign on disk (``results/<campaign>/<run-id>``).

    Runs sort by path, so by run id, which starts with a UTC timestamp.
    """

    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    @property
    def summaries_path(self) -> Path:
        return self.path / "summaries.parquet"

    def manifest(self) -> dict[str, Any]:
        return load_manifest(self.manifest_path)

    def summaries(self) -> pa.Table:
        if not self.summaries_path.exists():
            return SUMMARY_SCHEMA.empty_table()
        return read_parquet(self.summaries_path, kind="summaries")

    def verify(self) -> list[str]:
        """Files whose checksum differs from the manifest's (empty when all is well)."""
        bad: list[str] = []
        for rel, digest in self.manifest().get("files", {}).items():
            p = self.path / rel
            if not p.exists():
                bad.append(f"{rel}: missing")
            elif sha256_file(p) != digest:
                bad.append(f"{rel}: checksum mismatch")
        return bad


def load_manifest(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ResultError(str(path), "no manifest.json here; is this a cloudbench run directory?")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ResultError(str(path), f"manifest is not valid JSON (truncated?): {e}") from e
    if not isinstance(data, dict) or "schema" not in data:
        raise ResultError(str(path), "manifest has no schema version")
    if data["schema"] not in KNOWN_MANIFEST_SCHEMAS:
        raise ResultError(
            str(path),
            f"manifest schema {data['schema']} is unknown to this cloudbench (knows "
            f"{sorted(KNOWN_MANIFEST_SCHEMAS)}); upgrade cloudbench to read it",
        )
    return data


def find_runs(path: Path) -> list[RunDir]:
    """Runs under ``path``: a campaign directory (all its runs) or one run directory."""
    path = Path(path)
    if not path.exists():
        raise ResultError(str(path), "no such directory")
    if (path / "manifest.json").exists():
        return [RunDir(path)]
    runs = sorted(RunDir(p.parent) for p in path.glob("*/manifest.json"))
    if not runs:
        raise ResultError(str(path), "holds no cloudbench run (no */manifest.json)")
    return runs


def latest_run(path: Path) -> RunDir:
    return find_runs(path)[-1]


def write_summaries(run: RunDir, rows: list[dict[str, Any]]) -> str:
    """Replace the run's summaries with ``rows`` (columns of SUMMARY_SCHEMA)."""
    table = pa.Table.from_pylist(rows, schema=SUMMARY_SCHEMA)
    return write_parquet(run.summaries_path, table, kind="summaries")


def repetition_metadata(manifest: dict[str, Any], repetition: int) -> dict[str, str]:
    """Key metadata of one repetition, compared before repetitions are pooled."""
    rep = next((r for r in manifest.get("repetitions", []) if r["index"] == repetition), None)
    if rep is None:
        raise ResultError(manifest.get("_path", "manifest"), f"has no repetition {repetition}")
    hosts = rep.get("hosts", [])
    workloads = manifest.get("spec", {}).get("workloads", [])
    return {
        "provider": ",".join(sorted({h["labels"]["provider"] for h in hosts})),
        "regions": ",".join(sorted({h["labels"]["region"] for h in hosts})),
        "zones": ",".join(sorted({h["labels"]["zone"] for h in hosts})),
        "vm_type": ",".join(sorted({h["labels"]["vm_type"] for h in hosts})),
        "worker_version": str(manifest.get("worker_version", "")),
        "workloads": json.dumps(workloads, sort_keys=True),
    }


def iter_observation_files(run: RunDir, workload: str) -> Iterator[Path]:
    yield from sorted((run.path / workload).glob("*.parquet"))

