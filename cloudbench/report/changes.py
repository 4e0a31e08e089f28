"""``cloudbench compare DIR --changes``: what changed over a scheduled campaign, and when.

Every run's per-repetition values (``summaries.parquet``) become one series per (workload,
metric, group), each value at the middle of its repetition's trials (UTC, from the manifest),
as ``cloudbench diurnal`` reads them; each run is reduced to one value per series (the median
of its repetitions: the run is the unit). :func:`cloudbench.analysis.changes.find_changes`
removes a time-of-day sinusoid at the schedule's day (fitted with the best single step) from
every series whose runs cover that day, and searches the rest for change points;
:func:`~cloudbench.analysis.changes.holm_gate` adjusts over the series (Holm). The result
(:class:`ChangesResult`) serializes itself (``--json``, :meth:`ChangesResult.to_json`) and is
drawn as a terminal table from that document.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from cloudbench.analysis.changes import MIN_RUNS, Change, SeriesChanges, find_changes_holm
from cloudbench.analysis.compare import Threshold
from cloudbench.analysis.diurnal import run_values
from cloudbench.core.blocks import print_line
from cloudbench.core.files import utc_stamp
from cloudbench.core.tables import titled_table
from cloudbench.core.units import unit_name
from cloudbench.errors import AnalysisError, UsageError
from cloudbench.report.confirm import fmt_value
from cloudbench.report.diurnal import schedule_of, value_times
from cloudbench.report.threshold import parse_threshold, threshold_in
from cloudbench.store.rundir import RunDir, find_runs
from cloudbench.store.summaries import read_summaries

ALPHA = 0.05


def size_text(c: ChangeJSON, sep: str = ", ", unit_sep: str = " ") -> tuple[str, str]:
    """A change's size and its 95 % interval as text: relative to the level before when it has
    one, else the difference in the series' unit. The terminal table passes no spaces (its
    cells wrap at spaces); the page keeps them."""
    if c["size"] is not None and (ci := c["size_ci"]) is not None:
        return f"{c['size']:+.1%}", f"[{ci[0]:+.1%}{sep}{ci[1]:+.1%}]"
    return f"{c['diff']:+.4g}{unit_sep}{unit_name(c['unit'])}", f"[{c['diff_ci'][0]:+.4g}{sep}{c['diff_ci'][1]:+.4g}]"


def _pair(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [float(ci[0]), float(ci[1])]


def _tuple(ci: list[float] | None) -> tuple[float, float] | None:
    return None if ci is None else (ci[0], ci[1])


class ChangeJSON(TypedDict):
    """One change point of ``compare --changes --json``."""

    workload: str
    metric: str
    group: str
    unit: str
    time_utc: str
    previous_run_utc: str
    size: float | None
    size_ci: list[float] | None
    diff: float
    diff_ci: list[float]
    level_before: float
    level_after: float
    n_before: int
    n_after: int
    p: float
    p_holm: float | None


@dataclass(frozen=True)
class ChangeRow:
    """One change point of a series as the result lists it: the series' key and unit, the
    change's times as UTC stamps (the first run at the new level, the last at the old one)."""

    workload: str
    metric: str
    group: str
    unit: str
    time_utc: str
    previous_run_utc: str
    size: float | None
    size_ci: tuple[float, float] | None
    diff: float
    diff_ci: tuple[float, float]
    level_before: float
    level_after: float
    n_before: int
    n_after: int
    p: float
    p_holm: float | None

    @classmethod
    def of(cls, key: tuple[str, str, str], unit: str, c: Change) -> ChangeRow:
        """The row of change ``c`` of series ``key``."""
        return cls(key[0], key[1], key[2], unit, utc_stamp(c.time_utc), utc_stamp(c.previous_utc), c.size,
                   c.size_ci, c.diff, c.diff_ci, c.level_before, c.level_after, c.n_before, c.n_after, c.p,
                   c.p_holm)

    def to_json(self) -> ChangeJSON:
        """The change as ``--json`` gives it."""
        return {"workload": self.workload, "metric": self.metric, "group": self.group, "unit": self.unit,
                "time_utc": self.time_utc, "previous_run_utc": self.previous_run_utc,
                "size": self.size, "size_ci": _pair(self.size_ci), "diff": self.diff,
                "diff_ci": [float(self.diff_ci[0]), float(self.diff_ci[1])],
                "level_before": self.level_before, "level_after": self.level_after, "n_before": self.n_before,
                "n_after": self.n_after, "p": self.p, "p_holm": self.p_holm}

    @classmethod
    def from_json(cls, doc: ChangeJSON) -> ChangeRow:
        """The change back from :meth:`to_json`."""
        return cls(doc["workload"], doc["metric"], doc["group"], doc["unit"], doc["time_utc"],
                   doc["previous_run_utc"], doc["size"], _tuple(doc["size_ci"]), doc["diff"],
                   (doc["diff_ci"][0], doc["diff_ci"][1]), doc["level_before"], doc["level_after"], doc["n_before"],
                   doc["n_after"], doc["p"], doc["p_holm"])


