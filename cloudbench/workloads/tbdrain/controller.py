"""Token-bucket drain (Uta et al.): the throughput worker sending flat out until the rate drops.

It runs like the throughput workload (:class:`~cloudbench.workloads.throughput.controller.PairKind`,
the same worker and Parquet layout): burst 0 is the drain, burst 1 (optional) the
second drain after ``rest`` that measures the refill.
"""

from __future__ import annotations

from cloudbench.workloads.tbdrain import report
from cloudbench.workloads.tbdrain.params import KIND, TbDrainWorkload
from cloudbench.workloads.tbdrain.summaries import DRAIN_BETTER, drain_summaries
from cloudbench.workloads.throughput.controller import PairKind


class TbDrainKind(PairKind):
    """The ``tokenbucket`` workload kind (``tbdrain`` before): token-bucket drains of a pair's throughput."""
    kind = KIND
    better = DRAIN_BETTER
    params = TbDrainWorkload
    report_tables = report.TABLES
    summaries = staticmethod(drain_summaries)
    section = staticmethod(report.section)
    views = staticmethod(report.views)
