"""`cloudbench diurnal`: the time-of-day analysis of a campaign's runs.

Every workload's per-repetition values (``summaries.parquet``: RTT p50/p99 per
latency group, throughput per pair, drain parameters, …) become one series per
(workload, metric, group), each value placed at the middle of its repetition's
trials of that workload (UTC, from the manifest), in the time zone of the spec's
``schedule:`` (UTC for a compressed day), labelled with its run. Each series goes
through :func:`cloudbench.analysis.diurnal.diurnal_series`, which reduces each run
to one value first (the run is the unit of time), with the schedule's day as the
day of its weekdays. The period defaults to that day; a period longer than the
runs cover is refused. Each of the three p-values (the sinusoid at the period,
Kruskal–Wallis, weekday/weekend) is adjusted over the series with Holm's method
(statsmodels ``multipletests``); the verdict rests on the sinusoid test alone, so
a campaign of many series finds an effect by chance in at most α of campaigns.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypedDict, cast
from zoneinfo import ZoneInfo

import numpy as np
from numpy.typing import NDArray
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from cloudbench.analysis.diurnal import DiurnalSeries, DiurnalSeriesJSON, diurnal_series, phase_bins, weekdays
from cloudbench.core.blocks import print_line
from cloudbench.core.tables import natural_key, titled_table
from cloudbench.core.units import fmt_duration, fmt_quantity, natural_unit, parse_duration
from cloudbench.errors import AnalysisError, UsageError
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir, find_runs
from cloudbench.store.summaries import read_summaries

MIN_VALUES = 6
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _epoch(s: str) -> float:
    return datetime.fromisoformat(s).timestamp()


def utc_offsets(t: NDArray[np.float64], timezone: str) -> NDArray[np.float64]:
    """Seconds east of UTC of ``timezone`` at each UTC epoch time ``t``."""
    if timezone == "UTC":
        return np.zeros_like(t)
    zone = ZoneInfo(timezone)
    return np.array([(datetime.fromtimestamp(x, zone).utcoffset() or timedelta(0)).total_seconds() for x in t])


def weekday_hour(t: NDArray[np.float64] | list[float], timezone: str,
                 day: float = 86400.0) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(weekday 0=Monday, hour) of each UTC epoch time in ``timezone``, days of ``day`` seconds.

    The cells of the heat maps, of the report's coverage grid and of `campaign status`
    (a compressed day: ``timezone`` UTC, days counted from the epoch)."""
    t = np.asarray(t, dtype=np.float64)
    off = utc_offsets(t, timezone)
    return weekdays(t, off, day), phase_bins(t, off, day)


def value_times(m: Manifest) -> dict[tuple[int, str], float]:
    """(repetition, workload) -> UTC epoch seconds of the middle of its measured trials."""
    spans: dict[tuple[int, str], list[float]] = defaultdict(list)
    for t in m.trials:
        if t.status in ("ok", "partial") and t.started_utc and t.ended_utc:
            spans[(t.repetition, t.workload)] += [_epoch(t.started_utc), _epoch(t.ended_utc)]
    out = {k: (min(v) + max(v)) / 2 for k, v in spans.items()}
    for r in m.repetitions:  # a workload without trial times: the repetition's start
        if r.started_utc:
            for w in m.workloads():
                out.setdefault((r.index, str(w.get("name", w.get("kind")))), _epoch(r.started_utc))
    return out


def schedule_of(m: Manifest) -> tuple[str, float] | None:
    """(time zone, day length) of a run of a scheduled campaign; None for a one-shot run."""
    sched = m.spec.get("schedule") or None
    if not sched:
        return None
    day = float(sched.get("day", 86400.0))
    return ("UTC" if abs(day - 86400.0) > 1e-6 else str(sched.get("timezone", "UTC"))), day


def repetition_hours(path: Path) -> dict[tuple[str, int, str], int]:
    """(run id, repetition, workload) -> hour of the (local, possibly compressed) day it was measured."""
    out: dict[tuple[str, int, str], int] = {}
    for run in find_runs(Path(path)):
        m = run.manifest()
        tz, day = schedule_of(m) or ("UTC", 86400.0)
        times = value_times(m)
        _, hours = weekday_hour(list(times.values()), tz, day)
        for (rep, workload), hour in zip(times, hours, strict=True):
            out[(run.run_id, rep, workload)] = int(hour)
    return out


