"""``cloudbench compare A B``: load two sides, match their series, compare, show the result.

A side is a campaign directory (all its runs), one run directory, or a time selection of one
(``results/x@2026-11-16..2026-11-23``: repetitions measured from the first UTC date or time up to,
not including, the second; either end may be left out). :func:`load_side` reads it with
:func:`cloudbench.report.confirm.load_values` and applies the filters and the pooling guard;
:func:`compare` matches series by (workload, metric, group), reduces each side to its unit of
analysis and applies :mod:`cloudbench.analysis.compare`; the rest renders: a terminal table,
``compare.json`` and ``compare/index.html`` (a forest plot of the relative differences with the
threshold band, one self-contained file).
"""

from __future__ import annotations

import html
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape

from cloudbench.analysis.compare import (
    ALPHA,
    MIN_N,
    Comparison,
    Direction,
    Threshold,
    compare_samples,
    decide,
    reduce_per_run,
)
from cloudbench.analysis.confirm import RepetitionRef, RepetitionValue, SeriesKey
from cloudbench.core.files import write_json_atomic
from cloudbench.core.tables import titled_table
from cloudbench.core.version import __version__
from cloudbench.errors import AnalysisError, ResultError, UsageError
from cloudbench.report.confirm import fmt_value, load_values
from cloudbench.report.confirm_text import check_pooling, json_difference
from cloudbench.store import formats
from cloudbench.store.manifest import POOLING_METADATA
from cloudbench.store.rundir import find_runs

COMPARE_DIR = "compare"
HTML_NAME = "index.html"
JSON_NAME = "compare.json"
_JSON_KEYS = {"workloads", "vm_type_definitions", "wan", "sweeps"}

# --------------------------------------------------------------- threshold

_NUMBER = r"[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"
# absolute thresholds: unit -> (dimension, factor to the dimension's base unit)
_UNITS: dict[str, tuple[str, float]] = {
    "ns": ("time", 1e-3), "us": ("time", 1.0), "µs": ("time", 1.0), "ms": ("time", 1e3), "s": ("time", 1e6),
    "kbit/s": ("rate", 1e-3), "Mbit/s": ("rate", 1.0), "Gbit/s": ("rate", 1e3),
    "kbps": ("rate", 1e-3), "Mbps": ("rate", 1.0), "Gbps": ("rate", 1e3),
    "Mbit": ("volume", 1.0), "Gbit": ("volume", 1e3),
}


def parse_threshold(text: str) -> Threshold:
    """``5%`` (relative), ``0.05`` (a share), ``50us``, ``2ms``, ``100Mbit/s`` (absolute)."""
    raw = text.strip()
    m = re.fullmatch(rf"({_NUMBER})\s*(\S*)", raw)
    if m is None:
        raise UsageError(f"--threshold {text!r}: not a number, percentage or value with a unit "
                         "(examples: 5%, 0.05, 50us, 2ms, 100Mbit/s)")
    value, unit = float(m.group(1)), m.group(2)
    if value < 0:
        raise UsageError(f"--threshold {text!r}: must not be negative")
    if unit == "%":
        return Threshold(value / 100.0, True)
    if unit == "":
        if value >= 1:
            raise UsageError(f"--threshold {text!r}: a bare number is a share (0.05 = 5%); "
                             "write 5% or give a unit (50us)")
        return Threshold(value, True)
    if unit not in _UNITS:
        raise UsageError(f"--threshold {text!r}: unknown unit {unit!r} (known: %, {', '.join(_UNITS)})")
    return Threshold(value, False, unit)


def threshold_in(t: Threshold, unit: str) -> float | None:
    """An absolute threshold in a series' ``unit``; None when the dimensions differ."""
    if t.relative:
        return t.value
    if unit == t.unit:
        return t.value
    a, b = _UNITS.get(t.unit), _UNITS.get(unit)
    if a is None or b is None or a[0] != b[0]:
        return None
    return t.value * a[1] / b[1]


# ------------------------------------------------------------------ loading


@dataclass
class Side:
    """One side of a comparison: its values (filtered, guarded) and what it ran."""

    label: str  # "A" or "B"
    spec: str  # as given on the command line
    path: Path
    campaign: str
    runs: list[str]
    values: list[RepetitionValue]
    metadata: dict[str, str]
    kinds: dict[str, str]  # workload name -> kind
    notes: list[str] = field(default_factory=list)
    known: dict[str, set[str]] = field(default_factory=dict)  # workload/metric/group -> names before filters


def _parse_time(text: str, where: str) -> float:
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a date or UTC time (2026-11-16, 2026-11-16T08:00)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


