"""``summaries.parquet``: one value per (repetition, workload, metric, group) of a run.

Every workload reduces each repetition to :class:`SummaryRow` values, made by
:func:`summary_row`; ``cloudbench confirm`` reads nothing else. A group is a
latency group (``same_zone``), a quorum (``q:<group>``) or a host pair
(:func:`pair_group`: ``src>dst``), always in these forms; in a workload that
sweeps a parameter, followed by the value (:func:`sweep_group`:
``same_zone@payload=1024``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.compute as pc

from cloudbench.store.parquet import read_parquet, write_parquet
from cloudbench.store.rundir import RunDir

SUMMARY_KIND = "summaries"
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


@dataclass(frozen=True)
class SummaryRow:
    """One value of one repetition: ``metric`` of ``group`` in ``workload``, from ``n_obs`` observations."""

    run_id: str
    repetition: int
    workload: str
    metric: str
    group: str
    value: float
    unit: str
    n_obs: int


def summary_row(run: RunDir, repetition: int, workload: str, metric: str, group: str,
                value: float, unit: str, n_obs: int) -> SummaryRow:
    """The one constructor of summary rows (types normalised for Parquet)."""
    return SummaryRow(run.run_id, int(repetition), workload, metric, group, float(value), unit,
                      int(n_obs))


class SummaryRows(list[SummaryRow]):
    """A workload's summary rows of one run, built with :meth:`add`, which skips values that are not finite."""

    def __init__(self, run: RunDir, workload: str) -> None:
        super().__init__()
        self.run, self.workload = run, workload

    def add(self, rep: int, metric: str, group: str, value: float | None, unit: str, n: int) -> None:
        if value is not None and math.isfinite(value):
            self.append(summary_row(self.run, rep, self.workload, metric, group, value, unit, n))


def pair_group(src: str, dst: str) -> str:
    """The group name of a host pair (direction matters: ``src>dst``)."""
    return f"{src}>{dst}"


def sweep_group(group: str, sweep: str) -> str:
    """The group name of ``group`` in the trials of one swept value (``same_zone@payload=1024``)."""
    return f"{group}@{sweep}"


def quorum_group(group: str) -> str:
    """The group name of a quorum over ``group`` (a spec group or a host list)."""
    return f"q:{group}"


def write_summaries(run: RunDir, rows: Sequence[SummaryRow]) -> str:
    """Replace the run's summaries with ``rows``; returns the file's sha256."""
    table = pa.Table.from_pylist([asdict(r) for r in rows], schema=SUMMARY_SCHEMA)
    return write_parquet(run.summaries_path, table, kind=SUMMARY_KIND)


def read_summaries(run: RunDir) -> pa.Table:
    """The run's summaries (an empty table when none were written).

    Throughput and drain summaries written before the group keys were unified named
    pairs ``src->dst``; they are read as ``src>dst`` so old and new runs pool.
    """
    if not run.summaries_path.exists():
        return SUMMARY_SCHEMA.empty_table()
    table = read_parquet(run.summaries_path, kind=SUMMARY_KIND)
    i = table.schema.get_field_index("group")
    if i < 0:
        return table
    return table.set_column(i, "group", pc.replace_substring(table.column(i), "->", ">"))