def time_of_day_notes(path: Path, keys: set[tuple[str, str, str]], alpha: float = 0.05) -> list[str]:
    """Warnings for ``cloudbench confirm``: series of a scheduled campaign whose runs show a
    significant time-of-day effect (pooling them mixes hours)."""
    runs = find_runs(Path(path))
    scheds = [s for s in (schedule_of(r.manifest()) for r in runs) if s is not None]
    if not scheds:
        return []
    try:
        res = diurnal(path, scheds[0][1], alpha=alpha)
    except (AnalysisError, UsageError):  # no summaries yet, or less than one day of runs
        return []
    out = []
    for r in res["series"]:
        if r.get("significant") and (r["workload"], r["metric"], r["group"]) in keys:
            amp = r["amplitude_at_period"]
            out.append(f"time-of-day effect in {r['workload']} {r['metric']} {r['group']} (Holm p = "
                       f"{r['p_holm']:.2g}, amplitude {fmt_quantity(amp, r['unit'], digits=3)}): these runs mix "
                       "hours of the day; `cloudbench diurnal` shows it, `confirm --hour H` pools within one hour")
    return out


class SeriesKeyJSON(TypedDict):
    """What a series of ``diurnal --json`` is: workload, metric, group, and the metric's unit."""

    workload: str
    metric: str
    group: str
    unit: str


class SeriesRowJSON(SeriesKeyJSON, DiurnalSeriesJSON, total=False):
    """One series of ``diurnal --json``: its key, then ``skipped`` or the analysis's numbers, then
    the Holm-adjusted p-values of the tests it ran. A skipped row holds only its key, ``n``,
    ``n_values`` and ``skipped`` (test ``"skipped" in row`` before reading the analysis's keys)."""

    skipped: str
    p_holm: float
    significant: bool
    kruskal_p_holm: float
    mw_p_holm: float


class DiurnalJSON(TypedDict):
    """``diurnal --json``: the campaign's time-of-day analysis."""

    path: str
    period_s: float
    day_s: float
    timezone: str
    runs: int
    covered_s: float
    alpha: float
    power: float
    verdict: str
    series: list[SeriesRowJSON]


_HOLM = (("p_at_period", "p_holm"), ("kruskal_p", "kruskal_p_holm"), ("mw_p", "mw_p_holm"))


@dataclass
class SeriesRow:
    """One series of the campaign: skipped (too few runs) or analysed, with its Holm-adjusted
    p-values (None for a test that did not run)."""

    workload: str
    metric: str
    group: str
    unit: str
    n: int
    n_values: int
    skipped: str | None = None
    analysis: DiurnalSeries | None = None
    p_holm: float | None = None
    significant: bool | None = None
    kruskal_p_holm: float | None = None
    mw_p_holm: float | None = None

    def to_json(self) -> SeriesRowJSON:
        """The row of ``diurnal --json``: the key, ``skipped`` or the analysis, the adjusted p-values."""
        key = {"workload": self.workload, "metric": self.metric, "group": self.group, "unit": self.unit,
               "n": self.n, "n_values": self.n_values}
        doc = cast(SeriesRowJSON, key if self.analysis is None else {**key, **self.analysis.to_json()})
        if self.skipped is not None:
            doc["skipped"] = self.skipped
        if self.p_holm is not None:
            doc["p_holm"] = self.p_holm
            doc["significant"] = bool(self.significant)
        if self.kruskal_p_holm is not None:
            doc["kruskal_p_holm"] = self.kruskal_p_holm
        if self.mw_p_holm is not None:
            doc["mw_p_holm"] = self.mw_p_holm
        return doc

    @classmethod
    def from_json(cls, doc: SeriesRowJSON) -> SeriesRow:
        """The row back from :meth:`to_json`."""
        analysis = None if "skipped" in doc else DiurnalSeries.from_json(doc)
        return cls(doc["workload"], doc["metric"], doc["group"], doc["unit"], doc["n"], doc["n_values"],
                   doc.get("skipped"), analysis, doc.get("p_holm"), doc.get("significant"),
                   doc.get("kruskal_p_holm"), doc.get("mw_p_holm"))


