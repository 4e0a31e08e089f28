"""The report of one run: what ran and whether it can be trusted, then a section per workload.

Each workload's section comes from its kind (:meth:`WorkloadKind.report_section`);
this module adds the frame: status, repetitions, damaged files, failures.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from cloudbench.errors import AnalysisError, ResultError, UsageError
from cloudbench.report.render import report_views
from cloudbench.store import formats
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir, find_runs
from cloudbench.workloads import workload_kind


def build_report(run: RunDir) -> dict[str, Any]:
    """The report of ``run`` as plain JSON values (what ``report.json`` holds)."""
    manifest = run.manifest()
    with ThreadPoolExecutor(1) as pool:
        # the files' checksums (hashlib lets other threads run) beside the workloads' scans
        damaged = pool.submit(run.verify)
        rep = _report_of(run, manifest)
    rep["damaged"] = damaged.result()
    # every warning the terminal and the page print, for programs that read report.json
    rep["warnings"] = report_views(rep).warnings()
    return rep


def _report_of(run: RunDir, manifest: Manifest) -> dict[str, Any]:
    """The report but its checksums and warnings."""
    rep: dict[str, Any] = {
        "schema": formats.REPORT.current,
        "campaign": manifest.campaign,
        "run_id": manifest.run_id,
        "status": manifest.status,
        "started_utc": manifest.started_utc,
        "ended_utc": manifest.ended_utc,
        "seed": manifest.seed,
        "repetitions": len(manifest.repetitions),
        # files changed or lost since the run wrote them (checksums in the manifest)
        "damaged": None,  # filled in by build_report when the checksums are done
        # hosts that failed a trial, and hosts a repetition could not deploy to (no trial ran)
        "failures": [
            *({"trial": f"r{r.index:03d}-deploy", **f.model_dump()} for r in manifest.repetitions
              for f in r.failures),
            *({"trial": t.id, **f.model_dump()} for t in manifest.trials for f in t.failures),
        ],
        "workloads": {},
    }
    for w in manifest.workloads():
        try:
            kind = workload_kind(w["kind"])
        except KeyError:
            raise ResultError(str(run.manifest_path), f"workload {w['name']!r} is of kind {w['kind']!r}, "
                              "unknown to this cloudbench; upgrade cloudbench to report it") from None
        rep["workloads"][w["name"]] = kind.report_section(run, manifest, w)
    tod = time_of_day_section(run)
    if tod is not None:
        rep["time_of_day"] = tod
    return rep


def time_of_day_section(run: RunDir) -> dict[str, Any] | None:
    """For a run of a scheduled campaign: the campaign's time-of-day verdict so far (its
    runs beside this one, `cloudbench diurnal` over the schedule's day); None otherwise."""
    if not run.manifest().spec.get("schedule"):  # a one-shot run (schedule_of's test, without importing it)
        return None
    # the time-of-day analysis (scipy's fits) loads only for a scheduled campaign's run
    from cloudbench.report.diurnal import MIN_VALUES, diurnal, schedule_of  # noqa: PLC0415

    sched = schedule_of(run.manifest())
    if sched is None or sum(1 for _ in run.path.parent.glob("*/manifest.json")) < MIN_VALUES:
        return None
    try:
        res = diurnal(run.path.parent, sched[1])
    except (AnalysisError, ResultError, UsageError):  # UsageError: the runs cover less than a day so far
        return None
    tested = [s for s in res["series"] if s.get("heatmap") is not None]
    shown = [s for s in tested if s.get("significant")] or sorted(
        tested, key=lambda s: s.get("p_holm", 1.0))[:HEATMAPS_SHOWN]
    return {"period_s": res["period_s"], "timezone": res["timezone"], "runs": res["runs"],
            "verdict": res["verdict"],
            "significant": [{k: s[k] for k in ("workload", "metric", "group", "p_holm")}
                            | {"amplitude": s.get("amplitude_at_period"), "unit": s["unit"]}
                            for s in res["series"] if s.get("significant")],
            # weekday (Mon..Sun) × hour in the campaign's time zone: the median value of each
            # series shown (its significant ones, else the closest to it), and the runs per cell
            "heatmaps": [{k: s.get(k) for k in ("workload", "metric", "group", "unit", "p_holm", "significant",
                                                "heatmap")} for s in shown[:HEATMAPS_SHOWN]],
            "coverage": run_coverage(run.path.parent, res["timezone"], sched[1])}


HEATMAPS_SHOWN = 4


def run_coverage(campaign: Path, timezone: str, day: float = 86400.0) -> list[list[int]]:
    """Runs of a campaign started in each weekday (Mon..Sun) × hour cell of ``timezone``
    (days of ``day`` seconds: the cells of the heat maps, a compressed day's included)."""
    from cloudbench.report.diurnal import weekday_hour  # noqa: PLC0415 - see time_of_day_section

    starts = [m.started_utc for m in (r.manifest() for r in find_runs(campaign)) if m.started_utc]
    grid = np.zeros((7, 24), dtype=np.int64)
    np.add.at(grid, weekday_hour([datetime.fromisoformat(s).timestamp() for s in starts], timezone, day), 1)
    return [[int(n) for n in row] for row in grid]
