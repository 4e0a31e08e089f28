"""The repetition analysis of a campaign on disk: load, analyse, and show it.

:func:`load_values` reads every run's ``summaries.parquet`` and manifest and
checks pooling; :func:`confirm` applies :mod:`cloudbench.analysis.confirm`;
the rest renders the result: a rich table, ``confirm.json`` (versioned in
:data:`cloudbench.store.formats.CONFIRM`) and one convergence figure (PNG) per
series.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np
from rich.console import Console

from cloudbench.analysis.confirm import (
    ConfirmParams,
    ConfirmResult,
    Dataset,
    Outcome,
    ParamsJSON,
    ProgressFn,
    RepetitionRef,
    RepetitionValue,
    SeriesJSON,
    SeriesKey,
    SeriesResult,
    Target,
    TargetJSON,
    analyse,
)
from cloudbench.analysis.prediction import MIN_SPAN, SLOPE_BAND, SLOPE_LEVEL, PredictionJSON
from cloudbench.analysis.quantiles import quantile_name
from cloudbench.analysis.stats import level_name
from cloudbench.core.blocks import Block, fact, note, print_blocks, warning
from cloudbench.core.files import slug, write_json_atomic
from cloudbench.core.tables import ReportTable, natural_key, titled_table
from cloudbench.core.units import fmt_quantity, natural_unit
from cloudbench.errors import AnalysisError, ResultError
from cloudbench.report.confirm_text import (
    MIXED_WORDS,
    check_pooling,
    mismatch_descriptions,
    no_fit_line,
    series_warnings,
    target_note,
    too_few_line,
    unreliable_reason,
)
from cloudbench.report.diurnal import repetition_hours, time_of_day_notes
from cloudbench.report.files import CONFIRM_DIR
from cloudbench.store import formats
from cloudbench.store.manifest import RESOLVED_POOLING_METADATA, Manifest, pooling_key
from cloudbench.store.rundir import RunDir, find_runs
from cloudbench.store.summaries import SUMMARY_SCHEMA, read_summaries

if TYPE_CHECKING:
    from matplotlib.figure import Figure

INCLUDE_RUNNING_FLAG = "--include-running"
"""The CLI flag that pools the repetitions of runs still running."""

# ------------------------------------------------------------------ rendering


def pct(e: float) -> str:
    """``0.01`` -> ``1%``; ``21.8`` -> ``2,180%`` (never an exponent)."""
    return f"{e * 100:,.0f}%" if abs(e) >= 10 else f"{e * 100:.3g}%"


def fmt_value(x: float | None) -> str:
    """A value for a table: 4 significant digits, thousands separated from 10,000 on, ``-`` for none."""
    if x is None or not math.isfinite(x):
        return "-"
    if abs(x) >= 10_000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def target_text(t: Target) -> str:
    """``152`` when reached; ``~4324*`` when predicted (``~4324*?`` a rough guess); ``-`` neither."""
    if t.n_needed is not None:
        return str(t.n_needed)
    if t.prediction is not None:
        flag = "?" if not t.prediction.reliable else ""
        return f"~{t.prediction.n}*{flag}"
    return "-"


def series_label(r: SeriesResult, several_workloads: bool) -> str:
    """The metric, prefixed by its workload when several workloads are shown."""
    k = r.series.key
    return f"{k.workload}:{k.metric}" if several_workloads else k.metric


def _too_few(result: ConfirmResult) -> dict[tuple[int, int], list[SeriesResult]]:
    """The series with fewer repetitions than any CI of the quantile needs, by (n, n needed)."""
    by_n: dict[tuple[int, int], list[SeriesResult]] = defaultdict(list)
    for r in result.series:
        if not r.ci.exists:
            by_n[(r.series.n, r.ci.n_required)].append(r)
    return by_n


def _confirm_table(result: ConfirmResult, rows: Sequence[SeriesResult], title: str, with_metric: bool,
                   several: bool) -> ReportTable:
    """The table of ``rows``: a metric column unless the title names the one metric, an n column
    unless every row has the same n (the title says it)."""
    p, qn = result.params, result.quantile_name
    errors = "/".join(f"±{pct(e)}" for e in p.errors)
    ns = {r.series.n for r in rows}
    columns = [*(["metric"] if with_metric else []), "group", *(["n"] if len(ns) > 1 else []), qn,
               f"{level_name(p.level)} CI", "±rel", f"n for {errors}"]
    if len(ns) == 1:
        title += f", n = {ns.pop()} each"
    # cells never wrap (a number over two lines reads as two); a name is one word; when the row
    # does not fit, the table is stacked (a column per series), never cut
    table = titled_table(title, columns, left=("metric", "group"), key=2 if with_metric else 1)
    for r in rows:
        ci, unit = r.ci, r.series.unit
        factor, name = natural_unit(ci.estimate, unit)
        rel = ci.relative_half_width
        table.add_row(
            *([series_label(r, several)] if with_metric else []), r.series.key.group,
            *([str(r.series.n)] if "n" in columns else []),
            fmt_quantity(ci.estimate, unit),
            ci_cell(fmt_quantity(ci.lower, unit, factor), fmt_quantity(ci.upper, unit, factor), name),
            "-" if rel is None or not math.isfinite(rel) else pct(rel),
            "/".join(target_text(t) for t in r.targets),
        )
    return table


def ci_cell(lo: str, hi: str, unit: str) -> str:
    """``0.3598–3.422 ms``, ``0–0%``: the interval in its estimate's unit, which it names."""
    if lo == "-" or hi == "-":
        return "-"
    return f"{lo}–{hi}%" if unit == "%" else f"{lo}–{hi} {unit}".rstrip()