def split_side(text: str) -> tuple[Path, float | None, float | None]:
    """``DIR`` or ``DIR@SINCE..UNTIL`` (UTC; either end may be empty) -> (dir, since, until)."""
    if Path(text).exists() or "@" not in text:
        return Path(text), None, None
    base, _, sel = text.rpartition("@")
    if ".." not in sel:
        raise UsageError(f"{text!r}: a selection is DIR@SINCE..UNTIL (UTC dates or times; e.g. "
                         "results/x@2026-11-16..2026-11-23)")
    lo, _, hi = sel.partition("..")
    since = _parse_time(lo, text) if lo else None
    until = _parse_time(hi, text) if hi else None
    if since is not None and until is not None and until <= since:
        raise UsageError(f"{text!r}: the selection ends before it starts")
    return Path(base), since, until


def _filter(values: list[RepetitionValue], attr: str, wanted: Sequence[str]) -> list[RepetitionValue]:
    return values if not wanted else [v for v in values if getattr(v, attr) in wanted]


@dataclass
class _Read:
    """One directory (or time selection) as read, before series filters and the pooling guard."""

    path: Path
    campaign: str
    values: list[RepetitionValue]
    kinds: dict[str, str]  # workload name -> kind
    notes: list[str]
    hours: dict[tuple[str, int, str], int] | None = None


def read_side(text: str, label: str = "", hours: Sequence[int] = (), want_hours: bool = False) -> _Read:
    """Every repetition value under ``text`` (a directory or ``DIR@SINCE..UNTIL``), the time and
    ``hours`` selections applied."""
    from cloudbench.report.diurnal import repetition_hours, value_times

    path, since, until = split_side(text)
    ds = load_values(path, allow_mixed=True)
    values = list(ds.values)
    notes = list(ds.notes)
    runs = find_runs(path)
    manifests = {r.run_id: r.manifest() for r in runs}
    kinds: dict[str, str] = {}
    for m in manifests.values():
        for w in m.workloads():
            kinds.setdefault(str(w.get("name", w.get("kind"))), str(w.get("kind", "")))
    if since is not None or until is not None:
        at: dict[tuple[str, int, str], float] = {}
        for run_id, m in manifests.items():
            for (rep, wname), when in value_times(m).items():
                at[(run_id, rep, wname)] = when
        values = [v for v in values
                  if (tv := at.get((v.ref.run_id, v.ref.repetition, v.workload))) is not None
                  and (since is None or tv >= since) and (until is None or tv < until)]
        if not values:
            raise AnalysisError(f"{text}: no repetition was measured in the selected time span")
        notes.append(f"side {label or text}: repetitions measured in {text.rpartition('@')[2]} (UTC) only")
    hour_of = repetition_hours(path) if hours or want_hours else None
    if hours:
        if any(not 0 <= h <= 23 for h in hours):
            raise UsageError(f"--hour takes hours 0..23, got {list(hours)}")
        assert hour_of is not None
        values = [v for v in values if hour_of.get((v.ref.run_id, v.ref.repetition, v.workload)) in hours]
        if not values:
            raise AnalysisError(f"{text}: no repetition was measured in hour(s) {sorted(set(hours))}")
    return _Read(path, ds.campaign, values, kinds, notes, hour_of)


def make_side(label: str, spec: str, read: _Read, values: list[RepetitionValue], *,
              workloads: Sequence[str] = (), metrics: Sequence[str] = (), groups: Sequence[str] = (),
              allow_mixed: bool = False, ignore: str | None = None) -> Side:
    """Keep the selected series of ``values``, refuse mixed metadata (``ignore``: a key not
    checked, the ``--by`` key), and take the metadata of the first repetition."""
    known = {a: {getattr(v, a) for v in values} for a in ("workload", "metric", "group")}
    values = _filter(values, "workload", workloads)
    values = _filter(values, "metric", metrics)
    values = _filter(values, "group", groups)
    series_refs: dict[SeriesKey, list[RepetitionRef]] = defaultdict(list)
    metas: dict[RepetitionRef, dict[str, str]] = {}
    for v in values:
        series_refs[SeriesKey(v.workload, v.metric, v.group)].append(v.ref)
        metas[v.ref] = {k: x for k, x in v.metadata.items() if k != ignore}
    notes = list(read.notes)
    mixed = check_pooling(Path(spec), series_refs, metas, allow_mixed)
    if mixed:
        notes.append(f"side {label}: repetitions with different key metadata pooled (--allow-mixed)")
    first = min(metas, default=None)
    metadata = dict(values[0].metadata) if values else {}
    if first is not None:
        metadata = dict(next(v.metadata for v in values if v.ref == first))
    used_runs = list(dict.fromkeys(v.ref.run_id for v in values))
    return Side(label, spec, read.path, read.campaign, used_runs, values, metadata, dict(read.kinds), notes, known)


def load_side(label: str, text: str, *, workloads: Sequence[str] = (), metrics: Sequence[str] = (),
              groups: Sequence[str] = (), hours: Sequence[int] = (), allow_mixed: bool = False) -> Side:
    """Read one side, keep the selected repetitions and series, refuse mixed metadata."""
    read = read_side(text, label, hours)
    return make_side(label, text, read, read.values, workloads=workloads, metrics=metrics, groups=groups,
                     allow_mixed=allow_mixed)