class SeriesJSON(TypedDict):
    """One series searched, in ``compare --changes --json``."""

    workload: str
    metric: str
    group: str
    unit: str
    n_runs: int
    p_first: float | None
    changes: int
    small: int
    time_of_day_removed: bool
    diurnal_p: float | None
    ar1_phi: float | None
    notes: list[str]
    run_values: list[list[float]]


@dataclass(frozen=True)
class SeriesRow:
    """One series searched: its runs, the p-value of its first split (None: not searched), the
    changes listed and the significant ones within the threshold (``small``), whether a
    time-of-day sinusoid was removed first (with the diurnal test's p), the AR(1) coefficient."""

    workload: str
    metric: str
    group: str
    unit: str
    n_runs: int
    p_first: float | None
    changes: int
    small: int
    time_of_day_removed: bool
    diurnal_p: float | None
    ar1_phi: float | None
    notes: tuple[str, ...]
    run_values: tuple[tuple[float, float], ...] = ()  # (UTC epoch s, value) per run; series with changes only

    @classmethod
    def of(cls, key: tuple[str, str, str], unit: str, s: SeriesChanges, listed: int, significant: int,
           runs: tuple[tuple[float, float], ...] = ()) -> SeriesRow:
        """The row of series ``key`` searched as ``s``: ``listed`` changes beyond the threshold of
        ``significant`` ones; ``runs``: its run values (for the page's figure)."""
        return cls(key[0], key[1], key[2], unit, s.n, s.first_p, listed, significant - listed, s.deseasonalized,
                   s.diurnal_p, s.phi, tuple(s.notes), runs)

    def to_json(self) -> SeriesJSON:
        """The series as ``--json`` gives it."""
        return {"workload": self.workload, "metric": self.metric, "group": self.group, "unit": self.unit,
                "n_runs": self.n_runs, "p_first": self.p_first, "changes": self.changes, "small": self.small,
                "time_of_day_removed": self.time_of_day_removed, "diurnal_p": self.diurnal_p,
                "ar1_phi": self.ar1_phi, "notes": list(self.notes),
                "run_values": [[float(t), float(v)] for t, v in self.run_values]}

    @classmethod
    def from_json(cls, doc: SeriesJSON) -> SeriesRow:
        """The series back from :meth:`to_json`."""
        return cls(doc["workload"], doc["metric"], doc["group"], doc["unit"], doc["n_runs"], doc["p_first"],
                   doc["changes"], doc["small"], doc["time_of_day_removed"], doc["diurnal_p"], doc["ar1_phi"],
                   tuple(doc["notes"]), tuple((p[0], p[1]) for p in doc.get("run_values", [])))


class ChangesJSON(TypedDict):
    """``compare DIR --changes --json``."""

    path: str
    alpha: float
    threshold: str
    runs: int
    day_s: float | None
    unit_of_analysis: str
    method: str
    changes: list[ChangeJSON]
    series: list[SeriesJSON]
    notes: list[str]


METHOD = ("binary segmentation, CUSUM test with an AR(1) long-run variance over runs; the first split's "
          "p-value from an AR sieve bootstrap of the search; Holm over series")


@dataclass(frozen=True)
class ChangesResult:
    """What changed over a campaign (:func:`changes_result`): the changes beyond the threshold,
    every series searched, and notes on what was not searched or not removed. The unit of
    analysis is the run."""

    path: str
    alpha: float
    threshold: str
    runs: int
    day_s: float | None
    changes: tuple[ChangeRow, ...]
    series: tuple[SeriesRow, ...]
    notes: tuple[str, ...]
    unit_of_analysis: str = "run"
    method: str = METHOD

    def to_json(self) -> ChangesJSON:
        """``compare DIR --changes --json``."""
        return {"path": self.path, "alpha": self.alpha, "threshold": self.threshold, "runs": self.runs,
                "day_s": self.day_s, "unit_of_analysis": self.unit_of_analysis, "method": self.method,
                "changes": [c.to_json() for c in self.changes], "series": [s.to_json() for s in self.series],
                "notes": list(self.notes)}

    @classmethod
    def from_json(cls, doc: ChangesJSON) -> ChangesResult:
        """The result back from :meth:`to_json`."""
        return cls(doc["path"], doc["alpha"], doc["threshold"], doc["runs"], doc["day_s"],
                   tuple(ChangeRow.from_json(c) for c in doc["changes"]),
                   tuple(SeriesRow.from_json(s) for s in doc["series"]), tuple(doc["notes"]),
                   doc["unit_of_analysis"], doc["method"])


def _stamp(t: float | None) -> str:
    return "(open)" if t is None else utc_stamp(t)


def _matters(c: Change, unit: str, threshold: Threshold) -> bool:
    """Beyond ±threshold, as compare's better/worse: relative on the size (the difference when
    the level before is not positive), absolute on the difference in the series' unit."""
    if threshold.relative:
        return abs(c.size) > threshold.value if c.size is not None else abs(c.diff) > 0
    band = threshold_in(threshold, unit)
    return band is None or abs(c.diff) > band


