"""`cloudbench confirm`: how many repetitions a campaign needs, with exact CIs."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

import cloudbench
from cloudbench.cli.app import app, err, guard, out

ProgressFn = Callable[[int, int], None]

DEFAULT_ERRORS = ("1%", "5%")


_NUMBER = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"


def parse_fraction(text: str, option: str) -> float:
    """``"1%"`` -> 0.01, ``"0.01"`` -> 0.01; must lie strictly between 0 and 1."""
    raw = text.strip()
    m = re.fullmatch(rf"({_NUMBER})\s*(%?)", raw)
    if m is None:
        raise cloudbench.UsageError(
            f"{option} {text!r}: not a number or percentage (examples: 1%, 0.05)"
        )
    value = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    if not 0.0 < value < 1.0:
        hint = " (a bare number is a fraction; write 5% for five percent)" if not m.group(2) else ""
        raise cloudbench.UsageError(f"{option} {text!r}: must be between 0 and 100% exclusive{hint}")
    return value


def parse_errors(values: Sequence[str] | None) -> tuple[float, ...]:
    """``--error`` values: repeatable, each possibly comma-separated; sorted, unique."""
    items = [part for v in (values or DEFAULT_ERRORS) for part in v.split(",") if part.strip()]
    if not items:
        raise cloudbench.UsageError("--error: give at least one bound, e.g. --error 1%")
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


@app.command()
@guard
def confirm(
    path: Annotated[Path, typer.Argument(
        metavar="RESULTS", help="results/<campaign> (all its runs) or one run directory",
        show_default=False)],
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
    subsets: Annotated[int, typer.Option(
        "--subsets", "--trials", help="random subsets per size (--trials: its old name)")] = 200,
    seed: Annotated[int, typer.Option(help="seed of the random subsets")] = 0,
    max_sizes: Annotated[int, typer.Option(
        help="evaluate every size up to this many sizes, else a geometric grid")] = 1000,
    allow_mixed: Annotated[bool, typer.Option(
        "--allow-mixed", help="pool repetitions even when their key metadata differ")] = False,
    include_running: Annotated[bool, typer.Option(
        "--include-running", help="pool the repetitions of runs still running too (left out by default)")] = False,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", help="where to write confirm.json and the figures  \\[default: RESULTS/confirm]",
        show_default=False)] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="print confirm.json to stdout instead of the table")] = False,
    hour: Annotated[list[int] | None, typer.Option(
        "--hour", help="pool only repetitions measured in this hour of the day (0-23, the schedule's "
        "time zone; repeatable): a stratum of a scheduled campaign", show_default=False)] = None,
) -> None:
    """How many repetitions are enough? Exact quantile CIs, convergence, assumption checks."""
    # the options checked before the analysis (statsmodels with it) loads: a bad value is refused at once
    q, lvl, errors = parse_quantile(quantile), parse_fraction(level, "--level"), parse_errors(error)
    params = cloudbench.ConfirmParams(
        quantile=q,
        level=lvl,
        errors=errors,
        subsets=subsets,
        seed=seed,
        max_sizes=max_sizes,
    )
    with _progress_bar(err) as progress:
        result = cloudbench.confirm(path, params, metrics=metric or (), groups=group or (),
                                    allow_mixed=allow_mixed, progress=progress, hours=hour or (),
                                    include_running=include_running)
    json_path, figures = cloudbench.write_confirm(
        result, out_dir if out_dir is not None else cloudbench.confirm_dir(path))
    if as_json:
        sys.stdout.write(json.dumps(cloudbench.confirm_to_json(result, figures), indent=2) + "\n")
        return
    cloudbench.render_confirm(result, out)
    out.print(f"wrote {json_path} and {len(figures)} figure(s)", highlight=False)