# ------------------------------------------------------------------ compare


@dataclass(frozen=True)
class Row:
    """One matched series and its comparison."""

    key: SeriesKey
    unit: str
    unit_a: str  # unit of analysis: "run" or "repetition"
    unit_b: str
    direction: Direction | None
    threshold: Threshold
    result: Comparison


@dataclass
class CompareResult:
    a: Side
    b: Side
    threshold: Threshold
    rows: list[Row]
    only_a: list[SeriesKey]
    only_b: list[SeriesKey]
    differences: list[dict[str, str]]
    notes: list[str]

    @property
    def unit_of_analysis(self) -> dict[str, str]:
        def one(units: set[str]) -> str:
            return "/".join(sorted(units)) if units else "-"

        return {"A": one({r.unit_a for r in self.rows}), "B": one({r.unit_b for r in self.rows})}


def metadata_differences(a: dict[str, str], b: dict[str, str]) -> list[dict[str, str]]:
    """The key metadata (the pooling keys of ``confirm``) that differ between the sides' first
    repetitions: ``{"key", "a", "b", "detail"}``; JSON-valued keys name their first differing field."""
    out = []
    for k in POOLING_METADATA:
        if k not in a or k not in b or a[k] == b[k]:
            continue
        detail = (json_difference(a[k], b[k], k) if k in _JSON_KEYS
                  else f"{k}: {a[k]!r} vs {b[k]!r}")
        out.append({"key": k, "a": a[k], "b": b[k], "detail": detail})
    return out


def _direction(side_a: Side, side_b: Side, workload: str, metric: str) -> Direction | None:
    from cloudbench.workloads import KINDS

    kind = side_a.kinds.get(workload) or side_b.kinds.get(workload)
    wk = KINDS.get(kind or workload)
    d = None if wk is None else wk.direction(metric)
    return d if d in ("lower", "higher") else None  # type: ignore[return-value]


def _check_names(sides: Sequence[Side], where: str, workloads: Sequence[str], metrics: Sequence[str],
                 groups: Sequence[str]) -> None:
    for what, wanted in (("workload", workloads), ("metric", metrics), ("group", groups)):
        known = set().union(*(s.known.get(what, set()) for s in sides))
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise AnalysisError(f"unknown {what}(s) {', '.join(map(repr, unknown))} in {where}; "
                                f"known: {', '.join(sorted(known))}")


def _series(side: Side) -> dict[SeriesKey, list[RepetitionValue]]:
    out: dict[SeriesKey, list[RepetitionValue]] = defaultdict(list)
    for v in side.values:
        if math.isfinite(v.value):
            out[SeriesKey(v.workload, v.metric, v.group)].append(v)
    return out


def compare_pairs(pairs: Sequence[tuple[Side, Side]], threshold: Threshold) -> list[CompareResult]:
    """Each (A, B) compared; Holm over every row of every pair (the rows shown)."""
    t = threshold
    staged: list[tuple[Any, ...]] = []  # (index, A, B, key, unit, unit A, unit B, threshold, comparison, direction)
    for side_a, side_b in pairs:
        va, vb = _series(side_a), _series(side_b)
        matched = sorted(set(va) & set(vb))
        if not matched:
            raise AnalysisError(f"{side_a.spec} and {side_b.spec} have no series in common (workload, metric, "
                                f"group); A has {len(va)}, B has {len(vb)}")
        if not t.relative:
            bad = sorted({f"{k.metric} [{va[k][0].unit or 'no unit'}]" for k in matched
                          if threshold_in(t, va[k][0].unit) is None})
            if bad:
                raise UsageError(f"--threshold {t.text()} is absolute, but these metrics are in other units: "
                                 f"{', '.join(bad)}; select metrics of one unit with --metric, or give a "
                                 "relative threshold (5%)")
        for k in matched:
            xa, ua = reduce_per_run([v.value for v in va[k]], [v.ref.run_id for v in va[k]])
            xb, ub = reduce_per_run([v.value for v in vb[k]], [v.ref.run_id for v in vb[k]])
            unit = va[k][0].unit
            tk = t if t.relative else Threshold(threshold_in(t, unit) or 0.0, False, unit)
            staged.append((len(staged), side_a, side_b, k, unit, ua, ub, tk, compare_samples(xa, xb, tk),
                           _direction(side_a, side_b, k.workload, k.metric)))
    decided = decide([x[8] for x in staged], [x[9] for x in staged])
    out = []
    for side_a, side_b in pairs:
        va, vb = _series(side_a), _series(side_b)
        rows = [Row(x[3], x[4], x[5], x[6], x[9], x[7], decided[x[0]]) for x in staged
                if x[1] is side_a and x[2] is side_b]
        notes = side_a.notes + [n for n in side_b.notes if n not in side_a.notes]
        if any(r.unit_a != r.unit_b for r in rows):
            notes.append("the sides' units of analysis differ (one side is one run: its repetitions; "
                         "the other several runs: one value per run)")
        out.append(CompareResult(side_a, side_b, t, rows, sorted(set(va) - set(vb)), sorted(set(vb) - set(va)),
                                 metadata_differences(side_a.metadata, side_b.metadata), notes))
    return out


