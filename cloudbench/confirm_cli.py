"""`cloudbench confirm`: how many repetitions a campaign needs, with exact CIs.

The command function :func:`confirm` is registered by :mod:`cloudbench.cli`
(``app.command("confirm")(guard(confirm))``); it raises CloudbenchError
subclasses and leaves printing errors and exiting to the CLI. This module also
renders the analysis of :mod:`cloudbench.analysis.confirm`: a rich table, a
JSON document (``confirm.json``) and one convergence figure (PNG) per series.

confirm.json format history:
    schema 1 -- first version.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cloudbench.analysis.confirm import (
    ConfirmParams,
    ConfirmResult,
    ProgressFn,
    SeriesResult,
    Target,
)
from cloudbench.analysis.confirm import confirm as run_confirm
from cloudbench.analysis.stats import level_name, quantile_name
from cloudbench.errors import CloudbenchError, ResultError
from cloudbench.results import write_json_atomic

CONFIRM_JSON_SCHEMA = 1
DEFAULT_ERRORS = ("1%", "5%")


class ConfirmUsageError(CloudbenchError):
    """A `cloudbench confirm` option has a value it cannot use."""

    exit_status = 2


# ------------------------------------------------------------------- parsing

_NUMBER = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"


def parse_fraction(text: str, option: str) -> float:
    """``"1%"`` -> 0.01, ``"0.01"`` -> 0.01; must lie strictly between 0 and 1."""
    raw = text.strip()
    m = re.fullmatch(rf"({_NUMBER})\s*(%?)", raw)
    if m is None:
        raise ConfirmUsageError(
            f"{option} {text!r}: not a number or percentage (examples: 1%, 0.05)"
        )
    value = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    if not 0.0 < value < 1.0:
        hint = " (a bare number is a fraction; write 5% for five percent)" if not m.group(2) else ""
        raise ConfirmUsageError(f"{option} {text!r}: must be between 0 and 100% exclusive{hint}")
    return value


def parse_errors(values: Sequence[str] | None) -> tuple[float, ...]:
    """``--error`` values: repeatable, each possibly comma-separated; sorted, unique."""
    items = [part for v in (values or DEFAULT_ERRORS) for part in v.split(",") if part.strip()]
    if not items:
        raise ConfirmUsageError("--error: give at least one bound, e.g. --error 1%")
    return tuple(sorted({parse_fraction(item, "--error") for item in items}))


def parse_quantile(text: str) -> float:
    """``0.5``, ``50%``, ``median``, ``p90``, ``p99.9``."""
    raw = text.strip().lower()
    if raw == "median":
        return 0.5
    m = re.fullmatch(rf"p({_NUMBER})", raw)
    if m is not None:
        return parse_fraction(m.group(1) + "%", "--quantile")
    return parse_fraction(raw, "--quantile")


# ------------------------------------------------------------------ rendering


def pct(e: float) -> str:
    return f"{e * 100:.3g}%"


def fmt_value(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    if abs(x) >= 10_000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _floats(xs: Any) -> list[float | None]:
    return [_finite(float(x)) for x in xs]


def target_text(t: Target) -> str:
    """``1%: 152`` when reached; ``1%: ~4324 (+4024)*`` when predicted."""
    if t.n_needed is not None:
        return f"{pct(t.error)}: {t.n_needed}"
    if t.prediction is not None:
        flag = "?" if not t.prediction.reliable else ""
        return f"{pct(t.error)}: ~{t.prediction.n} (+{t.prediction.more})*{flag}"
    return f"{pct(t.error)}: -"


def series_label(r: SeriesResult, several_workloads: bool) -> str:
    k = r.series.key
    return f"{k.workload}:{k.metric}" if several_workloads else k.metric


def _short_warnings(r: SeriesResult) -> str:
    names = [c.name for c in r.checks if c.warned]
    if not r.ci.exists:
        names.insert(0, "n too small")
    if r.series.dropped:
        names.append("dropped values")
    if any(t.prediction is not None and not t.prediction.reliable for t in r.targets):
        names.append("prediction unreliable")
    if r.series.mismatches:
        names.append("mixed metadata")
    return ", ".join(names) if names else "[green]none[/]"


def render_table(result: ConfirmResult, console: Console) -> None:
    p = result.params
    several = len({r.series.key.workload for r in result.series}) > 1
    ds = result.dataset
    title = (
        f"{result.quantile_name} per repetition, exact {level_name(p.level)} CI - "
        f"{ds.campaign or ds.path} ({len(ds.runs)} run(s))"
    )
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("metric", overflow="fold")
    table.add_column("group", overflow="fold")
    table.add_column("n", justify="right")
    table.add_column(result.quantile_name, justify="right")
    table.add_column("CI", justify="center")
    table.add_column("±rel", justify="right")
    table.add_column("n for ±e")
    table.add_column("warnings", overflow="fold")
    for r in result.series:
        ci = r.ci
        ci_txt = f"[{fmt_value(ci.lower)}, {fmt_value(ci.upper)}]" if ci.exists else "[yellow]none[/]"
        rel = ci.relative_half_width
        rel_txt = "-" if rel is None or not math.isfinite(rel) else pct(rel)
        unit = f" {r.series.unit}" if r.series.unit else ""
        table.add_row(
            series_label(r, several), r.series.key.group, str(r.series.n),
            fmt_value(ci.estimate) + unit, ci_txt, rel_txt,
            "\n".join(target_text(t) for t in r.targets), _short_warnings(r),
        )
    console.print(table)
    for note in ds.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    for r in result.series:
        if not r.warnings:
            continue
        console.print(f"[bold]{series_label(r, several)} / {r.series.key.group}[/]:", highlight=False)
        for w in r.warnings:
            console.print(f"  [yellow]![/] {w}", highlight=False, soft_wrap=True)
    if any(t.prediction is not None for r in result.series for t in r.targets):
        console.print(
            "* PREDICTED: not reached by the measured repetitions; extrapolated from the 1/√n "
            "law (+ = repetitions still to run). ? = unreliable, the CI does not shrink as 1/√n.",
            highlight=False,
        )


def result_to_json(result: ConfirmResult, figures: dict[int, str] | None = None) -> dict[str, Any]:
    """The whole analysis as a JSON-ready dict (``confirm.json``, schema 1)."""
    p, ds = result.params, result.dataset
    figures = figures or {}
    series = []
    for i, r in enumerate(result.series):
        s, ci, conv = r.series, r.ci, r.convergence
        series.append({
            "workload": s.key.workload,
            "metric": s.key.metric,
            "group": s.key.group,
            "unit": s.unit,
            "n": s.n,
            "estimate": _finite(ci.estimate),
            "ci": None if ci.ranks is None else {
                "lower": ci.lower, "upper": ci.upper, "j": ci.ranks.j, "k": ci.ranks.k,
                "coverage": ci.ranks.coverage,
            },
            "ci_note": ci.note,
            "n_required_for_ci": ci.n_required,
            "relative_half_width": _finite(ci.relative_half_width),
            "targets": [
                {
                    "error": t.error,
                    "reached": t.reached,
                    "n_needed": t.n_needed,
                    "prediction": None if t.prediction is None else {
                        "n": t.prediction.n,
                        "more": t.prediction.more,
                        "law": "relative half-width = a / sqrt(n)",
                        "a": t.prediction.fit.a,
                        "fit_sizes": [t.prediction.fit.n_lo, t.prediction.fit.n_hi],
                        "free_slope": _finite(t.prediction.fit.slope),
                        "reliable": t.prediction.reliable,
                    },
                    "note": t.note,
                }
                for t in r.targets
            ],
            "checks": [
                {"name": c.name, "method": c.method, "status": c.status, "message": c.message,
                 "values": {k: _finite(v) for k, v in c.values.items()}}
                for c in r.checks
            ],
            "warnings": list(r.warnings),
            "dropped": [str(ref) for ref in s.dropped],
            "repetitions": [
                {"run_id": ref.run_id, "repetition": ref.repetition, "value": _finite(float(v))}
                for ref, v in zip(s.refs, s.values, strict=True)
            ],
            "convergence": None if conv is None else {
                "trials": conv.trials,
                "every_size": conv.every_size,
                "sizes": conv.sizes.tolist(),
                "estimate": _floats(conv.estimate),
                "lower": _floats(conv.lower),
                "upper": _floats(conv.upper),
                "relative_half_width": _floats(conv.relative_half_width),
            },
            "figure": figures.get(i),
        })
    return {
        "schema": CONFIRM_JSON_SCHEMA,
        "kind": "cloudbench.confirm",
        "path": str(ds.path),
        "campaign": ds.campaign,
        "runs": ds.runs,
        "params": {
            "quantile": p.quantile, "quantile_name": quantile_name(p.quantile),
            "level": p.level, "errors": list(p.errors), "trials": p.trials, "seed": p.seed,
            "max_sizes": p.max_sizes, "alpha": p.alpha,
            "allow_mixed": ds.allow_mixed,
        },
        "method": {
            "ci": "exact order-statistic CI from the binomial (Le Boudec, Thm. 2.1); "
                  "shortest rank interval, symmetric for the median",
            "estimate": "Hyndman & Fan definition 7",
            "convergence": "mean over random subsets without replacement per size "
                           "(CONFIRM, Maricq et al. OSDI'18); n needed = smallest size "
                           "within ±e that stays within at every larger size",
        },
        "metadata": ds.metadata,
        "mixed_metadata": ds.mismatch_descriptions(),
        "notes": ds.notes,
        "series": series,
    }


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "series"


def figure_name(r: SeriesResult) -> str:
    k = r.series.key
    return f"confirm-{_slug(k.workload)}-{_slug(k.metric)}-{_slug(k.group)}.png"


_ERROR_STYLES = (":", "--", "-.", (0, (1, 4)))


def draw_convergence(r: SeriesResult, params: ConfirmParams, path: Path) -> None:
    """CONFIRM-style figure (Uta et al. Fig. 13/19): mean estimate and mean CI
    band vs n, with the ±e bounds around the estimate and the n needed."""
    conv = r.convergence
    if conv is None:
        raise ValueError("no convergence curve to draw")
    fig = Figure(figsize=(7.5, 5.0), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)  # Agg without pyplot: no global backend state
    ax = fig.add_subplot()
    n = conv.sizes
    qn = quantile_name(params.quantile)
    ax.fill_between(n, conv.lower, conv.upper, color="#9ecae1", alpha=0.7, linewidth=0,
                    label=f"{level_name(params.level)} CI (mean of {conv.trials} subsets)")
    ax.plot(n, conv.estimate, color="#08519c", linewidth=2.2, label=f"{qn} (mean of subsets)")
    notes = []
    for t, style in zip(r.targets, _ERROR_STYLES * 4, strict=False):
        band = t.error * abs(conv.estimate)
        ax.plot(n, conv.estimate + band, color="#cb181d", linestyle=style, linewidth=1,
                label=f"±{pct(t.error)} of the {qn}")
        ax.plot(n, conv.estimate - band, color="#cb181d", linestyle=style, linewidth=1)
        if t.n_needed is not None:
            ax.axvline(t.n_needed, color="#cb181d", linestyle=style, linewidth=0.8, alpha=0.6)
            notes.append(f"±{pct(t.error)}: n = {t.n_needed}")
        elif t.prediction is not None:
            rel = "" if t.prediction.reliable else ", unreliable"
            notes.append(f"±{pct(t.error)}: PREDICTED n ≈ {t.prediction.n} "
                         f"(+{t.prediction.more}, 1/√n law{rel})")
    if notes:
        ax.text(0.99, 0.02, "\n".join(notes), transform=ax.transAxes, ha="right", va="bottom",
                fontsize=8, bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85})
    k = r.series.key
    ax.set_xlabel("repetitions n (random subsets of the measured ones)")
    ax.set_ylabel(f"{k.metric} [{r.series.unit}]" if r.series.unit else k.metric)
    ax.set_title(f"{k.workload}: {k.metric} / {k.group}  (N = {r.series.n})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    fig.savefig(path)


def write_outputs(result: ConfirmResult, out: Path) -> tuple[Path, dict[int, str]]:
    """Write ``confirm.json`` and one PNG per series with a curve into ``out``."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        figures: dict[int, str] = {}
        used: set[str] = set()
        for i, r in enumerate(result.series):
            if r.convergence is None or len(r.convergence.sizes) == 0:
                continue
            name = figure_name(r)
            while name in used:
                name = name.removesuffix(".png") + f"-{i}.png"
            used.add(name)
            draw_convergence(r, result.params, out / name)
            figures[i] = name
        json_path = out / "confirm.json"
        write_json_atomic(json_path, result_to_json(result, figures))
    except OSError as e:
        raise ResultError(str(out), f"cannot write the confirm outputs: {e.strerror or e}") from e
    return json_path, figures


