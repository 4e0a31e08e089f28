"""Token-bucket drain (Uta et al.): the throughput worker sending flat out until the rate drops.

It runs like the throughput workload (:class:`~cloudbench.workloads.throughput.controller.PairKind`,
the same worker and Parquet layout): burst 0 is the drain, burst 1 (optional) the
second drain after ``rest`` that measures the refill.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console

from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow
from cloudbench.workloads.tbdrain import report
from cloudbench.workloads.tbdrain.params import TbDrainWorkload
from cloudbench.workloads.tbdrain.summaries import drain_summaries
from cloudbench.workloads.throughput.controller import PairKind


class TbDrainKind(PairKind):
    kind = "tbdrain"
    params = TbDrainWorkload
    report_tables = report.TABLES

    def summarize(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> list[SummaryRow]:
        return drain_summaries(run, manifest, params)

    def report_section(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> dict[str, Any]:
        return report.section(run, manifest, params)

    def render_section(self, name: str, section: dict[str, Any], console: Console,
                       options: Mapping[str, bool]) -> None:
        report.render(name, section, console)
