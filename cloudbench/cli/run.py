"""`cloudbench run` and `cloudbench report`: a campaign, and its report again from disk."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

import cloudbench
from cloudbench.cli.app import app, err, guard, leave_quickly, out, print_warnings
from cloudbench.cli.progress import RichUI
from cloudbench.core.files import is_disk_full

ResultsOption = Annotated[Path, typer.Option(help="result store root")]
HtmlOption = Annotated[Path | None, typer.Option(
    "--html", help="where to write the HTML report  \\[default: <run>/report/index.html]", show_default=False,
    dir_okay=False)]
NoHtmlOption = Annotated[bool, typer.Option("--no-html", help="do not write the HTML report")]


def _report(run_dir: cloudbench.RunDir, html: Path | None, no_html: bool) -> dict[str, Any]:
    """Build the report and write its files and (unless ``no_html``) the one-file HTML report
    (figures also as SVG and PNG beside it), on both cores (:func:`cloudbench.write_outputs`);
    the page's path on stderr; the report."""
    report = cloudbench.build_report(run_dir)
    written = cloudbench.write_outputs(run_dir, report, html, page=not no_html)
    if written.page:
        err.print(f"report: {escape(str(written.page[0]))}", highlight=False, soft_wrap=True)
    return report


@app.command()
@guard
def run(
    spec: Annotated[Path | None, typer.Argument(help="campaign spec (YAML)", show_default=False)] = None,
    results: ResultsOption = Path("results"),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress display")] = False,
    resume: Annotated[Path | None, typer.Option(
        help="finish an interrupted run (results/<campaign>/<run-id>): same seed and plan, remaining "
        "trials only; a trial cut off is run again on fresh hosts, its partial rows kept apart")] = None,
    html: HtmlOption = None,
    no_html: NoHtmlOption = False,
    no_space_check: Annotated[bool, typer.Option(
        "--no-space-check", help="start even when the results filesystem has less free than the plan's "
        "estimated peak plus a margin")] = False,
) -> None:
    """Run a campaign: provision fresh hosts, run the trials, pull results, tear down.

    Exits 4 when the run finished but some trials or repetitions failed (what was
    measured is kept and reported); 5 when the results filesystem is too small for the plan
    (nothing created) or filled up mid-run (the run is recorded failed, nothing measured is lost;
    `run --resume` finishes it once space is freed).
    """
    if (spec is None) == (resume is None):
        raise cloudbench.UsageError("give a SPEC to run, or --resume RUN_DIR to finish an interrupted run")
    if resume is not None:
        if quiet:
            run_dir = cloudbench.resume_run(resume, space_check=not no_space_check)
        else:
            with RichUI(err, len(cloudbench.open_results(resume).manifest().plan.get("trials", []))) as ui:
                run_dir = cloudbench.resume_run(resume, ui=ui, space_check=not no_space_check)
    else:
        assert spec is not None
        s = cloudbench.load_spec(spec)
        print_warnings(s.warnings)
        if quiet:
            run_dir = cloudbench.run_campaign(s, spec, results, space_check=not no_space_check)
        else:
            with RichUI(err, len(cloudbench.make_plan(s).trials)) as ui:
                run_dir = cloudbench.run_campaign(s, spec, results, ui=ui, space_check=not no_space_check)
    with cloudbench.disk_full_recorded(run_dir, "writing the report"):
        report = _report(run_dir, html, no_html)
    cloudbench.render_report(report, out)
    out.print(f"results: {escape(str(run_dir.path))}", highlight=False)
    if report["status"] != "complete":
        reps = run_dir.manifest().repetitions
        lost = sum(r.status != "ok" for r in reps)
        raise cloudbench.IncompleteRunError(f"run {run_dir.run_id} is {report['status']}: {lost} of {len(reps)} "
                                 f"repetition(s) lost, {len(report['failures'])} host failure(s) (trials "
                                 "and deployments); the data measured is kept")


@app.command()
@guard
def report(
    results: Annotated[Path, typer.Argument(help="results/<campaign> or one run directory")],
    run_id: Annotated[str | None, typer.Option("--run", help="run id (default: the latest)")] = None,
    windows: Annotated[bool, typer.Option(help="show windowed means")] = False,
    pairs: Annotated[bool, typer.Option(help="show the per-pair summary")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    html: HtmlOption = None,
    no_html: NoHtmlOption = False,
) -> None:
    """Print the report of a run again from disk (and rewrite its CSV/JSON files and
    report/index.html: one self-contained page with the figures, to open in a browser)."""
    run_dir = cloudbench.open_results(results, run_id)
    try:
        rep = _report(run_dir, html, no_html)
    except OSError as e:  # the run itself is whole: say so, and exit 5 without a traceback
        if not is_disk_full(e):
            raise
        raise cloudbench.DiskFullError(str(run_dir.path), f"writing the report: {e}; the run's data is "
                                       "unchanged: free space and run `cloudbench report` again") from None
    if as_json:
        sys.stdout.write(json.dumps(cloudbench.report_to_json(rep), indent=2) + "\n")
    else:
        cloudbench.render_report(rep, out, windows=windows, pairs=pairs)
    leave_quickly()  # every file written and closed: the report's 1.4 GB are not freed one object at a time
