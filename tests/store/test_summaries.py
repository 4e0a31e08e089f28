"""summaries.parquet: one row type, one group-key format, old pair keys read in today's format."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from cloudbench.store.parquet import write_parquet
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import (
    SUMMARY_KIND,
    SUMMARY_SCHEMA,
    SummaryRows,
    pair_group,
    quorum_group,
    read_summaries,
    summary_row,
    write_summaries,
)


def test_rows_roundtrip_with_one_group_format(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "c" / "r1")
    run.path.mkdir(parents=True)
    rows = [summary_row(run, 0, "tcp", "throughput_mbps", pair_group("a", "b"), 9.5, "Mbit/s", 10),
            summary_row(run, 1, "echo", "quorum_q2of3_p50_us", quorum_group("subnet1"), 70, "us", 99)]
    write_summaries(run, rows)
    got = read_summaries(run).to_pylist()
    assert [(r["group"], r["value"], r["run_id"]) for r in got] == [("a>b", 9.5, "r1"), ("q:subnet1", 70.0, "r1")]


def test_old_pair_keys_are_read_in_todays_format(tmp_path: Path) -> None:
    """Throughput summaries written before the layered package named pairs `a->b`."""
    run = RunDir(tmp_path / "c" / "r0")
    run.path.mkdir(parents=True)
    old = pa.Table.from_pylist([
        {"run_id": "r0", "repetition": 0, "workload": "tcp", "metric": "throughput_mbps", "group": "a->b",
         "value": 1.0, "unit": "Mbit/s", "n_obs": 3},
        {"run_id": "r0", "repetition": 0, "workload": "tcp", "metric": "throughput_mbps",
         "group": "cross_zone:reverse", "value": 2.0, "unit": "Mbit/s", "n_obs": 3},
    ], schema=SUMMARY_SCHEMA)
    write_parquet(run.summaries_path, old, kind=SUMMARY_KIND)
    assert read_summaries(run).column("group").to_pylist() == ["a>b", "cross_zone:reverse"]


def test_rows_skip_values_without_an_estimate(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "c" / "r2")
    rows = SummaryRows(run, "tcp")
    rows.add(0, "m", "g", float("nan"), "1", 1)
    rows.add(0, "m", "g", None, "1", 1)
    rows.add(0, "m", "g", 2.5, "1", 1)
    assert [r.value for r in rows] == [2.5]
