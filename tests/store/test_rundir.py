from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cloudbench.errors import ResultError
from cloudbench.store.manifest import load_manifest
from cloudbench.store.parquet import read_parquet, write_parquet
from cloudbench.store.rundir import RunDir, find_runs


def test_parquet_roundtrip_and_schema_refusal(tmp_path: Path) -> None:
    t = pa.table({"x": [1, 2, 3]})
    p = tmp_path / "a.parquet"
    write_parquet(p, t, kind="echo")
    assert read_parquet(p, kind="echo").column("x").to_pylist() == [1, 2, 3]
    with pytest.raises(ResultError, match="expected 'throughput'"):
        read_parquet(p, kind="throughput")
    future = t.replace_schema_metadata({b"cloudbench.schema": b"99", b"cloudbench.kind": b"echo"})
    pq.write_table(future, p)
    with pytest.raises(ResultError, match="parquet file schema 99 is unknown"):
        read_parquet(p)
    pq.write_table(t, p)
    with pytest.raises(ResultError, match="no cloudbench schema"):
        read_parquet(p)


def test_truncated_parquet_is_a_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "a.parquet"
    write_parquet(p, pa.table({"x": list(range(1000))}), kind="echo")
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ResultError, match="truncated or corrupted"):
        read_parquet(p)


def test_manifest_versions(tmp_path: Path) -> None:
    run = tmp_path / "camp" / "20260101T000000Z-abcd"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"schema": 3}))
    with pytest.raises(ResultError, match="manifest schema 3 is unknown"):
        load_manifest(run / "manifest.json")
    (run / "manifest.json").write_text('{"schema": 1, "files"')
    with pytest.raises(ResultError, match="not valid JSON"):
        RunDir(run).manifest()
    (run / "manifest.json").write_text(json.dumps({"schema": 1, "campaign": "camp", "run_id": run.name,
                                                   "files": {"x.parquet": "00"}}))
    assert RunDir(run).verify() == ["x.parquet: missing"]
    assert find_runs(tmp_path / "camp") == [RunDir(run)]
    with pytest.raises(ResultError, match="holds no cloudbench run"):
        find_runs(tmp_path)
