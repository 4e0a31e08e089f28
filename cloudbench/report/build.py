"""The report of one run: what ran and whether it can be trusted, then a section per workload.

Each workload's section comes from its kind (:meth:`WorkloadKind.report_section`);
this module adds the frame: status, repetitions, damaged files, failures.
"""

from __future__ import annotations

from typing import Any

from cloudbench.errors import ResultError
from cloudbench.store import formats
from cloudbench.store.rundir import RunDir
from cloudbench.workloads import workload_kind


def build_report(run: RunDir) -> dict[str, Any]:
    """The report of ``run`` as plain JSON values (what ``report.json`` holds)."""
    manifest = run.manifest()
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
        "damaged": run.verify(),
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
    return rep
