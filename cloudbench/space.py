"""Disk space: the bytes a plan writes (at its peak and at the end) and the free-space check.

Model (an estimate, said so wherever it is shown; the constants are measured, see
the README's "Disk space" section):

* Each trial's workload kind gives the bytes of its raw worker files and of what is
  kept of them (:meth:`~cloudbench.workloads.base.WorkloadKind.estimate_disk`): for
  echo ``pairs × rate × (warmup + duration)`` observations at 32 B raw (the worker's
  record) and :data:`~cloudbench.workloads.echo.controller.PARQUET_BYTES_PER_ROW` in
  Parquet.
* Trials run one after the other; a trial's raw files are pulled whole, then ingested
  into Parquet, then removed. So a run's peak is the largest, over its trials, of
  (Parquet of the trials before it + this trial's raw files + its Parquet), plus the
  manifest, summaries and the reserve (:func:`reserve_bytes`); its final size is every trial's Parquet plus
  the manifest, summaries and the report (report.json, CSV, HTML with figures).
* A campaign of ``n`` slots keeps every run (a slot writes no report: `cloudbench report` does):
  its peak is ``(n - 1)`` finished runs plus one run at its peak, its final size ``n`` finished
  runs plus the journal.

The check (:func:`check_free_space`) compares the filesystem's bytes free to the
peak plus :data:`MARGIN_FRACTION` and :data:`MARGIN_BYTES`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench.errors import InsufficientSpaceError
from cloudbench.plan import Plan
from cloudbench.spec.model import Spec
from cloudbench.workloads import workload_kind
from cloudbench.workloads.base import Trial, trial_params

# Measured on the quickstart (8 hosts, 2 repetitions, 2 trials): manifest.json 46,945 B;
# summaries.parquet 3,244 B; report/ 976,567 B (index.html 240 kB, report.json 92 kB, figures
# as SVG and PNG, CSV tables) for 64 pairs. Rounded up.
MANIFEST_BASE_BYTES = 8_000
MANIFEST_BYTES_PER_HOST_REPETITION = 2_600  # each host's labels and facts, per repetition
MANIFEST_BYTES_PER_TRIAL = 1_500  # each trial's record (workers' stats per host)
SUMMARIES_BYTES = 16_000
REPORT_BASE_BYTES = 900_000
REPORT_BYTES_PER_PAIR = 1_500
JOURNAL_BYTES_PER_TRIAL = 1_000  # a campaign's journal: a row and a few events per trial and slot
JOURNAL_WAL_BYTES = 4_200_000  # its write-ahead log: SQLite checkpoints at 1000 pages, the file stays ~4 MB
MARGIN_FRACTION = 0.10
MARGIN_BYTES = 8 << 20  # logs, the engine's spill, filesystem metadata


@dataclass(frozen=True)
class TrialBytes:
    """One trial on disk: its raw worker files (held until ingested) and what is kept."""

    raw: float
    stored: float


@dataclass(frozen=True)
class SpaceEstimate:
    """Bytes one run writes (peak and final) and, for ``slots`` runs, the whole campaign."""

    run_peak: float
    run_final: float
    raw_peak: float  # the largest trial's raw files (part of run_peak)
    parquet: float  # observations kept, all trials of one run
    report: float
    slots: int = 1
    journal: float = 0.0

    @property
    def campaign_peak(self) -> float:
        return (self.slots - 1) * self.run_final + self.run_peak + self.journal

    @property
    def campaign_final(self) -> float:
        return self.slots * self.run_final + self.journal

    def to_dict(self) -> dict[str, Any]:
        return {"run_peak_bytes": round(self.run_peak), "run_final_bytes": round(self.run_final),
                "raw_peak_bytes": round(self.raw_peak), "parquet_bytes": round(self.parquet),
                "report_bytes": round(self.report), "slots": self.slots,
                "campaign_peak_bytes": round(self.campaign_peak),
                "campaign_final_bytes": round(self.campaign_final)}


def trial_bytes(spec: Spec, trial: Trial) -> TrialBytes:
    """The kind's estimate of one trial's raw and stored bytes."""
    params = trial_params(spec.workload(trial.workload), trial)
    raw, stored = workload_kind(trial.kind).estimate_disk(params, trial)
    return TrialBytes(float(raw), float(stored))


def manifest_bytes(spec: Spec, plan: Plan) -> float:
    """The manifest of a finished run (it grows with hosts, repetitions and trials)."""
    return (MANIFEST_BASE_BYTES + MANIFEST_BYTES_PER_HOST_REPETITION * len(spec.topology()) * spec.repetitions
            + MANIFEST_BYTES_PER_TRIAL * len(plan.trials))


def report_bytes(plan: Plan) -> float:
    """The estimated size of a run's report files, from the number of host pairs of its plan."""
    pairs = {p for t in plan.trials for p in t.pairs}
    return REPORT_BASE_BYTES + REPORT_BYTES_PER_PAIR * len(pairs)