def compare(a: str | Path, b: str | Path, *, threshold: Threshold | str = "5%", workloads: Sequence[str] = (),
            metrics: Sequence[str] = (), groups: Sequence[str] = (), hours: Sequence[int] = (),
            allow_mixed: bool = False) -> CompareResult:
    """Compare every series B has in common with A; list the ones only one side has."""
    t = parse_threshold(threshold) if isinstance(threshold, str) else threshold
    side_a = load_side("A", str(a), workloads=workloads, metrics=metrics, groups=groups, hours=hours,
                       allow_mixed=allow_mixed)
    side_b = load_side("B", str(b), workloads=workloads, metrics=metrics, groups=groups, hours=hours,
                       allow_mixed=allow_mixed)
    _check_names((side_a, side_b), f"{a} and {b}", workloads, metrics, groups)
    (res,) = compare_pairs([(side_a, side_b)], t)
    return res


# `--by KEY`: manifest keys (as the pooling metadata names them), the hour of day, or a swept value
BY_METADATA = {"provider": "provider", "region": "regions", "regions": "regions", "zone": "zones",
               "zones": "zones", "vm_type": "vm_type", "worker_version": "worker_version"}


def _level_key(level: str) -> tuple[int, float, str]:
    try:
        return (0, float(level), level)
    except ValueError:
        return (1, 0.0, level)


def _swept(group: str, key: str) -> tuple[str, str] | None:
    """``same_zone@payload=1024,rate=100`` and ``payload`` -> (``1024``, ``same_zone@rate=100``)."""
    base, sep, label = group.partition("@")
    if not sep:
        return None
    items = [i.partition("=") for i in label.split(",")]
    found = next((v for k, _, v in items if k == key), None)
    if found is None:
        return None
    rest = ",".join(f"{k}={v}" for k, _, v in items if k != key)
    return found, base + (f"@{rest}" if rest else "")


def compare_by(paths: Sequence[str | Path], by: str, *, baseline: str | None = None,
               threshold: Threshold | str = "5%", workloads: Sequence[str] = (), metrics: Sequence[str] = (),
               groups: Sequence[str] = (), hours: Sequence[int] = (), allow_mixed: bool = False) -> list[CompareResult]:
    """Regroup the repetitions of ``paths`` by ``by`` (provider, region, zone, vm_type, hour, or a swept
    parameter such as ``payload``) and compare every level against ``baseline`` (default: the first
    level in order), as benchstat's ``-col``."""
    t = parse_threshold(threshold) if isinstance(threshold, str) else threshold
    reads = [read_side(str(p), str(p), hours, want_hours=by == "hour") for p in paths]
    levels: dict[str, list[RepetitionValue]] = defaultdict(list)
    meta_key = BY_METADATA.get(by)
    swept_keys: set[str] = set()
    for r in reads:
        for v in r.values:
            level: str | None
            if by == "hour":
                assert r.hours is not None
                h = r.hours.get((v.ref.run_id, v.ref.repetition, v.workload))
                level = None if h is None else f"{h:02d}"
            elif meta_key is not None:
                level = v.metadata.get(meta_key)
            else:
                _, sep, label = v.group.partition("@")
                swept_keys |= {i.partition("=")[0] for i in label.split(",")} if sep else set()
                found = _swept(v.group, by)
                level = None if found is None else found[0]
                if found is not None:
                    v = replace(v, group=found[1])
            if level is not None:
                levels[level].append(v)
    if not levels:
        raise UsageError(f"--by {by!r}: no repetition has it; use one of {', '.join(sorted(BY_METADATA))}, hour"
                         + (f", or a swept parameter ({', '.join(sorted(swept_keys))})" if swept_keys else ""))
    order = sorted(levels, key=_level_key)
    if len(order) < 2:
        raise AnalysisError(f"--by {by}: only one level ({order[0]}) in {', '.join(map(str, paths))}; "
                            "nothing to compare")
    base = baseline if baseline is not None else order[0]
    if base not in levels:
        raise UsageError(f"--baseline {base!r}: not a level of {by} (levels: {', '.join(order)})")
    where = ", ".join(map(str, paths))
    read = _Read(reads[0].path, ",".join(dict.fromkeys(r.campaign for r in reads)), [],
                 {k: v for r in reads for k, v in r.kinds.items()},
                 list(dict.fromkeys(n for r in reads for n in r.notes)))
    sides = {lv: make_side(f"{by}={lv}", f"{by}={lv}", read, levels[lv], workloads=workloads, metrics=metrics,
                           groups=groups, allow_mixed=allow_mixed, ignore=meta_key)
             for lv in order}
    _check_names(list(sides.values()), where, workloads, metrics, groups)
    return compare_pairs([(sides[base], sides[lv]) for lv in order if lv != base], t)


