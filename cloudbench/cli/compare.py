"""`cloudbench compare A B`: is B better than A, by how much, and does it matter?"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
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
    since: Annotated[list[str] | None, typer.Option(
        "--since", help="only repetitions measured at or after this UTC time: a date or time "
        "(2026-11-16, 2026-11-16T08:00), today, or a time ago (7d, 36h); once: both sides, twice: "
        "A's then B's (with one directory, B is the same directory)", show_default=False)] = None,
    until: Annotated[list[str] | None, typer.Option(
        "--until", help="only repetitions measured before this UTC time (forms as --since, and now); "
        "once: both sides, twice: A's then B's", show_default=False)] = None,
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
        _changes(sides, workload, metric, group, as_json, by, baseline, hour, threshold, since, until, out_dir)
        return
    sides = _windowed(sides, since or [], until or [], by is not None)
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


def _windowed(sides: list[str], since: list[str], until: list[str], by: bool) -> list[str]:
    """The sides with ``--since``/``--until`` applied: given once, to every side; twice, the first
    to A and the second to B (one directory and two windows: A and B are that directory)."""
    for flag, given in (("--since", since), ("--until", until)):
        if len(given) > 2:
            raise cloudbench.UsageError(f"{flag} is given once (every side) or twice (A's, then B's), "
                                        f"not {len(given)} times")
        if len(given) == 2 and by:
            raise cloudbench.UsageError(f"{flag} once with --by (the same window for every directory)")
    if not since and not until:
        return sides
    two = len(since) == 2 or len(until) == 2
    if two and len(sides) == 1:
        sides = [sides[0], sides[0]]
    elif len(sides) == 1 and not by:
        raise cloudbench.UsageError(
            "one directory and one window: give A's and B's windows (--since twice and/or --until twice, "
            "e.g. --since 14d --until 7d --since 7d --until now: last week vs this week), or a second directory")
    if two and len(sides) != 2:
        raise cloudbench.UsageError(f"--since/--until twice goes with two sides A and B (got {len(sides)})")

    def pick(given: list[str], i: int) -> str | None:
        return None if not given else given[min(i, len(given) - 1)]

    now = datetime.now(UTC)  # one "now" for every relative time: 7d is A's end and B's start to the µs
    out = [cloudbench.windowed(s, pick(since, i), pick(until, i), now=now) for i, s in enumerate(sides)]
    if len(out) == 2 and out[0] == out[1] and not by:
        raise cloudbench.UsageError(f"A and B are the same directory and window ({out[0]}): give each side "
                                    "its own window (--since/--until twice)")
    return out


def _changes(sides: list[str], workload: list[str] | None, metric: list[str] | None, group: list[str] | None,
             as_json: bool, by: str | None, baseline: str | None, hour: list[int] | None,
             threshold: str, since: list[str] | None, until: list[str] | None, out_dir: Path) -> None:
    if len(sides) != 1:
        raise cloudbench.UsageError(f"--changes takes one campaign directory (got {len(sides)})")
    if by is not None or baseline is not None or hour:
        raise cloudbench.UsageError("--changes goes without --by, --baseline and --hour")
    if len(since or []) > 1 or len(until or []) > 1:
        raise cloudbench.UsageError("--changes takes one window: --since and --until once each")
    lo, hi = cloudbench.parse_window(since[0] if since else None, until[0] if until else None)
    res = cloudbench.changes(sides[0], workloads=workload or (), metrics=metric or (), groups=group or (),
                             threshold=threshold, since=lo, until=hi)
    page = cloudbench.write_changes(res, out_dir)
    if as_json:
        sys.stdout.write(json.dumps(res, indent=2) + "\n")
    else:
        cloudbench.render_changes(res, out)
        out.print(f"wrote {page}", highlight=False)
