"""``cloudbench compare DIR --changes``: what changed over a scheduled campaign, and when.

Every run's per-repetition values (``summaries.parquet``) become one series per (workload,
metric, group), each value at the middle of its repetition's trials (UTC, from the manifest),
as ``cloudbench diurnal`` reads them; each run is reduced to one value per series (the median
of its repetitions: the run is the unit). :func:`cloudbench.analysis.changes.find_changes`
removes a time-of-day sinusoid at the schedule's day when the diurnal test finds one and
searches the rest for change points; :func:`~cloudbench.analysis.changes.holm_gate` adjusts
over the series (Holm). The result is a dict (``--json``) and a terminal table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape

from cloudbench.analysis.changes import MIN_RUNS, Change, find_changes_holm
from cloudbench.analysis.compare import Threshold
from cloudbench.analysis.diurnal import run_values
from cloudbench.core.files import utc_stamp
from cloudbench.core.tables import titled_table
from cloudbench.errors import AnalysisError
from cloudbench.report.confirm import fmt_value
from cloudbench.report.diurnal import schedule_of, value_times
from cloudbench.report.threshold import parse_threshold, threshold_in
from cloudbench.store.rundir import find_runs
from cloudbench.store.summaries import read_summaries

ALPHA = 0.05


def _unit(unit: str) -> str:
    return unit  # no space: the table wraps cells at spaces


def _pair(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [float(ci[0]), float(ci[1])]


def change_dict(key: tuple[str, str, str], unit: str, c: Change) -> dict[str, Any]:
    """One change as ``--json`` gives it."""
    return {"workload": key[0], "metric": key[1], "group": key[2], "unit": unit,
            "time_utc": utc_stamp(c.time_utc), "previous_run_utc": utc_stamp(c.previous_utc),
            "size": c.size, "size_ci": _pair(c.size_ci), "diff": c.diff, "diff_ci": _pair(c.diff_ci),
            "level_before": c.level_before, "level_after": c.level_after, "n_before": c.n_before,
            "n_after": c.n_after, "p": c.p, "p_holm": c.p_holm}


def _matters(c: Change, unit: str, threshold: Threshold) -> bool:
    """Beyond ±threshold, as compare's better/worse: relative on the size (the difference when
    the level before is not positive), absolute on the difference in the series' unit."""
    if threshold.relative:
        return abs(c.size) > threshold.value if c.size is not None else abs(c.diff) > 0
    band = threshold_in(threshold, unit)
    return band is None or abs(c.diff) > band


