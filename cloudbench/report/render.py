"""The report for a person: a header, each workload's section, then what went wrong.

:func:`report_views` turns report.json into tables and lines (:mod:`cloudbench.core.blocks`);
the terminal prints them (:func:`render_report`) and the HTML page shows the same ones
(:mod:`cloudbench.report.html`), so the page carries every fact the terminal prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.text import Text

from cloudbench.core.blocks import Block, ReportLine, fact, print_blocks, print_line, warning
from cloudbench.core.tables import titled_table
from cloudbench.workloads import workload_kind


@dataclass
class ReportViews:
    """A report's tables and lines, in the order the terminal prints them."""

    header: ReportLine
    workloads: dict[str, list[Block]] = field(default_factory=dict)
    time_of_day: list[Block] = field(default_factory=list)
    trouble: list[Block] = field(default_factory=list)
    """Files that differ from the manifest's checksums, and host failures."""

    def blocks(self) -> list[Block]:
        """Every block in printing order."""
        return [self.header, *(b for bs in self.workloads.values() for b in bs), *self.time_of_day,
                *self.trouble]

    def warnings(self) -> list[str]:
        """Every warning line's text, each naming its workload (the page's "Can it be trusted?")."""
        out = []
        for wname, bs in self.workloads.items():
            out += [b.text if b.text.startswith(wname) else f"{wname}: {b.text}" for b in bs
                    if isinstance(b, ReportLine) and b.kind == "warning"]
        out += [b.text for b in [*self.time_of_day, *self.trouble] if isinstance(b, ReportLine) and b.kind == "warning"]
        return out


def report_views(report: dict[str, Any], windows: bool = False, pairs: bool = False) -> ReportViews:
    """The tables and lines of ``report`` (``windows``/``pairs``: the long echo tables too)."""
    views = ReportViews(fact(f"{report['campaign']} run {report['run_id']} — {report['status']}, "
                             f"{report['repetitions']} repetition(s), seed {report['seed']}"))
    options = {"windows": windows, "pairs": pairs}
    for wname, w in report["workloads"].items():
        views.workloads[wname] = workload_kind(w["kind"]).section_views(wname, w, options)
    if report.get("time_of_day"):
        tod = report["time_of_day"]
        views.time_of_day.append(fact(f"time of day ({tod['runs']} runs of the campaign, {tod['timezone']}): "
                                      f"{tod['verdict']}; `cloudbench diurnal` for the analysis"))
    for d in report.get("damaged") or []:
        views.trouble.append(warning(f"{d}: the file differs from the manifest's checksum (changed or lost "
                                     "since the run wrote it)"))
    if report["failures"]:
        t = titled_table(f"{len(report['failures'])} host failure(s) (trials and deployments)",
                         ("trial", "host", "reason", "command"), left=("trial", "host", "reason", "command"), key=2)
        for f in report["failures"]:
            code = "no exit code" if f.get("exit_code") is None else f"exit {f['exit_code']}"
            t.add_row(*map(Text, (str(f["trial"]), str(f["host"]), str(f.get("reason") or code),
                                  str(f["command"])[:80])))
        views.trouble += [warning(f"{len(report['failures'])} host failure(s): the table below"), t]
    return views


def render_report(report: dict[str, Any], console: Console, windows: bool = False, pairs: bool = False) -> None:
    """Print ``report`` (``windows``/``pairs``: the long echo tables too)."""
    views = report_views(report, windows, pairs)
    print_line(console, Text(views.header.text, style="bold"))
    print_blocks(views.blocks()[1:], console)
