"""``cloudbench compare A B``: match two sides' series, compare them, and the result as data.

The sides are read by :mod:`cloudbench.report.sides`; :func:`compare` matches series by
(workload, metric, group), reduces each side to its unit of analysis and applies
:mod:`cloudbench.analysis.compare`; :func:`compare_by` regroups repetitions by a key
(benchstat's ``-col``). The result serializes itself (:meth:`CompareResult.to_json`,
``compare.json``); :mod:`cloudbench.report.compare_render` shows it (terminal table, HTML).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

import pandas as pd

from cloudbench.analysis.compare import (
    ALPHA,
    MIN_N,
    Comparison,
    ComparisonJSON,
    Direction,
    Threshold,
    compare_samples,
    decide,
    reduce_per_run,
)
from cloudbench.analysis.confirm import RepetitionValue, SeriesKey
from cloudbench.core.version import __version__
from cloudbench.errors import AnalysisError, UsageError
from cloudbench.report.confirm_text import JSON_KEYS, json_difference
from cloudbench.report.sides import Side, SideJSON, SideRead, check_names, load_side, make_side, read_side
from cloudbench.report.threshold import parse_threshold, threshold_in
from cloudbench.store import formats
from cloudbench.store.manifest import POOLING_METADATA

COMPARE_DIR = "compare"
HTML_NAME = "index.html"
JSON_NAME = "compare.json"

# ------------------------------------------------------------------ compare


class RowJSON(TypedDict):
    """A row of ``compare.json``: the series, its units of analysis and its comparison."""

    workload: str
    metric: str
    group: str
    unit: str
    n_a: int
    n_b: int
    unit_of_analysis_a: str
    unit_of_analysis_b: str
    median_a: float | None
    median_b: float | None
    median_a_ci: list[float] | None
    median_b_ci: list[float] | None
    ratio: float | None
    ratio_ci: list[float] | None
    ratio_ci90: list[float] | None
    ratio_method: str
    diff: float | None
    diff_ci: list[float] | None
    diff_ci90: list[float] | None
    p: float | None
    p_holm: float | None
    verdict: str
    more_per_side: int | None
    direction: Direction | None
    decided_on: Literal["ratio", "diff"]
    band: float


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

    def to_json(self) -> RowJSON:
        """The row as ``compare.json`` holds it (keys in :class:`RowJSON`'s order)."""
        full: dict[str, object] = {
            "workload": self.key.workload, "metric": self.key.metric, "group": self.key.group,
            "unit": self.unit, "unit_of_analysis_a": self.unit_a, "unit_of_analysis_b": self.unit_b,
            "direction": self.direction, **self.result.to_json()}
        return cast(RowJSON, {k: full[k] for k in RowJSON.__annotations__})

    @classmethod
    def from_json(cls, doc: RowJSON, threshold: Threshold) -> Row:
        """The row back from :meth:`to_json`; ``threshold`` as given (an absolute one is converted
        to the row's unit, as :func:`compare_pairs` does)."""
        comparison = Comparison.from_json(cast(ComparisonJSON, {k: doc[k] for k in ComparisonJSON.__annotations__}))  # type: ignore[literal-required]
        t = threshold if threshold.relative else Threshold(threshold_in(threshold, doc["unit"]) or 0.0, False,
                                                          doc["unit"])
        return cls(SeriesKey(doc["workload"], doc["metric"], doc["group"]), doc["unit"], doc["unit_of_analysis_a"],
                   doc["unit_of_analysis_b"], doc["direction"], t, comparison)


class KeyJSON(TypedDict):
    """A series named in ``compare.json`` (``only_a``, ``only_b``)."""

    workload: str
    metric: str
    group: str


class DifferenceJSON(TypedDict):
    """A key metadata value that differs between the sides, with its first differing field."""

    key: str
    a: str
    b: str
    detail: str


class CompareJSON(TypedDict):
    """``compare.json`` of one comparison (:data:`cloudbench.store.formats.COMPARE`)."""

    schema: int
    kind: str
    version: str
    a: SideJSON
    b: SideJSON
    threshold: str
    threshold_value: float
    threshold_relative: bool
    alpha: float
    min_n: int
    unit_of_analysis: dict[str, str]
    differences: list[DifferenceJSON]
    only_a: list[KeyJSON]
    only_b: list[KeyJSON]
    notes: list[str]
    method: dict[str, str]
    rows: list[RowJSON]


METHOD = {
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
}
"""How each number of ``compare.json`` was computed."""


def _key_json(k: SeriesKey) -> KeyJSON:
    return {"workload": k.workload, "metric": k.metric, "group": k.group}


def _key(doc: KeyJSON) -> SeriesKey:
    return SeriesKey(doc["workload"], doc["metric"], doc["group"])


@dataclass
class CompareResult:
    """B compared with A: the rows of the matched series, the series only one side has, the key
    metadata that differ and the notes."""

    a: Side
    b: Side
    threshold: Threshold
    rows: list[Row]
    only_a: list[SeriesKey]
    only_b: list[SeriesKey]
    differences: list[DifferenceJSON]
    notes: list[str]

    @property
    def unit_of_analysis(self) -> dict[str, str]:
        """Per side (``A``, ``B``), what one value is: ``run``, ``repetition`` or both."""
        def one(units: set[str]) -> str:
            return "/".join(sorted(units)) if units else "-"

        return {"A": one({r.unit_a for r in self.rows}), "B": one({r.unit_b for r in self.rows})}

    def to_json(self) -> CompareJSON:
        """``compare.json`` of this comparison (schema :data:`cloudbench.store.formats.COMPARE`)."""
        t = self.threshold
        return {
            "schema": formats.COMPARE.current, "kind": "cloudbench.compare", "version": __version__,
            "a": self.a.to_json(), "b": self.b.to_json(),
            "threshold": t.text(), "threshold_value": t.value, "threshold_relative": t.relative,
            "alpha": ALPHA, "min_n": MIN_N,
            "unit_of_analysis": self.unit_of_analysis,
            "differences": self.differences,
            "only_a": [_key_json(k) for k in self.only_a],
            "only_b": [_key_json(k) for k in self.only_b],
            "notes": self.notes,
            "method": METHOD,
            "rows": [r.to_json() for r in self.rows],
        }

    @classmethod
    def from_json(cls, doc: CompareJSON, labels: tuple[str, str] = ("A", "B")) -> CompareResult:
        """The comparison back from :meth:`to_json` (the sides without their values); ``labels``:
        the sides' names (the levels of ``--by``)."""
        formats.COMPARE.check(doc.get("schema"), "compare.json")
        relative, value = doc["threshold_relative"], doc["threshold_value"]
        t = Threshold(value, relative, "" if relative else doc["threshold"].removeprefix(f"{value:g}"))
        return cls(Side.from_json(doc["a"], labels[0]), Side.from_json(doc["b"], labels[1]), t,
                   [Row.from_json(r, t) for r in doc["rows"]], [_key(k) for k in doc["only_a"]],
                   [_key(k) for k in doc["only_b"]], list(doc["differences"]), list(doc["notes"]))


def metadata_differences(a: dict[str, str], b: dict[str, str]) -> list[DifferenceJSON]:
    """The key metadata (the pooling keys of ``confirm``) that differ between the sides' first
    repetitions: ``{"key", "a", "b", "detail"}``; JSON-valued keys name their first differing field."""
    out: list[DifferenceJSON] = []
    for k in POOLING_METADATA:
        if k not in a or k not in b or a[k] == b[k]:
            continue
        detail = (json_difference(a[k], b[k], k) if k in JSON_KEYS
                  else f"{k}: {a[k]!r} vs {b[k]!r}")
        out.append({"key": k, "a": a[k], "b": b[k], "detail": detail})
    return out


def _direction(side_a: Side, side_b: Side, workload: str, metric: str) -> Direction | None:
    # the workload kinds (every kind's controller: scipy.stats, asyncssh) load with a comparison, not
    # with this module's names, which `compare --changes` imports (COMPARE_DIR)
    from cloudbench.workloads import KINDS

    kind = side_a.kinds.get(workload) or side_b.kinds.get(workload)
    wk = KINDS.get(kind or workload)
    d = None if wk is None else wk.direction(metric)
    return d if d in ("lower", "higher") else None  # type: ignore[return-value]



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
        if any(r.unit_a == r.unit_b == "repetition" for r in rows):
            notes.append(SINGLE_RUN_NOTE)
        out.append(CompareResult(side_a, side_b, t, rows, sorted(set(va) - set(vb)), sorted(set(vb) - set(va)),
                                 metadata_differences(side_a.metadata, side_b.metadata), notes))
    return out


SINGLE_RUN_NOTE = ("each side is one run: its repetitions are the unit, so whatever differed between the two "
                   "runs' times and machines (load, neighbours, routes) counts as part of the difference; "
                   "repeat each side in 6 or more runs to test at the run level")


def compare(a: str | Path, b: str | Path, *, threshold: Threshold | str = "5%", workloads: Sequence[str] = (),
            metrics: Sequence[str] = (), groups: Sequence[str] = (), hours: Sequence[int] = (),
            allow_mixed: bool = False) -> CompareResult:
    """Compare every series B has in common with A; list the ones only one side has."""
    t = parse_threshold(threshold) if isinstance(threshold, str) else threshold
    side_a = load_side("A", str(a), workloads=workloads, metrics=metrics, groups=groups, hours=hours,
                       allow_mixed=allow_mixed)
    side_b = load_side("B", str(b), workloads=workloads, metrics=metrics, groups=groups, hours=hours,
                       allow_mixed=allow_mixed)
    check_names((side_a, side_b), f"{a} and {b}", workloads, metrics, groups)
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
    read = SideRead(reads[0].path, ",".join(dict.fromkeys(r.campaign for r in reads)), [],
                 {k: v for r in reads for k, v in r.kinds.items()},
                 list(dict.fromkeys(n for r in reads for n in r.notes)))
    sides = {lv: make_side(f"{by}={lv}", f"{by}={lv}", read, levels[lv], workloads=workloads, metrics=metrics,
                           groups=groups, allow_mixed=allow_mixed, ignore=meta_key)
             for lv in order}
    check_names(list(sides.values()), where, workloads, metrics, groups)
    return compare_pairs([(sides[base], sides[lv]) for lv in order if lv != base], t)


# ----------------------------------------------------------------- outputs


class CompareByJSON(TypedDict):
    """``compare.json`` of ``--by``: every level against the baseline, the rows of all (each with
    its sides ``a``/``b``), and each comparison in full under ``comparisons``."""

    schema: int
    kind: str
    version: str
    by: str | None
    baseline: str
    levels: list[str]
    threshold: str
    alpha: float
    min_n: int
    unit_of_analysis: dict[str, str]
    differences: list[dict[str, str]]
    rows: list[dict[str, object]]
    comparisons: list[CompareJSON]


def to_json(res: CompareResult | Sequence[CompareResult], by: str | None = None) -> CompareJSON | CompareByJSON:
    """``compare.json`` (schema 1): one comparison's :meth:`CompareResult.to_json`, or for several
    (``--by``) a :class:`CompareByJSON`."""
    if isinstance(res, CompareResult):
        return res.to_json()
    results = list(res)
    if len(results) == 1 and by is None:
        return results[0].to_json()
    docs = [c.to_json() for c in results]
    return {
        "schema": formats.COMPARE.current, "kind": "cloudbench.compare", "version": __version__, "by": by,
        "baseline": results[0].a.label, "levels": [results[0].a.label] + [c.b.label for c in results],
        "threshold": results[0].threshold.text(), "alpha": ALPHA, "min_n": MIN_N,
        "unit_of_analysis": {c.a.label: c.unit_of_analysis["A"] for c in results}
        | {c.b.label: c.unit_of_analysis["B"] for c in results},
        "differences": [{**cast(dict[str, str], d), "a": c.a.label, "b": c.b.label}
                        for c in results for d in c.differences],
        "rows": [{"a": c.a.label, "b": c.b.label, **row} for c, doc in zip(results, docs, strict=True)
                 for row in doc["rows"]],
        "comparisons": docs,
    }


def from_json(doc: CompareJSON | CompareByJSON) -> list[CompareResult]:
    """The comparisons of a ``compare.json`` (:func:`to_json`): one, or one per level of ``--by``."""
    if "comparisons" in doc:
        by = cast(CompareByJSON, doc)
        levels = by["levels"]
        return [CompareResult.from_json(c, (levels[0], lv))
                for c, lv in zip(by["comparisons"], levels[1:], strict=True)]
    return [CompareResult.from_json(doc)]


def to_frame(res: CompareResult | Sequence[CompareResult]) -> pd.DataFrame:
    """The rows as a pandas DataFrame (``cloudbench.compare``)."""
    results = many(res)
    df = pd.DataFrame([{"a": c.a.label, "b": c.b.label, **r.to_json()} for c in results for r in c.rows])
    df.attrs.update({"threshold": results[0].threshold.text(),
                     "unit_of_analysis": {c.a.label: c.unit_of_analysis["A"] for c in results}
                     | {c.b.label: c.unit_of_analysis["B"] for c in results},
                     "differences": [{**d, "a": c.a.label, "b": c.b.label} for c in results for d in c.differences]})
    return df



def many(res: CompareResult | Sequence[CompareResult]) -> list[CompareResult]:
    """One comparison or several as a list."""
    return [res] if isinstance(res, CompareResult) else list(res)


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