@dataclass
class _Read:
    """The selected series' points (UTC time, value, run index) as read from the runs."""

    series: dict[tuple[str, str, str], list[tuple[float, float, int]]]
    units: dict[tuple[str, str, str], str]
    day: float | None  # the schedule's day
    windowed_out: int  # values outside the --since/--until window
    in_window: set[int]  # the runs with a value in it


def _read_series(runs: Sequence[RunDir], workloads: Sequence[str], metrics: Sequence[str], groups: Sequence[str],
                 since: float | None, until: float | None) -> _Read:
    series: dict[tuple[str, str, str], list[tuple[float, float, int]]] = defaultdict(list)
    units: dict[tuple[str, str, str], str] = {}
    day: float | None = None
    windowed_out = 0
    in_window: set[int] = set()
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
            if (since is not None and at < since) or (until is not None and at >= until):
                windowed_out += 1
                continue
            series[key].append((at, float(cols["value"][i]), index))
            in_window.add(index)
            units[key] = cols["unit"][i]
    return _Read(series, units, day, windowed_out, in_window)


def changes(path: str | Path, *, workloads: Sequence[str] = (), metrics: Sequence[str] = (),
            groups: Sequence[str] = (), alpha: float = ALPHA, threshold: Threshold | str = "5%",
            since: float | None = None, until: float | None = None) -> ChangesJSON:
    """``compare DIR --changes --json``: :meth:`ChangesResult.to_json` of :func:`changes_result`."""
    return changes_result(path, workloads=workloads, metrics=metrics, groups=groups, alpha=alpha,
                          threshold=threshold, since=since, until=until).to_json()


def changes_result(path: str | Path, *, workloads: Sequence[str] = (), metrics: Sequence[str] = (),
                   groups: Sequence[str] = (), alpha: float = ALPHA,
                   threshold: Threshold | str = "5%", since: float | None = None,
                   until: float | None = None) -> ChangesResult:
    """The change points of every selected series of the runs under ``path`` (a campaign):
    Holm-significant and beyond ``threshold`` (as compare's better/worse; the significant
    ones within it are counted per series as ``small``). ``since``/``until`` (UTC epoch s):
    only repetitions measured in ``[since, until)``."""
    th = parse_threshold(threshold) if isinstance(threshold, str) else threshold
    path = Path(path)
    if not path.is_dir():
        raise AnalysisError(f"{path}: not a directory (give a campaign directory: results/<campaign>)")
    runs = find_runs(path)
    read = _read_series(runs, workloads, metrics, groups, since, until)
    series, units, day, windowed_out, in_window = read.series, read.units, read.day, read.windowed_out, read.in_window
    if not series and windowed_out:
        raise UsageError(f"{path}: no repetition was measured in the window given by --since/--until "
                         f"({_stamp(since)} .. {_stamp(until)} UTC)")
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
    out_changes = tuple(ChangeRow.of(k, units[k], c) for k in keys for c in kept[k])
    # the run values of the series with a change listed: the page draws them (one per run: small)
    out_series = tuple(SeriesRow.of(k, units[k], s, len(kept[k]), len(g.changes),
                                    tuple(zip(pr[0].tolist(), pr[1].tolist(), strict=True)) if kept[k] else ())
                       for k, s, g, pr in zip(keys, found, gated, per_run, strict=True))
    short = [k for k, s in zip(keys, found, strict=True) if s.n < MIN_RUNS]
    notes = []
    if since is not None or until is not None:
        notes.append(f"repetitions measured from {_stamp(since)} to {_stamp(until)} (UTC) only "
                     "(--since/--until)")
    if short:
        notes.append(f"{len(short)} series with fewer than {MIN_RUNS} runs: not searched")
    if day is None:
        notes.append("no schedule in the manifests: no time-of-day effect removed")
    elif period is None:
        notes.append("the runs cover less than the schedule's day: no time-of-day effect removed")
    small = sum(len(g.changes) - len(kept[k]) for k, g in zip(keys, gated, strict=True))
    if small:
        notes.append(f"{small} significant change(s) within ±{th.text()} not listed (--threshold)")
    n_runs = len(in_window) if since is not None or until is not None else len(runs)
    return ChangesResult(str(path), alpha, th.text(), n_runs, day, out_changes, out_series, tuple(notes))


def render_changes(res: ChangesJSON, console: Console) -> None:
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
            u = unit_name(c["unit"])  # no space before it: the table wraps cells at spaces
            size, ci = size_text(c, sep=",", unit_sep="")
            table.add_row(escape(f"{c['workload']}:{c['metric']}" if several else c["metric"]), escape(c["group"]),
                          c["time_utc"], fmt_value(c["level_before"]) + u,
                          fmt_value(c["level_after"]) + u, size, ci, f"{c['p_holm']:.2g}")
        console.print(table)
        print_line(console, Text("since: the first run at the new level (the change happened after the run "
                                 "before it); size: level after / level before - 1 between the neighbouring "
                                 "changes, with its 95% interval; where the runs cover the schedule's day, a "
                                 "time-of-day sinusoid (fitted with the best single step) is removed first, "
                                 "whether or not `diurnal` finds one.", style="dim"))
    for n in res["notes"]:
        print_line(console, f"[yellow]note:[/] {escape(n)}", hang=len("note: "))