# ----------------------------------------------------------------- outputs


def _ci(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [float(ci[0]), float(ci[1])]


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def row_dict(r: Row) -> dict[str, Any]:
    c = r.result
    return {
        "workload": r.key.workload, "metric": r.key.metric, "group": r.key.group, "unit": r.unit,
        "n_a": c.n_a, "n_b": c.n_b, "unit_of_analysis_a": r.unit_a, "unit_of_analysis_b": r.unit_b,
        "median_a": _num(c.median_a.estimate), "median_b": _num(c.median_b.estimate),
        "median_a_ci": None if not c.median_a.exists else [c.median_a.lower, c.median_a.upper],
        "median_b_ci": None if not c.median_b.exists else [c.median_b.lower, c.median_b.upper],
        "ratio": _num(c.ratio), "ratio_ci": _ci(c.ratio_ci), "ratio_ci90": _ci(c.ratio_ci90),
        "ratio_method": c.ratio_method,
        "diff": _num(c.diff), "diff_ci": _ci(c.diff_ci), "diff_ci90": _ci(c.diff_ci90),
        "p": c.p, "p_holm": c.p_holm, "verdict": c.verdict, "more_per_side": c.more,
        "direction": r.direction, "decided_on": c.decided_on, "band": c.band,
    }


def to_json(res: CompareResult | Sequence[CompareResult], by: str | None = None) -> dict[str, Any]:
    """``compare.json`` (schema 1); for several comparisons (``--by``) the rows of all, each with its
    sides ``a``/``b``, and each comparison in full under ``comparisons``."""
    if not isinstance(res, CompareResult):
        many = list(res)
        if len(many) == 1 and by is None:
            return to_json(many[0])
        docs = [to_json(c) for c in many]
        return {
            "schema": formats.COMPARE.current, "kind": "cloudbench.compare", "version": __version__, "by": by,
            "baseline": many[0].a.label, "levels": [many[0].a.label] + [c.b.label for c in many],
            "threshold": many[0].threshold.text(), "alpha": ALPHA, "min_n": MIN_N,
            "unit_of_analysis": {c.a.label: c.unit_of_analysis["A"] for c in many}
            | {c.b.label: c.unit_of_analysis["B"] for c in many},
            "differences": [d | {"a": c.a.label, "b": c.b.label} for c in many for d in c.differences],
            "rows": [{"a": c.a.label, "b": c.b.label} | row for c, doc in zip(many, docs, strict=True)
                     for row in doc["rows"]],
            "comparisons": docs,
        }
    t = res.threshold

    def side(s: Side) -> dict[str, Any]:
        return {"path": s.spec, "campaign": s.campaign, "runs": s.runs, "metadata": s.metadata}

    return {
        "schema": formats.COMPARE.current, "kind": "cloudbench.compare", "version": __version__,
        "a": side(res.a), "b": side(res.b),
        "threshold": t.text(), "threshold_value": t.value, "threshold_relative": t.relative,
        "alpha": ALPHA, "min_n": MIN_N,
        "unit_of_analysis": res.unit_of_analysis,
        "differences": res.differences,
        "only_a": [_key_dict(k) for k in res.only_a],
        "only_b": [_key_dict(k) for k in res.only_b],
        "notes": res.notes,
        "method": {
            "unit": "one value per run (median of its repetitions) when a side holds several runs; "
                    "its repetitions when it is one run",
            "median_ci": "exact order-statistic CI, 95% (Le Boudec Thm. 2.1)",
            "diff": "Hodges-Lehmann shift B - A; interval by inverting the Mann-Whitney test "
                    "(exact null distribution up to 10,000 pairs, normal beyond)",
            "ratio": "Hodges-Lehmann ratio B/A (the shift of the log values) when every value is "
                     "positive, else 1 + shift / |median A|",
            "p": "two-sided Mann-Whitney U (scipy), Holm-adjusted over the rows shown",
            "verdict": f"better/worse: p_holm < {ALPHA} and the estimate beyond ±threshold; equivalent: "
                       "the 90% interval inside ±threshold (TOST at 5%); n < 6 per side: "
                       "inconclusive (n too small)",
        },
        "rows": [row_dict(r) for r in res.rows],
    }


def _key_dict(k: SeriesKey) -> dict[str, str]:
    return {"workload": k.workload, "metric": k.metric, "group": k.group}


def to_frame(res: CompareResult | Sequence[CompareResult]) -> pd.DataFrame:
    """The rows as a pandas DataFrame (``cloudbench.compare``)."""
    many = _many(res)
    df = pd.DataFrame([{"a": c.a.label, "b": c.b.label} | row_dict(r) for c in many for r in c.rows])
    df.attrs.update({"threshold": many[0].threshold.text(),
                     "unit_of_analysis": {c.a.label: c.unit_of_analysis["A"] for c in many}
                     | {c.b.label: c.unit_of_analysis["B"] for c in many},
                     "differences": [d | {"a": c.a.label, "b": c.b.label} for c in many for d in c.differences]})
    return df


def _pct(x: float) -> str:
    return f"{x * 100:+.2f}%" if abs(x) < 0.1 else f"{x * 100:+.1f}%"


def change_text(r: Row) -> tuple[str, str]:
    """The change and its 95 % interval as table cells, on the scale that decides."""
    c = r.result
    if c.decided_on == "ratio" and c.ratio is not None:
        ci = "" if c.ratio_ci is None else f"[{_pct(c.ratio_ci[0] - 1)}, {_pct(c.ratio_ci[1] - 1)}]"
        return _pct(c.ratio - 1), ci
    unit = _unit(r.unit)
    ci = "" if c.diff_ci is None else f"[{c.diff_ci[0]:+.4g}, {c.diff_ci[1]:+.4g}]"
    return f"{c.diff:+.4g}{unit}", ci


def _units(res: CompareResult) -> str:
    return "runs" if "run" in res.unit_of_analysis.values() else "repetitions"


def _unit(unit: str) -> str:
    """`` us`` after a value; nothing for dimensionless (``1``) or no unit."""
    return "" if unit in ("", "1") else f" {unit}"


_STYLE = {"better": "green", "worse": "red", "different": "magenta", "equivalent": "cyan"}


def verdict_text(r: Row, markup: bool = True) -> str:
    c = r.result
    v = c.verdict
    if v == "inconclusive" and c.more is not None:
        v = f"inconclusive: ~{c.more} more"
    style = _STYLE.get(c.verdict)
    return f"[{style}]{v}[/]" if markup and style else v


def render(res: CompareResult | Sequence[CompareResult], console: Console) -> None:
    """The comparison for a person (benchstat's spirit): a row per series; a table per pair."""
    if not isinstance(res, CompareResult):
        for i, one in enumerate(res):
            if i:
                console.print()
            render(one, console)
        return
    several = len({r.key.workload for r in res.rows}) > 1
    t = res.threshold
    ua, ub = res.unit_of_analysis["A"], res.unit_of_analysis["B"]
    per = f"median per {ua}" if ua == ub else f"median per {ua} (A) / {ub} (B)"
    title = f"B vs A: {per}, threshold ±{t.text()} - A = {res.a.spec}, B = {res.b.spec}"
    if res.a.label not in ("A", "B"):
        title = f"{res.b.label} vs {res.a.label}: {per}, threshold ±{t.text()}"
    table = titled_table(title, ("metric", "group", "n A/B", "A", "B", "change", "95% CI", "p (Holm)",
                                 "verdict"), left=("metric", "group", "verdict"), key=2)
    for r in res.rows:
        c = r.result
        unit = _unit(r.unit)
        change, ci = change_text(r)
        table.add_row(f"{r.key.workload}:{r.key.metric}" if several else r.key.metric, r.key.group,
                      f"{c.n_a}/{c.n_b}", fmt_value(c.median_a.estimate) + unit,
                      fmt_value(c.median_b.estimate) + unit, change, ci or "-",
                      "-" if c.p_holm is None else f"{c.p_holm:.3g}", verdict_text(r))
    console.print(table)
    console.print(
        f"change: {'B/A - 1 (Hodges-Lehmann ratio)' if t.relative else 'B - A (Hodges-Lehmann shift)'}"
        f" with its 95% interval; better/worse: p (Holm) < {ALPHA} and beyond ±{t.text()}; "
        f"equivalent: 90% interval inside ±{t.text()}; n < {MIN_N} per side: no interval; "
        f"~N more: about N more {_units(res)} per side would likely decide (from the spread seen).",
        highlight=False, style="dim")
    if res.differences:
        console.print("[bold]what differs[/] (key metadata, A vs B):", highlight=False)
        for d in res.differences:
            console.print(f"  [yellow]{escape(d['key'])}[/]: {escape(d['detail'])}", highlight=False)
    else:
        console.print("[bold]what differs[/]: nothing in the key metadata (same provider, regions, "
                      "vm types, workload parameters, worker versions)", highlight=False)
    for name, keys in (("A", res.only_a), ("B", res.only_b)):
        if keys:
            listed = ", ".join(f"{k.metric}/{k.group}" for k in keys[:8])
            more = f" and {len(keys) - 8} more" if len(keys) > 8 else ""
            console.print(f"[yellow]only in {name}[/] (not compared): {escape(listed)}{more}", highlight=False)
    for n in res.notes:
        console.print(f"[yellow]note:[/] {escape(n)}", highlight=False)


# -------------------------------------------------------------------- HTML

_CSS = """
body{font-family:"DejaVu Sans",Arial,sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#111}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border-bottom:1px solid #bbb;padding:.15em .5em;text-align:right}th{border-bottom:2px solid #444}
td.l,th.l{text-align:left}.better{color:#05603a;font-weight:bold}.worse{color:#a4161a;font-weight:bold}
.equivalent{color:#1d4e89}.diff{background:#fff3c4}.small{font-size:.85em;color:#444}
figure{margin:1em 0;border:1px solid #ddd;padding:.5em}figcaption{font-size:.85em;color:#333}
"""


def forest_svg(res: CompareResult) -> str:
    """The relative change of each row (B/A - 1) with its 95 % interval, the ±threshold band shaded
    and 0 marked; rows without a ratio or an interval are drawn as a point or left out (named)."""
    rows = [r for r in res.rows if r.result.ratio is not None]
    if not rows:
        return "<p class='small'>no row has a relative difference (A's medians are 0)</p>"
    band = res.threshold.value if res.threshold.relative else None
    xs = [r.result.ratio - 1 for r in rows if r.result.ratio is not None]
    for r in rows:
        if r.result.ratio_ci is not None:
            xs += [r.result.ratio_ci[0] - 1, r.result.ratio_ci[1] - 1]
    lim = max([abs(x) for x in xs] + [band or 0.0, 0.01]) * 1.1
    label_w, plot_w, row_h, top = 330, 520, 22, 30
    height = top + row_h * len(rows) + 40

    def x(v: float) -> float:
        return label_w + (v + lim) / (2 * lim) * plot_w

    alt = "Forest plot of B/A - 1 per series: " + "; ".join(
        f"{r.key.metric} / {r.key.group} {verdict_text(r, markup=False)}" for r in rows)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 20}" height="{height}" '
             f'font-family="DejaVu Sans,Arial,sans-serif" font-size="12" role="img" aria-label="{html.escape(alt)}">']
    if band is not None:
        parts.append(f'<rect x="{x(-band):.1f}" y="{top - 10}" width="{x(band) - x(-band):.1f}" '
                     f'height="{row_h * len(rows) + 10}" fill="#d9ead3"><title>±{res.threshold.text()}'
                     '</title></rect>')
    parts.append(f'<line x1="{x(0):.1f}" y1="{top - 10}" x2="{x(0):.1f}" y2="{top + row_h * len(rows)}" '
                 'stroke="#444" stroke-dasharray="3,3"/>')
    colors = {"better": "#05603a", "worse": "#a4161a", "equivalent": "#1d4e89"}
    for i, r in enumerate(rows):
        c = r.result
        y = top + i * row_h + row_h / 2
        name = html.escape(f"{r.key.metric} / {r.key.group}")
        parts.append(f'<text x="{label_w - 8}" y="{y + 4:.1f}" text-anchor="end">{name}</text>')
        col = colors.get(c.verdict, "#555")
        if c.ratio_ci is not None:
            parts.append(f'<line x1="{x(c.ratio_ci[0] - 1):.1f}" y1="{y:.1f}" x2="{x(c.ratio_ci[1] - 1):.1f}" '
                         f'y2="{y:.1f}" stroke="{col}" stroke-width="2"/>')
        assert c.ratio is not None
        parts.append(f'<circle cx="{x(c.ratio - 1):.1f}" cy="{y:.1f}" r="4" fill="{col}">'
                     f'<title>{html.escape(verdict_text(r, markup=False))}</title></circle>')
    axis_y = top + row_h * len(rows) + 5
    parts.append(f'<line x1="{label_w}" y1="{axis_y}" x2="{label_w + plot_w}" y2="{axis_y}" stroke="#444"/>')
    for k in range(-4, 5):
        v = lim * k / 4.5
        parts.append(f'<line x1="{x(v):.1f}" y1="{axis_y}" x2="{x(v):.1f}" y2="{axis_y + 4}" stroke="#444"/>')
        parts.append(f'<text x="{x(v):.1f}" y="{axis_y + 16}" text-anchor="middle">{v * 100:+.1f}%</text>')
    parts.append(f'<text x="{label_w + plot_w / 2}" y="{axis_y + 32}" text-anchor="middle">'
                 'B/A - 1 (Hodges-Lehmann ratio), 95% interval</text></svg>')
    return "".join(parts)


