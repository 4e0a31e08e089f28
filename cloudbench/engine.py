"""The embedded query engine: DuckDB over the store's Parquet files, out of core.

Observation tables of a long campaign do not fit in Python (a 6-hour StormCloud
trial is 138 M echo rows). The analyses that query them with SQL — a campaign's
dataset (:mod:`cloudbench.dataset`, ``cloudbench.open``) and the throughput
workload's tables — go through an :class:`Engine`, a DuckDB connection with a
bounded memory budget that spills to disk beyond it. Queries read the Parquet files
in place; only aggregates (groups, windows, pairs: tables of at most thousands of
rows) come back to Python, as numpy arrays or pandas frames. DuckDB's
``quantile_cont`` is exact (it selects order statistics, it does not sketch) and
interpolates like numpy's default (Hyndman & Fan type 7).

The echo report does not come through here: its scan
(:mod:`cloudbench.workloads.echo.scan`) reads the files with Arrow, because its
holistic aggregates (percentiles of groups, pairs, windows and quorums) would hold
every value of a group in DuckDB's memory (ARCHITECTURE.md, "Libraries, and why").
The process's allocator tuning for such scans is :mod:`cloudbench.core.allocator`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cloudbench.errors import ResultError

if TYPE_CHECKING:
    import duckdb

MEMORY_LIMIT = "1500MB"
"""DuckDB's budget for one engine; beyond it, sorts and aggregates spill to disk.

With Python, Arrow and the interpreter around it the process stays under the
3 GB the report of a 138 M-row run may use (bench/bench_scale.py measures it)."""

THREADS_ENV = "CLOUDBENCH_THREADS"
MEMORY_ENV = "CLOUDBENCH_MEMORY_LIMIT"


class Engine:
    """One DuckDB connection for one analysis (a report, a notebook session).

    ``threads`` defaults to the machine's cores (``$CLOUDBENCH_THREADS``), the
    memory budget to :data:`MEMORY_LIMIT` (``$CLOUDBENCH_MEMORY_LIMIT``); spill
    files go to a temporary directory removed on :meth:`close`.
    """

    def __init__(self, *, threads: int | None = None, memory_limit: str | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="cloudbench-engine-")
        threads = threads or int(os.environ.get(THREADS_ENV) or 0) or (os.cpu_count() or 1)
        import duckdb  # noqa: PLC0415 - 45 ms, loaded by the commands that query (not by an echo report)

        self.con = duckdb.connect(":memory:", config={
            "threads": threads,
            "memory_limit": memory_limit or os.environ.get(MEMORY_ENV) or MEMORY_LIMIT,
            "temp_directory": self._tmp.name,
            # results come back in file order; nothing here depends on row order otherwise
            "preserve_insertion_order": False,
        })
        self._names = 0

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection and remove its spill files."""
        self.con.close()
        self._tmp.cleanup()

    def name(self, stem: str) -> str:
        """A fresh name for a view or table of this connection."""
        self._names += 1
        return f"{stem}_{self._names}"

    def parquet(self, files: Sequence[Path], columns: Iterable[str] | None = None) -> duckdb.DuckDBPyRelation:
        """The rows of ``files`` (one dataset; columns by name) as a relation, read lazily."""
        if not files:
            raise ResultError("", "no Parquet files to read")
        paths = [str(f) for f in files]
        cols = ", ".join(sql_ident(c) for c in columns) if columns is not None else "*"
        return self.con.sql(f"SELECT {cols} FROM read_parquet({sql_list(paths)}, union_by_name = true)")

    def table(self, stem: str, data: pa.Table) -> str:
        """Register a small Arrow table (labels, trial lists) under a fresh name; returns the name."""
        name = self.name(stem)
        self.con.register(name, data)
        return name

    def sql(self, query: str, params: Sequence[Any] | None = None) -> duckdb.DuckDBPyRelation:
        """A query of this connection (``?`` placeholders bound to ``params``), as a lazy relation."""
        return self.con.sql(query, params=params)


def sql_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def sql_list(items: Sequence[str]) -> str:
    """A SQL list literal of strings (file paths)."""
    return "[" + ", ".join("'" + s.replace("'", "''") + "'" for s in items) + "]"