def changes(path: str | Path, *, workloads: Sequence[str] = (), metrics: Sequence[str] = (),
            groups: Sequence[str] = (), alpha: float = ALPHA, threshold: Threshold | str = "5%") -> dict[str, Any]:
    """The change points of every selected series of the runs under ``path`` (a campaign):
    Holm-significant and beyond ``threshold`` (as compare's better/worse; the significant
    ones within it are counted per series as ``small``)."""
    th = parse_threshold(threshold) if isinstance(threshold, str) else threshold
    path = Path(path)
    if not path.is_dir():
        raise AnalysisError(f"{path}: not a directory (give a campaign directory: results/<campaign>)")
    runs = find_runs(path)
    series: dict[tuple[str, str, str], list[tuple[float, float, int]]] = defaultdict(list)
    units: dict[tuple[str, str, str], str] = {}
    day: float | None = None
    for index, run in enumerate(runs):
        m = run.manifest()
        sched = schedule_of(m)
        if sched is not None and day is None:
            day = sched[1]
        times = value_times(m)
        table = read_summaries(run)
        if table.num_rows == 0:
            continue
        # a handful of columns of a small table (one row per repetition and series), not observations
        cols = {c: table.column(c).to_pylist() for c in ("repetition", "workload", "metric", "group", "value",
                                                         "unit")}
        for i in range(table.num_rows):
            key = (cols["workload"][i], cols["metric"][i], cols["group"][i])
            if ((workloads and key[0] not in workloads) or (metrics and key[1] not in metrics)
                    or (groups and key[2] not in groups)):
                continue
            at = times.get((cols["repetition"][i], cols["workload"][i]))
            if at is None or cols["value"][i] is None:
                continue
            series[key].append((at, float(cols["value"][i]), index))
            units[key] = cols["unit"][i]
    if not series:
        what = " matching the --workload/--metric/--group filters" if workloads or metrics or groups else ""
        raise AnalysisError(f"{path}: no run with summaries and trial times{what} to look for changes in")
    keys = sorted(series)
    per_run = []
    for key in keys:
        pts = series[key]
        t, y, _ = run_values(np.array([p[0] for p in pts]), np.array([p[1] for p in pts]),
                             np.array([p[2] for p in pts]))
        per_run.append((t, y))
    span = max(float(t.max() - t.min()) for t, _ in per_run if t.size)
    period = day if day is not None and span >= day else None
    gated = found = find_changes_holm(per_run, period=period, alpha=alpha)
    kept = {k: [c for c in s.changes if _matters(c, units[k], th)] for k, s in zip(keys, gated, strict=True)}
    out_changes = [change_dict(k, units[k], c) for k in keys for c in kept[k]]
    out_series = [{"workload": k[0], "metric": k[1], "group": k[2], "unit": units[k], "n_runs": s.n,
                   "p_first": s.first_p, "changes": len(kept[k]), "small": len(g.changes) - len(kept[k]),
                   "time_of_day_removed": s.deseasonalized,
                   "diurnal_p": s.diurnal_p, "ar1_phi": s.phi, "notes": s.notes}
                  for k, s, g in zip(keys, found, gated, strict=True)]
    short = [k for k, s in zip(keys, found, strict=True) if s.n < MIN_RUNS]
    notes = []
    if short:
        notes.append(f"{len(short)} series with fewer than {MIN_RUNS} runs: not searched")
    if day is None:
        notes.append("no schedule in the manifests: no time-of-day effect removed")
    elif period is None:
        notes.append("the runs cover less than the schedule's day: no time-of-day effect removed")
    small = sum(len(g.changes) - len(kept[k]) for k, g in zip(keys, gated, strict=True))
    if small:
        notes.append(f"{small} significant change(s) within ±{th.text()} not listed (--threshold)")
    return {"path": str(path), "alpha": alpha, "threshold": th.text(), "runs": len(runs), "day_s": day,
            "unit_of_analysis": "run", "method": "binary segmentation, CUSUM test with an AR(1) long-run "
            "variance over runs; Holm over series", "changes": out_changes, "series": out_series,
            "notes": notes}


def render_changes(res: dict[str, Any], console: Console) -> None:
    """The changes as a table (or a line saying there are none)."""
    tested = [s for s in res["series"] if s["p_first"] is not None]
    title = (f"changes in {res['path']}: {len(res['changes'])} in {len(tested)} series searched "
             f"({res['runs']} runs; one value per run)")
    if not res["changes"]:
        console.print(escape(title), highlight=False)
        console.print(f"no change point (CUSUM test per series, Holm-adjusted p < {res['alpha']:g}, "
                      f"beyond ±{res['threshold']})",
                      highlight=False)
    else:
        several = len({c["workload"] for c in res["changes"]}) > 1
        table = titled_table(title, ("metric", "group", "since (UTC)", "before", "after", "size", "95% CI",
                                     "p (Holm)"), left=("metric", "group", "since (UTC)"), key=2)
        for c in res["changes"]:
            u = _unit(c["unit"])
            if c["size"] is not None:
                size, ci = f"{c['size']:+.1%}", f"[{c['size_ci'][0]:+.1%},{c['size_ci'][1]:+.1%}]"
            else:
                size, ci = f"{c['diff']:+.4g}{u}", f"[{c['diff_ci'][0]:+.4g},{c['diff_ci'][1]:+.4g}]"
            table.add_row(escape(f"{c['workload']}:{c['metric']}" if several else c["metric"]), escape(c["group"]),
                          c["time_utc"], fmt_value(c["level_before"]) + u,
                          fmt_value(c["level_after"]) + u, size, ci, f"{c['p_holm']:.2g}")
        console.print(table)
        console.print("since: the first run at the new level (the change happened after the run before it); "
                      "size: level after / level before - 1 between the neighbouring changes, with its 95% "
                      "interval; a time-of-day sinusoid is removed first where `diurnal` finds one.",
                      highlight=False, style="dim")
    for n in res["notes"]:
        console.print(f"[yellow]note:[/] {escape(n)}", highlight=False)