@contextmanager
def _progress_bar(console: Console) -> Iterator[ProgressFn]:
    with Progress(
        TextColumn("confirm"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task("confirm", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


# ------------------------------------------------------------------- command


def confirm(
    path: Annotated[Path, typer.Argument(
        help="results/<campaign> (all its runs) or one run directory", show_default=False)],
    metric: Annotated[list[str] | None, typer.Option(
        "--metric", "-m", help="only these metrics (repeatable)", show_default=False)] = None,
    group: Annotated[list[str] | None, typer.Option(
        "--group", "-g", help="only these groups (repeatable)", show_default=False)] = None,
    error: Annotated[list[str] | None, typer.Option(
        "--error", "-e", help="relative error bound(s): 1%, 5%, 0.01; repeatable or "
        "comma-separated  \\[default: 1%, 5%]", show_default=False)] = None,
    level: Annotated[str, typer.Option(help="confidence level, e.g. 0.95 or 99%")] = "0.95",
    quantile: Annotated[str, typer.Option(
        help="quantile of the per-repetition values: 0.5, median, p90, 0.99")] = "0.5",
    trials: Annotated[int, typer.Option(help="random subsets per size")] = 200,
    seed: Annotated[int, typer.Option(help="seed of the random subsets")] = 0,
    max_sizes: Annotated[int, typer.Option(
        help="evaluate every size up to this many sizes, else a geometric grid")] = 1000,
    allow_mixed: Annotated[bool, typer.Option(
        "--allow-mixed", help="pool repetitions even when their key metadata differ")] = False,
    out: Annotated[Path | None, typer.Option(
        help="where to write confirm.json and the figures  \\[default: the results dir]",
        show_default=False)] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="print confirm.json to stdout instead of the table")] = False,
) -> None:
    """How many repetitions are enough? Exact quantile CIs, convergence, assumption checks."""
    params = ConfirmParams(
        quantile=parse_quantile(quantile),
        level=parse_fraction(level, "--level"),
        errors=parse_errors(error),
        trials=trials,
        seed=seed,
        max_sizes=max_sizes,
    )
    stderr = Console(stderr=True, soft_wrap=True)
    with _progress_bar(stderr) as progress:
        result = run_confirm(path, params, metrics=metric or (), groups=group or (),
                             allow_mixed=allow_mixed, progress=progress)
    json_path, figures = write_outputs(result, out if out is not None else path)
    if as_json:
        sys.stdout.write(json.dumps(result_to_json(result, figures), indent=2) + "\n")
        return
    console = Console(soft_wrap=True)
    render_table(result, console)
    console.print(f"wrote {json_path} and {len(figures)} figure(s)", highlight=False)
