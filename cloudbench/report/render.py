"""The report for a person in a terminal: a header, each workload's section, then what went wrong."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from cloudbench.workloads import workload_kind


def render_report(report: dict[str, Any], console: Console, windows: bool = False, pairs: bool = False) -> None:
    """Print ``report`` (``windows``/``pairs``: the long echo tables too)."""
    console.print(
        f"[bold]{report['campaign']}[/] run {report['run_id']} — {report['status']}, "
        f"{report['repetitions']} repetition(s), seed {report['seed']}"
    )
    options = {"windows": windows, "pairs": pairs}
    for wname, w in report["workloads"].items():
        workload_kind(w["kind"]).render_section(wname, w, console, options)
    if report.get("time_of_day"):
        tod = report["time_of_day"]
        console.print(escape(f"time of day ({tod['runs']} runs of the campaign, {tod['timezone']}): "
                             f"{tod['verdict']}; `cloudbench diurnal` for the analysis"), highlight=False)
    if report.get("damaged"):
        console.print(f"[red]{len(report['damaged'])} file(s) differ from the manifest's checksums:[/]")
        for d in report["damaged"]:
            console.print(escape(f"  {d}"), highlight=False)
    if report["failures"]:
        console.print(f"[yellow]{len(report['failures'])} host failure(s):[/]")
        for f in report["failures"]:
            code = "no exit code" if f.get("exit_code") is None else f"exit {f['exit_code']}"
            console.print(escape(f"  {f['trial']} {f['host']}: {f.get('reason') or code}  `{f['command'][:80]}`"),
                          highlight=False)