def _many(res: CompareResult | Sequence[CompareResult]) -> list[CompareResult]:
    return [res] if isinstance(res, CompareResult) else list(res)


def to_html(res: CompareResult | Sequence[CompareResult]) -> str:
    """The page: one section per comparison (``--by`` with more than two levels gives several)."""
    e = html.escape
    parts = [_html_section(r, len(_many(res)) > 1) for r in _many(res)]
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>cloudbench compare</title>"
            f"<style>{_CSS}</style></head><body>{''.join(parts)}"
            f"<p class=small>cloudbench {e(__version__)}</p></body></html>")


def _html_section(res: CompareResult, several: bool) -> str:
    t = res.threshold
    e = html.escape
    h1, h2 = ("h2", "h3") if several else ("h1", "h2")
    head = ("<tr><th class=l>workload</th><th class=l>metric</th><th class=l>group</th><th>n A/B</th>"
            "<th>median A</th><th>median B</th><th>change</th><th>95% CI</th><th>p</th><th>p (Holm)</th>"
            "<th class=l>verdict</th></tr>")
    body = []
    for r in res.rows:
        c = r.result
        change, ci = change_text(r)
        body.append(
            f"<tr><td class=l>{e(r.key.workload)}</td><td class=l>{e(r.key.metric)}</td>"
            f"<td class=l>{e(r.key.group)}</td><td>{c.n_a}/{c.n_b}</td>"
            f"<td>{e(fmt_value(c.median_a.estimate) + _unit(r.unit))}</td>"
            f"<td>{e(fmt_value(c.median_b.estimate) + _unit(r.unit))}</td><td>{e(change)}</td><td>{e(ci or '-')}</td>"
            f"<td>{'-' if c.p is None else f'{c.p:.3g}'}</td>"
            f"<td>{'-' if c.p_holm is None else f'{c.p_holm:.3g}'}</td>"
            f"<td class='l {e(c.verdict.split()[0])}'>{e(verdict_text(r, markup=False))}</td></tr>")
    keys = [k for k in POOLING_METADATA if k in res.a.metadata or k in res.b.metadata]
    differing = {d["key"]: d["detail"] for d in res.differences}
    meta = []
    for k in keys:
        cls = " class=diff" if k in differing else ""
        a_v, b_v = res.a.metadata.get(k, "-"), res.b.metadata.get(k, "-")
        if k in _JSON_KEYS:
            a_v = b_v = differing.get(k, "same")
        meta.append(f"<tr{cls}><td class=l>{e(k)}</td><td class=l>{e(a_v)}</td><td class=l>{e(b_v)}</td></tr>")
    only = "".join(f"<li>only in {n}: {e(k.workload)} {e(k.metric)} / {e(k.group)}</li>"
                   for n, ks in (("A", res.only_a), ("B", res.only_b)) for k in ks)
    notes = "".join(f"<li>{e(n)}</li>" for n in res.notes)
    title = f"{res.b.label} vs {res.a.label}" if several else "B vs A"
    return (
        f"<section><{h1}>{e(title)}</{h1}>"
        f"<p>A = <code>{e(res.a.spec)}</code> ({len(res.a.runs)} run(s)), B = <code>{e(res.b.spec)}</code> "
        f"({len(res.b.runs)} run(s)). Unit of analysis: A {e(res.unit_of_analysis['A'])}, "
        f"B {e(res.unit_of_analysis['B'])}. Threshold ±{e(t.text())}.</p>"
        f"<figure>{forest_svg(res)}<figcaption>Relative difference of each series (B/A - 1) with its 95% "
        f"interval; shaded: ±{e(t.text())}; green better, red worse, blue equivalent.</figcaption></figure>"
        f"<{h2}>Rows</{h2}><table>{head}{''.join(body)}</table>"
        f"<p class=small>better/worse: p (Holm) &lt; {ALPHA} and the estimate beyond ±threshold; "
        f"equivalent: the 90% interval inside ±threshold (TOST); fewer than {MIN_N} units per side: "
        "no interval, inconclusive.</p>"
        f"<{h2}>What differs</{h2}><table><tr><th class=l>key</th><th class=l>A</th><th class=l>B</th></tr>"
        f"{''.join(meta)}</table>"
        + (f"<{h2}>Not compared</{h2}><ul>{only}</ul>" if only else "")
        + (f"<{h2}>Notes</{h2}><ul>{notes}</ul>" if notes else "")
        + "</section>"
    )