def _series_order(r: SeriesResult) -> tuple[Any, ...]:
    k = r.series.key
    return (k.workload, k.metric, natural_key(k.group))  # payload=64 before payload=1024


def confirm_views(result: ConfirmResult, width: int | None = None,
                  mixed: Sequence[str] | None = None) -> list[Block]:
    """The confirm result as tables and lines (:mod:`cloudbench.core.blocks`), what the terminal
    prints and the page shows, in the same words: a table row per series with a CI (its CI and
    the repetitions each error bound needs), one line for all the series too short for a CI, one
    for the bounds neither reached nor predicted, the dataset's notes, every warning (a warning
    of several series once) and what the table's marks mean.

    ``width``: the terminal's, where one table too wide becomes a table per metric (the page
    passes none: one table); ``mixed``: the pooled metadata differences in words (default: the
    dataset's; the page passes ``confirm.json``'s ``mixed_metadata``)."""
    p = result.params
    several = len({r.series.key.workload for r in result.series}) > 1
    ds = result.dataset
    qn = result.quantile_name
    too_few = _too_few(result)
    shown = sorted((r for r in result.series if r.ci.exists), key=_series_order)
    errors = "/".join(f"±{pct(e)}" for e in p.errors)
    title = (f"{qn} per repetition, exact {level_name(p.level)} CI - {ds.campaign or ds.path} "
             f"({len(ds.runs)} run(s))")
    out: list[Block] = []
    if shown:
        table = _confirm_table(result, shown, title, True, several)
        if width is None or table.fits(width):
            out.append(table)
        else:  # a table per metric: the metric in its title, the rows narrower by its column
            by_metric: dict[str, list[SeriesResult]] = defaultdict(list)
            for r in shown:
                by_metric[series_label(r, several)].append(r)
            out.append(fact(title))
            out += [_confirm_table(result, rows, metric, False, several) for metric, rows in by_metric.items()]
        out.append(note(f"±rel: the CI's half-width relative to the {qn}; n for {errors}: the repetitions "
                        "after which the CI stays within that bound (- not reached: see below)"))
    for (n, need), rs in sorted(too_few.items(), key=lambda kv: kv[0]):
        out.append(warning(too_few_line(n, need, p.level, qn, len(rs))))
    no_fit: dict[tuple[int, int], dict[float, int]] = defaultdict(lambda: defaultdict(int))
    for r in shown:
        for t in r.targets:
            if t.outcome is Outcome.NO_FIT:
                no_fit[(t.n, t.n_for_ci)][t.error] += 1
    for (n, need), missed in sorted(no_fit.items()):
        out.append(warning(no_fit_line(n, need, missed)))
    out += [note(text) for text in ds.notes]
    out += [warning(f"{MIXED_WORDS}{text}") for text in (mismatch_descriptions(ds.mismatches) if mixed is None
                                                           else mixed)]
    out += _warning_lines({f"{series_label(r, several)} / {r.series.key.group}":
                           [w for w in series_warnings(r, no_fit=False) if not w.startswith(MIXED_WORDS)]
                           for r in shown})
    if any(t.prediction is not None for r in shown for t in r.targets):
        out.append(note(
            "* PREDICTED: not reached by the measured repetitions; extrapolated from the 1/√n "
            "law. ? = a rough guess: the slope or its "
            f"{SLOPE_LEVEL:.0%} interval leaves [{SLOPE_BAND[0]:g}, {SLOPE_BAND[1]:g}], the fit spans "
            f"less than {MIN_SPAN:g}× in n, or a check of independence, stationarity, trend or "
            "modes warned or could not run (the reasons are in the warnings)."))
    return out


