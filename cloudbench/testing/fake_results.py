"""Synthetic result directories: a manifest (schema 1) and ``summaries.parquet`` per run.

Tests and benchmarks of the repetition analysis build campaigns with known
values and known metadata here instead of running workloads::

    root = make_campaign(tmp_path, "demo", [FakeRun({("rtt_p50_us", "same_zone"): values})])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from cloudbench.store.manifest import Manifest, RepetitionRecord, save_manifest
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import summary_row, write_summaries

_BASE_TIME = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)


def _utc(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class FakeRun:
    """One run: per (metric, group) one value per repetition, plus host labels.

    The run has as many repetitions as the longest series; a shorter series, or
    ``None`` in it, leaves those repetitions without a summary row.
    ``rep_labels`` overrides labels of chosen repetitions (index -> labels), to
    build campaigns whose metadata differ between repetitions.
    """

    values: Mapping[tuple[str, str], Sequence[float | None]]
    workload: str = "echo"
    unit: str = "us"
    provider: str = "netns"
    regions: Sequence[str] = ("r1",)
    zones_per_region: int = 2
    vm_type: str = "local"
    worker_version: str = "1"
    workloads: Sequence[Mapping[str, Any]] = ({"name": "echo", "kind": "echo", "rate": 100},)
    rep_labels: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    status: str = "complete"
    run_id: str | None = None
    schedule: Mapping[str, Any] | None = None  # the spec's `schedule:` (a scheduled campaign's run)

    @property
    def repetitions(self) -> int:
        return max((len(v) for v in self.values.values()), default=0)


def _hosts(run: FakeRun, repetition: int) -> list[dict[str, Any]]:
    hosts = []
    octet = 10
    for region in run.regions:
        for z in range(run.zones_per_region):
            labels = {
                "provider": run.provider,
                "region": region,
                "zone": f"{region}-{chr(ord('a') + z)}",
                "subnet": f"s{z + 1}",
                "vm_type": run.vm_type,
            }
            labels.update(run.rep_labels.get(repetition, {}))
            hosts.append({"name": f"{labels['zone']}-1", "labels": labels,
                          "address": f"198.18.{z + 1}.{octet}"})
            octet += 1
    return hosts


def write_run(campaign_dir: Path, run: FakeRun, index: int = 0, seed: int = 0) -> RunDir:
    """Write one run directory (manifest + summaries) under ``campaign_dir``."""
    start = _BASE_TIME + timedelta(hours=index)
    run_id = run.run_id or f"{start:%Y%m%dT%H%M%SZ}-{index:04x}"
    rd = RunDir(Path(campaign_dir) / run_id)
    rd.path.mkdir(parents=True, exist_ok=True)
    reps = run.repetitions
    rows = [
        summary_row(rd, r, run.workload, metric, group, float(value), run.unit, 1000)
        for (metric, group), vals in run.values.items()
        for r, value in enumerate(vals)
        if value is not None
    ]
    digest = write_summaries(rd, rows)
    rep_minutes = 5
    manifest = Manifest(
        campaign=Path(campaign_dir).name,
        run_id=run_id,
        status=run.status,
        spec={"name": Path(campaign_dir).name, "workloads": [dict(w) for w in run.workloads],
              **({"schedule": dict(run.schedule)} if run.schedule is not None else {})},
        seed=seed,
        worker_version=run.worker_version,
        started_utc=_utc(start),
        ended_utc=_utc(start + timedelta(minutes=rep_minutes * reps)),
        repetitions=[
            RepetitionRecord.model_validate({
                "index": r,
                "started_utc": _utc(start + timedelta(minutes=rep_minutes * r)),
                "ended_utc": _utc(start + timedelta(minutes=rep_minutes * (r + 1))),
                "hosts": _hosts(run, r),
            })
            for r in range(reps)
        ],
        files={"summaries.parquet": digest},
    )
    save_manifest(rd.manifest_path, manifest)
    return rd


def make_campaign(root: Path, name: str, runs: Sequence[FakeRun], seed: int = 0) -> Path:
    """``root/name`` holding one directory per run, in order; returns the campaign dir."""
    campaign = Path(root) / name
    campaign.mkdir(parents=True, exist_ok=True)
    for i, run in enumerate(runs):
        write_run(campaign, run, index=i, seed=seed)
    return campaign


def normal_values(n: int, mean: float, cov: float, seed: int = 0) -> list[float]:
    """``n`` i.i.d. normal values with coefficient of variation ``cov``."""
    rng = np.random.default_rng(seed)
    return [float(v) for v in rng.normal(mean, cov * mean, n)]