def write_compare(res: CompareResult | Sequence[CompareResult], out: Path, by: str | None = None) -> Path:
    """``out/compare/index.html`` and ``out/compare/compare.json``; returns the HTML's path."""
    d = Path(out) / COMPARE_DIR
    try:
        d.mkdir(parents=True, exist_ok=True)
        write_json_atomic(d / JSON_NAME, to_json(res, by))
        (d / HTML_NAME).write_text(to_html(res), encoding="utf-8")
    except OSError as e:
        raise ResultError(str(d), f"cannot write the comparison: {e.strerror or e}") from e
    return d / HTML_NAME


def compare_frame(*paths: str | Path, by: str | None = None, baseline: str | None = None,
                  **kwargs: Any) -> pd.DataFrame:
    """The public ``cloudbench.compare``: ``compare(a, b, threshold="5%", ...)`` or
    ``compare(*paths, by="provider", baseline=None, ...)``; the rows as a pandas DataFrame
    (with ``a``/``b`` columns naming the sides' levels under ``by``)."""
    if by is not None:
        return to_frame(compare_by(paths, by, baseline=baseline, **kwargs))
    if len(paths) != 2:
        raise UsageError(f"compare takes two sides A and B (got {len(paths)}), or several with by=KEY")
    return to_frame(compare(paths[0], paths[1], **kwargs))