@dataclass
class DiurnalResult:
    """The time-of-day analysis of a campaign's runs (:func:`diurnal`)."""

    path: str
    period_s: float
    day_s: float
    timezone: str
    runs: int
    covered_s: float
    alpha: float
    power: float
    verdict: str
    series: list[SeriesRow]

    def to_json(self) -> DiurnalJSON:
        """``diurnal --json``."""
        return {"path": self.path, "period_s": self.period_s, "day_s": self.day_s, "timezone": self.timezone,
                "runs": self.runs, "covered_s": self.covered_s, "alpha": self.alpha, "power": self.power,
                "verdict": self.verdict, "series": [r.to_json() for r in self.series]}

    @classmethod
    def from_json(cls, doc: DiurnalJSON) -> DiurnalResult:
        """The result back from :meth:`to_json`."""
        return cls(doc["path"], doc["period_s"], doc["day_s"], doc["timezone"], doc["runs"], doc["covered_s"],
                   doc["alpha"], doc["power"], doc["verdict"], [SeriesRow.from_json(r) for r in doc["series"]])


def diurnal(path: Path, period: str | float | None = None, alpha: float = 0.05,
            power: float = 0.8) -> DiurnalJSON:
    """``diurnal --json``: :meth:`DiurnalResult.to_json` of :func:`diurnal_result`."""
    return diurnal_result(path, period, alpha, power).to_json()


def diurnal_result(path: Path, period: str | float | None = None, alpha: float = 0.05,
                   power: float = 0.8) -> DiurnalResult:
    """The analysis of every series of the runs under ``path`` (a campaign directory).

    ``period`` defaults to the schedule's day (``schedule.day``: 24 h, or a compressed day),
    24 h for runs without a schedule; a period longer than the runs cover is refused
    (:class:`UsageError`). Each run is one value per series (its repetitions' median)."""
    if period is not None:
        try:
            period_s = parse_duration(period)
        except ValueError as e:
            raise UsageError(f"--period: {e}") from None
        if period_s <= 0:
            raise UsageError("--period must be positive")
    vals = _run_values(find_runs(Path(path)))
    series, units, tzname, day, used = vals.series, vals.units, vals.tzname, vals.day, vals.used
    first, last = vals.first, vals.last
    if not series:
        raise AnalysisError(f"{path}: no run with summaries and trial times to analyse")
    day_s = day if day is not None else 86400.0
    if period is None:
        period_s = day_s
    covered = last - first
    if period_s > covered:
        src = "--period" if period is not None else ("the schedule's day" if day is not None else
                                                    "the default period")
        raise UsageError(f"{path}: {src} is {fmt_duration(period_s)}, longer than the {fmt_duration(covered)} "
                         f"its {used} runs cover: a time-of-day analysis needs at least one whole period of "
                         "runs (give a shorter --period, or wait for more runs)")
    out: list[SeriesRow] = []
    for key in sorted(series):
        pts = sorted(series[key])
        t = np.array([p[0] for p in pts])
        y = np.array([p[1] for p in pts])
        r = np.array([p[2] for p in pts])
        n_runs = int(np.unique(r).size)
        row = SeriesRow(key[0], key[1], key[2], units[key], n_runs, len(pts))
        if n_runs < MIN_VALUES:
            row.skipped = f"{n_runs} runs (needs {MIN_VALUES})"
        else:
            row.analysis = diurnal_series(t, y, period_s, utc_offsets(t, tzname), alpha, power, run=r, day=day_s)
            row.n, row.n_values = row.analysis.n, row.analysis.n_values
        out.append(row)
    for field, adjusted in _HOLM:
        _holm(out, field, adjusted, alpha)
    verdict = _verdict(out, period_s, alpha, power)
    return DiurnalResult(str(path), period_s, day_s, tzname, used, covered, alpha, power, verdict, out)


@dataclass
class _RunValues:
    """Each series' (time, value, run index) points over a campaign's runs, and what they cover."""

    series: dict[tuple[str, str, str], list[tuple[float, float, int]]]
    units: dict[tuple[str, str, str], str]
    tzname: str
    day: float | None
    used: int
    first: float
    last: float


