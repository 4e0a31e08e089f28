"""`cloudbench compare A B`: is B better than A, by how much, and does it matter?"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

import cloudbench
from cloudbench.cli.app import app, guard, out
from cloudbench.errors import ExitCode

FAIL_ON = ("worse", "different", "never")


@app.command()
@guard
def compare(
    sides: Annotated[list[str], typer.Argument(
        metavar="A B", help="A (the baseline) and B: results/<campaign>, one run directory, or a time "
        "selection DIR@SINCE..UNTIL (UTC dates or times, either end optional); with --by, one or more "
        "directories whose repetitions are regrouped", show_default=False)],
    workload: Annotated[list[str] | None, typer.Option(
        "--workload", "-w", help="only these workloads (repeatable)", show_default=False)] = None,
    metric: Annotated[list[str] | None, typer.Option(
        "--metric", "-m", help="only these metrics (repeatable)", show_default=False)] = None,
    group: Annotated[list[str] | None, typer.Option(
        "--group", "-g", help="only these groups (repeatable)", show_default=False)] = None,
    threshold: Annotated[str, typer.Option(
        "--threshold", "-t", help="a change smaller than this does not matter: relative (5%, 0.05) "
        "or absolute with a unit (50us, 2ms, 100Mbit/s)")] = "5%",
    hour: Annotated[list[int] | None, typer.Option(
        "--hour", help="only repetitions measured in this hour of the day (0-23, the schedule's time "
        "zone; repeatable), on both sides", show_default=False)] = None,
    allow_mixed: Annotated[bool, typer.Option(
        "--allow-mixed", help="pool a side's repetitions even when their key metadata differ")] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="print compare.json to stdout instead of the table")] = False,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="write compare/index.html and compare/compare.json under this directory")] = Path("."),
    by: Annotated[str | None, typer.Option(
        "--by", help="regroup by this key and compare each level with the baseline: provider, region, "
        "zone, vm_type, hour, or a swept parameter (payload)", show_default=False)] = None,
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help="with --by: the level the others are compared with  \\[default: the first]",
        show_default=False)] = None,
    fail_on: Annotated[str, typer.Option(
        "--fail-on", help="exit with code 6 when a row is `worse` (or `different`: worse or better, "
        "or a change of a metric without a direction); `never`: exit 0")] = "never",
    changes: Annotated[bool, typer.Option(
        "--changes", help="one scheduled campaign DIR: change points of each series over its runs (UTC "
        "time, size relative to the level before with a 95% interval, p-value Holm-adjusted over series); "
        "listed when beyond --threshold")] = False,
) -> None:
    """Compare two campaigns (or runs, or time spans): per series, B vs A with intervals, a p-value
    and a verdict (better, worse, equivalent, inconclusive) against a threshold."""
    if fail_on not in FAIL_ON:
        raise cloudbench.UsageError(f"--fail-on {fail_on!r}: one of {', '.join(FAIL_ON)}")
    if changes:
        _changes(sides, workload, metric, group, as_json, by, baseline, hour, threshold)
        return
    common: dict[str, Any] = {"threshold": threshold, "workloads": workload or (), "metrics": metric or (),
              "groups": group or (), "hours": hour or (), "allow_mixed": allow_mixed}
    if by is not None:
        results = cloudbench.compare_by(sides, by, baseline=baseline, **common)
    elif len(sides) != 2:
        raise cloudbench.UsageError(f"compare takes two sides A and B (got {len(sides)}); "
                                    "to compare levels of one or more directories, add --by KEY")
    elif baseline is not None:
        raise cloudbench.UsageError("--baseline goes with --by")
    else:
        results = [cloudbench.compare_result(sides[0], sides[1], **common)]
    page = cloudbench.write_compare(results, out_dir, by)
    if as_json:
        sys.stdout.write(json.dumps(cloudbench.compare_to_json(results, by), indent=2) + "\n")
    else:
        cloudbench.render_compare(results, out)
        out.print(f"wrote {page}", highlight=False)
    verdicts = {r.result.verdict for res in results for r in res.rows}
    failing = {"worse"} if fail_on == "worse" else {"worse", "better", "different"} if fail_on == "different" else set()
    if verdicts & failing:
        raise typer.Exit(int(ExitCode.WORSE))


def _changes(sides: list[str], workload: list[str] | None, metric: list[str] | None, group: list[str] | None,
             as_json: bool, by: str | None, baseline: str | None, hour: list[int] | None,
             threshold: str) -> None:
    if len(sides) != 1:
        raise cloudbench.UsageError(f"--changes takes one campaign directory (got {len(sides)})")
    if by is not None or baseline is not None or hour:
        raise cloudbench.UsageError("--changes goes without --by, --baseline and --hour")
    res = cloudbench.changes(sides[0], workloads=workload or (), metrics=metric or (), groups=group or (),
                             threshold=threshold)
    if as_json:
        sys.stdout.write(json.dumps(res, indent=2) + "\n")
    else:
        cloudbench.render_changes(res, out)