def estimate_space(spec: Spec, plan: Plan, slots: int = 1, trials: list[Trial] | None = None,
                   pending_raw: float = 0.0, report: bool = True) -> SpaceEstimate:
    """Peak and final bytes of a run of ``plan`` (``trials``: only these are still to run, e.g. a
    resume; ``pending_raw``: raw bytes already on disk that will be ingested first; ``report``:
    whether the run writes its report, as ``cloudbench run`` does and a campaign's slots do not)."""
    todo = plan.trials if trials is None else trials
    fixed = manifest_bytes(spec, plan) + SUMMARIES_BYTES
    stored_before = pending_raw / 8  # kept raw files become Parquet (echo: 32 B raw, under 4 B kept)
    peak = pending_raw + stored_before
    raw_peak = pending_raw
    for t in todo:
        b = trial_bytes(spec, t)
        peak = max(peak, stored_before + b.raw + b.stored)
        raw_peak = max(raw_peak, b.raw)
        stored_before += b.stored
    report_b = report_bytes(plan) if report else 0.0
    final = fixed + stored_before + report_b
    held = fixed + reserve_bytes(spec, plan)  # the reserve is held while the run writes
    return SpaceEstimate(run_peak=max(held + peak, final), run_final=final, raw_peak=raw_peak,
                         parquet=stored_before, report=report_b, slots=slots,
                         journal=(JOURNAL_WAL_BYTES + JOURNAL_BYTES_PER_TRIAL * len(plan.trials) * slots
                                  if slots > 1 else 0.0))


def reserve_bytes(spec: Spec, plan: Plan) -> int:
    """The reserve a run keeps in its directory so the manifest can still be saved on a full disk:
    twice the manifest (it is written beside the old one, then renamed) and 64 KiB."""
    return int(2 * manifest_bytes(spec, plan)) + (64 << 10)


def needed_bytes(estimate: float) -> int:
    """The estimate plus the margin: what the check wants free."""
    return int(estimate * (1 + MARGIN_FRACTION) + MARGIN_BYTES)


def free_bytes(directory: Path) -> tuple[Path, int]:
    """Bytes free to an unprivileged writer on the filesystem that holds (or will hold) ``directory``;
    returns the existing directory that was asked and the bytes."""
    d = Path(directory).absolute()
    while not d.exists() and d != d.parent:
        d = d.parent
    st = os.statvfs(d)
    return d, st.f_bavail * st.f_frsize


def check_free_space(directory: Path, estimate: float, what: str) -> int:
    """Refuse (:class:`InsufficientSpaceError`: bytes needed, bytes free, the directory) when the
    filesystem of ``directory`` has less free than ``estimate`` plus the margin; returns bytes free."""
    where, free = free_bytes(directory)
    need = needed_bytes(estimate)
    if free < need:
        raise InsufficientSpaceError(str(Path(directory).absolute() if Path(directory).exists() else where),
                                     need, free, what)
    return free