def _run_values(runs: list[RunDir]) -> _RunValues:
    """The values of every series of ``runs`` at their trials' times (runs without summaries skipped)."""
    series: dict[tuple[str, str, str], list[tuple[float, float, int]]] = defaultdict(list)
    units: dict[tuple[str, str, str], str] = {}
    tzname = "UTC"
    day: float | None = None
    used = 0
    first, last = float("inf"), float("-inf")
    for index, run in enumerate(runs):
        m = run.manifest()
        sched = schedule_of(m)
        if sched is not None:
            tzname = sched[0]
            day = sched[1] if day is None else day
        times = value_times(m)
        table = read_summaries(run)
        if table.num_rows == 0:
            continue
        used += 1
        cols = {c: table.column(c).to_pylist() for c in ("repetition", "workload", "metric", "group", "value",
                                                         "unit")}
        for i in range(table.num_rows):
            at = times.get((cols["repetition"][i], cols["workload"][i]))
            if at is None:
                continue
            key = (cols["workload"][i], cols["metric"][i], cols["group"][i])
            series[key].append((at, float(cols["value"][i]), index))
            units[key] = cols["unit"][i]
            first, last = min(first, at), max(last, at)
        if m.started_utc:
            first = min(first, _epoch(m.started_utc))
        if m.ended_utc:
            last = max(last, _epoch(m.ended_utc))
    return _RunValues(series, units, tzname, day, used, first, last)


def _verdict(out: list[SeriesRow], period_s: float, alpha: float, power: float) -> str:
    """The campaign's time-of-day verdict from the Holm-adjusted series rows."""
    tested = [r for r in out if r.p_holm is not None]
    sig = [r for r in tested if r.significant]
    if sig:
        verdict = (f"time-of-day effect (period {fmt_duration(period_s)}) in {len(sig)} of {len(tested)} series "
                   f"(sinusoid test, Holm-adjusted p < {alpha:g})")
    elif tested:
        verdict = (f"no significant time-of-day effect (period {fmt_duration(period_s)}) in {len(tested)} series; "
                   f"each series' smallest detectable amplitude ({power:.0%} power, alpha {alpha:g}) is given")
    else:
        verdict = "too few runs to test for a time-of-day effect"
    return verdict


def _holm(rows: list[SeriesRow], field: str, adjusted: str, alpha: float) -> None:
    """Holm's adjustment over the series of the analyses' ``field`` into the rows' ``adjusted``
    (statsmodels); the primary test's rejections become ``significant``."""
    from statsmodels.stats.multitest import multipletests  # noqa: PLC0415 - heavy library, only the fits pay for it

    tested = [(r, p) for r in rows if r.analysis is not None and (p := getattr(r.analysis, field)) is not None]
    if not tested:
        return
    reject, adj, _, _ = multipletests([p for _, p in tested], alpha=alpha, method="holm")
    for (r, _), rj, p in zip(tested, reject, adj, strict=True):
        setattr(r, adjusted, float(p))
        if field == "p_at_period":
            r.significant = bool(rj)