def render_confirm(result: ConfirmResult, console: Console) -> None:
    """Print the confirm result (:func:`confirm_views` for the console's width)."""
    print_blocks(confirm_views(result, console.width), console)


SHARED = 3
"""A warning of this many series or more is printed once, naming them, not under each."""


def _warning_lines(by_series: Mapping[str, Sequence[str]]) -> list[Block]:
    """Each series' warnings, each line naming its series; a warning word for word the same in
    several series once, with how many and which (the zero estimate of twelve timeout fractions
    is one line)."""
    holders: dict[str, list[str]] = defaultdict(list)
    for name, ws in by_series.items():
        for w in ws:
            holders[w].append(name)
    shared = {w for w, names in holders.items() if len(names) >= SHARED}
    out: list[Block] = []
    for w in sorted(shared, key=lambda w: -len(holders[w])):
        names = holders[w]
        some = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append(warning(f"{w} ({len(names)} series: {some})"))
    for name, ws in by_series.items():
        out += [warning(f"{name}: {w}") for w in ws if w not in shared]
    return out


class PredictionDoc(PredictionJSON):
    """A prediction in ``confirm.json``: its numbers and why it is (not) reliable."""

    reason: str


class TargetDoc(TargetJSON):
    """A target in ``confirm.json``: its numbers and what they mean."""

    note: str


class SeriesDoc(SeriesJSON):
    """A series in ``confirm.json``: its numbers, its warnings and its figure's file name."""

    warnings: list[str]
    figure: str | None


class MethodDoc(TypedDict):
    """``method`` of ``confirm.json``: how each number was computed."""

    ci: str
    estimate: str
    convergence: str


class ConfirmDoc(TypedDict):
    """``confirm.json`` (:data:`cloudbench.store.formats.CONFIRM`)."""

    schema: int
    kind: str
    path: str
    campaign: str
    runs: list[str]
    params: ParamsJSON
    method: MethodDoc
    metadata: dict[str, str]
    mixed_metadata: list[str]
    notes: list[str]
    series: list[SeriesDoc]


METHOD: MethodDoc = {
    "ci": "exact order-statistic CI from the binomial (Le Boudec, Thm. 2.1); "
          "shortest rank interval, symmetric for the median",
    "estimate": "Hyndman & Fan definition 7",
    "convergence": "mean over random subsets without replacement per size "
                   "(CONFIRM, Maricq et al. OSDI'18); n needed = smallest size "
                   "within ±e that stays within at every larger size",
}

# A series' keys in confirm.json: its numbers, with the warnings after the checks.
_SERIES_ORDER = tuple(SeriesJSON.__annotations__)
_WARNINGS_AT = _SERIES_ORDER.index("checks") + 1


def _target_doc(t: Target) -> TargetDoc:
    doc = t.to_json()
    pred: PredictionDoc | None = None
    if t.prediction is not None and doc["prediction"] is not None:
        pred = {**doc["prediction"], "reason": unreliable_reason(t.prediction)}
    return {**doc, "prediction": pred, "note": target_note(t)}


def _series_doc(r: SeriesResult, figure: str | None) -> SeriesDoc:
    nums = {**r.to_json(), "targets": [_target_doc(t) for t in r.targets]}
    keys = (*_SERIES_ORDER[:_WARNINGS_AT], "warnings", *_SERIES_ORDER[_WARNINGS_AT:], "figure")
    full = {**nums, "warnings": series_warnings(r), "figure": figure}
    return cast(SeriesDoc, {k: full[k] for k in keys})


