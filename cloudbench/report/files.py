"""The report on disk: ``report/report.json`` (versioned, atomic), a CSV per table, figures."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from cloudbench.core.files import write_atomic
from cloudbench.core.tables import write_csv
from cloudbench.errors import ResultError
from cloudbench.store import formats
from cloudbench.store.rundir import RunDir

REPORT_DIR = "report"
CONFIRM_DIR = "confirm"
"""Where `cloudbench confirm` writes confirm.json and its figures, under the campaign (or run) directory."""
REPORT_JSON = "report.json"


def write_report(run: RunDir, report: dict[str, Any], out: Path | None = None) -> list[Path]:
    """``report.json``, a CSV per table of every section and the sections' figures; the paths written.

    ``report.json`` is stamped with the current version and replaced atomically.
    """
    # the workload kinds (every kind's controller, scipy and asyncssh with them) load with a report to
    # write, not with the names above, which `cloudbench confirm` imports
    from cloudbench.workloads import workload_kind  # noqa: PLC0415

    current = formats.REPORT.current
    if report.get("schema", current) != current:
        raise ValueError(f"write_report writes report.json version {current}, not {report['schema']!r}")
    out = out or run.path / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    doc = {"schema": current, **report}
    write_atomic(out / REPORT_JSON, lambda f: f.write(report_json_bytes(doc)))
    written = [out / REPORT_JSON]
    for wname, w in report["workloads"].items():
        kind = workload_kind(w["kind"])
        for table in kind.report_tables:
            path = out / f"{wname}_{table}.csv"
            if write_csv(path, w.get(table) or []):
                written.append(path)
        written += kind.write_figures(run, wname, w, out)
    return written


def read_report(path: Path) -> dict[str, Any]:
    """A ``report.json`` written by this or an older cloudbench, migrated to the current version.

    Versions are :data:`cloudbench.store.formats.REPORT`; an unknown one, or a file
    that is not a report, is a :class:`ResultError` naming ``path``.
    """
    try:
        data = json.loads(path.read_bytes())  # UTF-8 (orjson writes µ as itself), whatever the locale
    except (OSError, json.JSONDecodeError) as e:
        raise ResultError(str(path), f"not a readable report.json: {e}") from e
    if not isinstance(data, dict):
        raise ResultError(str(path), "report.json is not a JSON object")
    version = formats.REPORT.check(data.get("schema", 1), str(path))  # version 1 had no key
    if not isinstance(data.get("workloads"), dict):
        raise ResultError(str(path), "report.json has no 'workloads' object")
    if version == 1 and not isinstance(data.get("paths", {}), dict):
        raise ResultError(str(path), "report.json (version 1) has a 'paths' that is not an object")
    report: dict[str, Any] = data
    while version < formats.REPORT.current:
        report = MIGRATIONS[version](report)
        version = report["schema"]
    return report


def migrate_report_1(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 (unversioned, top-level ``paths`` of traceroute sections) as version 2.

    Every section moves under ``workloads``; version 1 wrote the traceroute
    sections after the others, so they come last. ``data`` is not changed.
    """
    rest = {k: v for k, v in data.items() if k not in ("schema", "paths")}
    return {"schema": 2, **rest, "workloads": {**data["workloads"], **data.get("paths", {})}}


def migrate_report_2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 as version 3: the report's warnings, computed from its sections as the terminal
    prints them (:func:`~cloudbench.report.render.report_views`), under ``warnings``. ``data`` is not
    changed."""
    from cloudbench.report.render import report_views  # noqa: PLC0415 - see write_report

    return {**data, "schema": 3, "warnings": report_views(data).warnings()}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: migrate_report_1, 2: migrate_report_2}
"""Version -> the function that turns a report of that version into the next one."""


REPORT_JSON_OPTIONS = (orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS
                       | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_PASSTHROUGH_DATETIME
                       | orjson.OPT_PASSTHROUGH_DATACLASS)
"""orjson's options for report.json: indented as ``json.dump(to_json(report), indent=2, default=str)``
wrote it, dates and dataclasses left to ``str`` as before, numpy's numbers and arrays as numbers."""


def report_json_bytes(report: dict[str, Any]) -> bytes:
    """``report`` as report.json's bytes (UTF-8): the values of ``json.dumps(to_json(report),
    indent=2, default=str)``, NaN and infinities as null, by orjson (its C encoder). The
    standard library's encoder takes its Python path when it indents: 0.7 s of CPU for the
    138 M-observation run's 18 MB, against 0.03 s."""
    return orjson.dumps(report, default=str, option=REPORT_JSON_OPTIONS)


def to_json(x: Any) -> Any:
    """A report as strict JSON values: NaN and infinities (which JSON lacks) become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: to_json(v) for k, v in x.items()}
    if isinstance(x, list):
        return [to_json(v) for v in x]
    return x