def _num(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    return f"{x:.3g}{unit}"


def _amplitude(value: float | None, se: float | None, unit: str) -> str:
    """``3.98 ± 0.018 ms`` (the natural unit of the value, its standard error in the same)."""
    if value is None:
        return "-"
    factor, name = natural_unit(value, unit)
    sep = "" if name == "%" else " "
    return (f"{fmt_quantity(value, unit, factor, 3)} ± {fmt_quantity(se, unit, factor, 2)}{sep}{name}"
            if se is not None else fmt_quantity(value, unit))


DIURNAL_COLUMNS = {  # full name: (the header, its meaning in the legend under the table)
    "runs (values)": ("runs", "runs (and values) of the series: a run is one value, the median of its "
                      "repetitions"),
    "sine at P: p Holm": ("LS p@P", "sinusoid (least-squares) test at the period P, AR(2) errors between "
                          "runs; * = significant, the verdict's test"),
    "amplitude at P": ("ampl.", "the sine's amplitude at P ± its standard error"),
    "fitted period": ("period", "the period fitted freely ± its standard error"),
    "KW p Holm (ε²)": ("KW p (ε²)", "Kruskal-Wallis test across the hours of the day (ε²: its effect "
                       "size, the share of the variance between hours)"),
    "wkday/wkend p Holm": ("wk p", "weekdays vs weekends (Mann-Whitney on whole days)"),
    "min. detectable ampl.": ("MDA", "the smallest amplitude the sine test detects with the power given"),
}


def render_diurnal(res: DiurnalJSON, console: Console) -> None:
    """The analysis for a person: one line per series, the verdict, heat maps of significant series."""
    several = len({r["workload"] for r in res["series"]}) > 1
    workload = "" if several or not res["series"] else f", workload {res['series'][0]['workload']}"
    title = (f"time of day, period {fmt_duration(res['period_s'])}, {res['timezone']}, "
             f"{res['runs']} runs over {fmt_duration(res['covered_s'])}{workload}")
    # cells never wrap and are never cut: abbreviated headers (the legend under the table says
    # each); a table too wide is stacked; a skipped series' reason is a line under the table
    t = titled_table(title, [*(["workload"] if several else []), "metric", "group",
                             *(short for short, _ in DIURNAL_COLUMNS.values())],
                     left=("workload", "metric", "group"), key=3 if several else 2)
    weekday_why: set[str] = set()
    skipped: list[str] = []
    for r in sorted(res["series"], key=lambda r: (r["workload"], r["metric"], natural_key(r["group"]))):
        name = [*([r["workload"]] if several else []), r["metric"], r["group"]]
        if "skipped" in r:
            t.add_row(*name, str(r["n"]), "skipped", "", "", "", "", "")
            skipped.append(f"{' '.join(name)}: skipped, {r['skipped']}")
            continue
        fit = r.get("fit")
        if fit:
            per = f"{fmt_duration(fit['period_s'])} ± {fmt_duration(fit['period_se_s'])}"
        else:
            per = "not identified" if (r.get("fit_note") or "").startswith("period not identified") else "-"
        amp = _amplitude(r.get("amplitude_at_period"), r.get("amplitude_at_period_se"), r["unit"])
        kw = f"{_num(r.get('kruskal_p_holm'))} ({_num(r['kruskal_epsilon2'])})"
        if why := r.get("weekday_not_testable"):
            weekday_why.add(why)
            wk = "not testable"
        else:
            wk = _num(r.get("mw_p_holm"))
        ls = _num(r.get("p_holm")) + (" *" if r.get("significant") else "")
        t.add_row(*name, f"{r['n']} ({r['n_values']})", ls, amp, per, kw, wk,
                  fmt_quantity(r["mde_amplitude"], r["unit"], digits=3))
    console.print(t)
    for line in skipped:
        console.print(escape(line), highlight=False)
    print_line(console, Text("; ".join(f"{short}: {what}" for short, what in DIURNAL_COLUMNS.values())
                             + f" ({res['power']:.0%} power, alpha {res['alpha']:g}).", style="dim"))
    print_line(console, "Units: a run is one value per series (the median of its repetitions); weekday vs weekend "
                        "compares whole days. Every p-value is Holm-adjusted over the series; the verdict rests on "
                        "the sinusoid test at P (AR(2) errors between runs) alone, Kruskal-Wallis and "
                        "weekday/weekend are shown beside it.")
    for why in sorted(weekday_why):
        print_line(console, f"weekday vs weekend {escape(why)}")
    print_line(console, escape(res["verdict"]))
    for r in [r for r in res["series"] if r.get("significant")][:3]:
        console.print(f"median by weekday × hour: {escape(r['workload'])} {escape(r['metric'])} "
                      f"{escape(r['group'])} ({escape(r['unit'])})", highlight=False)
        heat = r["heatmap"]
        vals = [v for row in heat for v in row if v is not None]
        lo, hi = min(vals), max(vals)
        shades = "░▒▓█"
        console.print(f"     {''.join(str(h // 10) for h in range(24))}   ░ {fmt_quantity(lo, r['unit'])} … "
                      f"█ {fmt_quantity(hi, r['unit'])}", highlight=False)
        console.print(f"     {''.join(str(h % 10) for h in range(24))}", highlight=False)
        for d, row in enumerate(heat):
            cells = "".join("·" if v is None else shades[min(int((v - lo) / (hi - lo + 1e-300) * 3.999), 3)]
                            for v in row)
            console.print(f"{WEEKDAYS[d]}  {cells}", highlight=False)