def confirm_document(result: ConfirmResult, figures: Mapping[int, str] | None = None) -> ConfirmDoc:
    """``confirm.json``: the results' own numbers (``to_json``) with their words."""
    ds, figures = result.dataset, figures or {}
    return {
        "schema": formats.CONFIRM.current,
        "kind": "cloudbench.confirm",
        "path": str(ds.path),
        "campaign": ds.campaign,
        "runs": ds.runs,
        "params": result.params.to_json(ds.allow_mixed),
        "method": METHOD,
        "metadata": ds.metadata,
        "mixed_metadata": mismatch_descriptions(ds.mismatches),
        "notes": ds.notes,
        "series": [_series_doc(r, figures.get(i)) for i, r in enumerate(result.series)],
    }


def confirm_from_document(doc: ConfirmDoc) -> ConfirmResult:
    """The analysis back from ``confirm.json`` (:func:`confirm_document`): its parameters and
    every series' numbers. The dataset holds each series' finite values with the first
    repetition's metadata; the metadata differences are kept only as words
    (``mixed_metadata``)."""
    params = ConfirmParams.from_json(doc["params"])
    series = tuple(SeriesResult.from_json(s, params) for s in doc["series"])
    values = [RepetitionValue(ref, r.series.key.workload, r.series.key.metric, r.series.key.group,
                              float(v), r.series.unit, 0, doc["metadata"])
              for r in series for ref, v in zip(r.series.refs, r.series.values, strict=True)]
    ds = Dataset(doc["path"], doc["campaign"], list(doc["runs"]), values, dict(doc["metadata"]),
                 notes=list(doc["notes"]), allow_mixed=doc["params"]["allow_mixed"])
    return ConfirmResult(ds, params, series)


def figure_name(r: SeriesResult) -> str:
    """``confirm-<workload>-<metric>-<group>.png``, each part made file-name safe."""
    k = r.series.key
    return f"confirm-{slug(k.workload, 'series')}-{slug(k.metric, 'series')}-{slug(k.group, 'series')}.png"


_ERROR_STYLES = (":", "--", "-.", (0, (1, 4)))


def draw_convergence(r: SeriesResult, params: ConfirmParams, path: Path) -> None:
    """CONFIRM-style figure (Uta et al. Fig. 13/19) of a series, saved to ``path``
    (:func:`convergence_plot`)."""
    convergence_plot(r, params).savefig(path)


def convergence_plot(r: SeriesResult, params: ConfirmParams) -> Figure:
    """CONFIRM-style figure (Uta et al. Fig. 13/19): mean estimate and mean CI
    band vs n, with the ±e bounds around the estimate and the n needed; the values in
    the estimate's natural unit (ms from 1,000 us on, a fraction in %), as the tables."""
    # matplotlib loads with the first figure: `compare --changes` imports this module for fmt_value
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    conv = r.convergence
    if conv is None:
        raise ValueError("no convergence curve to draw")
    fig = Figure(figsize=(7.5, 5.0), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)  # Agg without pyplot: no global backend state
    ax = fig.add_subplot()
    n = conv.sizes
    qn = quantile_name(params.quantile)
    finite_est = np.abs(conv.estimate[np.isfinite(conv.estimate)])
    factor, unit = (natural_unit(float(finite_est.max()), r.series.unit) if r.series.unit and finite_est.size
                    else (1.0, r.series.unit))
    est = conv.estimate * factor
    ax.fill_between(n, conv.lower * factor, conv.upper * factor, color="#9ecae1", alpha=0.7, linewidth=0,
                    label=f"{level_name(params.level)} CI (mean of {conv.subsets} subsets)")
    ax.plot(n, est, color="#08519c", linewidth=2.2, label=f"{qn} (mean of subsets)")
    notes = []
    for t, style in zip(r.targets, _ERROR_STYLES * 4, strict=False):
        band = t.error * abs(est)
        ax.plot(n, est + band, color="#cb181d", linestyle=style, linewidth=1,
                label=f"±{pct(t.error)} of the {qn}")
        ax.plot(n, est - band, color="#cb181d", linestyle=style, linewidth=1)
        if t.n_needed is not None:
            ax.axvline(t.n_needed, color="#cb181d", linestyle=style, linewidth=0.8, alpha=0.6)
            notes.append(f"±{pct(t.error)}: n = {t.n_needed}")
        elif t.prediction is not None:
            rel = "" if t.prediction.reliable else ", rough guess"
            notes.append(f"±{pct(t.error)}: PREDICTED n ≈ {t.prediction.n} "
                         f"(+{t.prediction.more}, 1/√n law{rel})")
    if notes:
        ax.text(0.99, 0.02, "\n".join(notes), transform=ax.transAxes, ha="right", va="bottom",
                fontsize=8, bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85})
    k = r.series.key
    ax.set_xlabel("repetitions n (random subsets of the measured ones)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # n is a count: no 6.25 repetitions
    ax.set_ylabel(f"{k.metric} [{unit}]" if unit else k.metric)
    ax.set_title(f"{k.workload}: {k.metric} / {k.group}  (N = {r.series.n})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    return fig


def confirm_dir(path: Path) -> Path:
    """Where confirm writes by default: ``confirm/`` under the campaign (or run) directory."""
    return Path(path) / CONFIRM_DIR


def write_confirm(result: ConfirmResult, out: Path) -> tuple[Path, dict[int, str]]:
    """Write ``confirm.json`` and one PNG per series with a curve (two sizes or more) into ``out``
    (the CLI's default: :func:`confirm_dir` of the results)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        figures: dict[int, str] = {}
        used: set[str] = set()
        for i, r in enumerate(result.series):
            if r.convergence is None or len(r.convergence.sizes) < 2:
                continue  # a single size is a point, not a curve: an empty panel
            name = figure_name(r)
            while name in used:
                name = name.removesuffix(".png") + f"-{i}.png"
            used.add(name)
            draw_convergence(r, result.params, out / name)
            figures[i] = name
        json_path = out / "confirm.json"
        write_json_atomic(json_path, confirm_document(result, figures))
    except OSError as e:
        raise ResultError(str(out), f"cannot write the confirm outputs: {e.strerror or e}") from e
    return json_path, figures


# ------------------------------------------------------------------- command


def _summary_rows(run: RunDir) -> list[dict[str, Any]]:
    table = read_summaries(run)
    missing = [c for c in SUMMARY_SCHEMA.names if c not in table.column_names]
    if missing:
        raise ResultError(str(run.summaries_path), f"lacks column(s) {', '.join(missing)}")
    rows: list[dict[str, Any]] = table.select(SUMMARY_SCHEMA.names).to_pylist()
    return rows


def _metadata(run: RunDir, manifest: Manifest, repetition: int) -> dict[str, str]:
    try:
        return pooling_key(manifest, repetition, str(run.manifest_path))
    except (KeyError, TypeError) as e:
        raise ResultError(
            str(run.manifest_path),
            f"repetition {repetition} lacks host labels needed to check pooling ({e!r})",
        ) from e


def load_values(path: Path, *, metrics: Sequence[str] = (), groups: Sequence[str] = (),
                allow_mixed: bool = False, include_running: bool = False) -> Dataset:
    """Per-repetition values of every run under ``path``, checked for pooling; a run still running
    is left out with a note unless ``include_running``.

    ``metrics``/``groups`` restrict the analysis (exact names; unknown names
    raise AnalysisError listing the known ones). Raises ResultError for missing,
    truncated or corrupted manifests and summaries.
    """
    path = Path(path)
    runs = find_runs(path)
    values: list[RepetitionValue] = []
    metas: dict[RepetitionRef, dict[str, str]] = {}
    notes: list[str] = []
    campaign = ""
    for run in runs:
        manifest = run.manifest()
        campaign = campaign or manifest.campaign
        status = manifest.status
        if status == "running" and not include_running:
            notes.append(f"run {run.run_id} is still running; its repetitions are left out "
                         f"({INCLUDE_RUNNING_FLAG} includes them)")
            continue
        if status != "complete":
            notes.append(f"run {run.run_id} has status {status!r}; its repetitions are included")
        if manifest.resolved is None:
            notes.append(
                f"run {run.run_id}: its manifest (schema {manifest.schema_version}) records names, "
                "not resolved values; its repetitions are pooled on names and workload entries as "
                f"written ({', '.join(RESOLVED_POOLING_METADATA)} not compared)")
        seen: set[tuple[int, str, str, str]] = set()
        for row in _summary_rows(run):
            rep = int(row["repetition"])
            ident = (rep, row["workload"], row["metric"], row["group"])
            if ident in seen:
                raise ResultError(
                    str(run.summaries_path),
                    f"duplicate summary row for repetition {rep}, workload {row['workload']!r}, "
                    f"metric {row['metric']!r}, group {row['group']!r}",
                )
            seen.add(ident)
            ref = RepetitionRef(run.run_id, rep)
            if ref not in metas:
                metas[ref] = _metadata(run, manifest, rep)
            value = math.nan if row["value"] is None else float(row["value"])
            values.append(
                RepetitionValue(ref, str(row["workload"]), str(row["metric"]), str(row["group"]),
                                value, str(row["unit"] or ""), int(row["n_obs"] or 0), metas[ref])
            )
    if not values and runs and all(r.manifest().status == "running" for r in runs) and not include_running:
        raise ResultError(str(path), f"every run is still running; pass {INCLUDE_RUNNING_FLAG} to analyse "
                                     "what they have measured so far")
    if not values:
        raise ResultError(
            str(path),
            f"no per-repetition summaries in {len(runs)} run(s) (summaries.parquet missing or "
            "empty); was the campaign run to completion?",
        )
    values = _select(path, values, "metric", metrics)
    values = _select(path, values, "group", groups)
    used = {v.ref for v in values}
    series_refs: dict[SeriesKey, list[RepetitionRef]] = defaultdict(list)
    for v in values:
        series_refs[SeriesKey(v.workload, v.metric, v.group)].append(v.ref)
    mismatches = check_pooling(path, series_refs, metas, allow_mixed)
    run_pos = {run.run_id: i for i, run in enumerate(runs)}
    first = min(used, key=lambda r: (run_pos[r.run_id], r.repetition))
    return Dataset(str(path), campaign, [r.run_id for r in runs], values, dict(metas[first]),
                   mismatches, notes, allow_mixed)


def _select(path: Path, values: list[RepetitionValue], attr: str,
            wanted: Sequence[str]) -> list[RepetitionValue]:
    if not wanted:
        return values
    known = sorted({getattr(v, attr) for v in values})
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise AnalysisError(
            f"{path}: unknown {attr}(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(known)}"
        )
    return [v for v in values if getattr(v, attr) in wanted]


def confirm(path: Path, params: ConfirmParams | None = None, *, metrics: Sequence[str] = (),
            groups: Sequence[str] = (), allow_mixed: bool = False,
            progress: ProgressFn | None = None, hours: Sequence[int] = (),
            include_running: bool = False) -> ConfirmResult:
    """Load ``results/<campaign>`` (or one run) and analyse it; runs still running are left out
    (with a note) unless ``include_running``.

    ``hours``: pool only repetitions measured in these hours of the day (the schedule's
    time zone; a stratum of a scheduled campaign). The runs of a scheduled campaign are
    checked for a time-of-day effect, and each series that has one gets a note.
    """
    dataset = load_values(path, metrics=metrics, groups=groups, allow_mixed=allow_mixed,
                          include_running=include_running)
    if hours:
        if any(not 0 <= h <= 23 for h in hours):
            raise AnalysisError(f"--hour takes hours 0..23, got {list(hours)}")
        at = repetition_hours(path)
        kept = [v for v in dataset.values if at.get((v.ref.run_id, v.ref.repetition, v.workload)) in hours]
        if not kept:
            raise AnalysisError(f"{path}: no repetition was measured in hour(s) {sorted(set(hours))}")
        dataset.values = kept
        dataset.notes.append(f"pooled within hour(s) {', '.join(map(str, sorted(set(hours))))} of the day only")
    else:
        dataset.notes += time_of_day_notes(path, {(v.workload, v.metric, v.group) for v in dataset.values})
    return analyse(dataset, params or ConfirmParams(), progress)
