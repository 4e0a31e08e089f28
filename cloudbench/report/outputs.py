"""Everything ``cloudbench report`` writes once the report is built, on both cores: report.json and the
CSVs in a forked child (:mod:`~cloudbench.report.forked`) while the page draws its figures, themselves
shared with a second child (:func:`~cloudbench.report.html.write_html`).

The page's modules (matplotlib, ~0.5 s) import after the first fork, beside the child writing report.json.
Importing them in a thread while the scan ran cost the scan more than it saved (its threads wait for the
GIL each time they come back from numpy or Arrow: 0.7-1.2 s slower, for ~0.6 s off the tail). A report
without a page (``--no-html``) never imports matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from cloudbench.report.files import write_report
from cloudbench.report.forked import CAN_FORK, Forked
from cloudbench.store.rundir import RunDir


@dataclass
class Written:
    """The files written: report.json and the CSVs (``report``), the page and its figures (``page``,
    the page first; empty without one)."""

    report: list[Path]
    page: list[Path] = field(default_factory=list)


def write_outputs(run: RunDir, report: dict[str, Any], html: Path | None = None, page: bool = True,
                  fork: bool = CAN_FORK) -> Written:
    """Write report.json, a CSV per table (:func:`~cloudbench.report.files.write_report`) and, with
    ``page``, the HTML page (``html``, default ``<run>/report/index.html``) and its figures. With
    ``fork``, report.json and the CSVs are written by a forked child while this process draws the page;
    the files are the same either way."""
    if not page:
        return Written(write_report(run, report))
    if not fork:
        from cloudbench.report.html import write_html  # noqa: PLC0415 - matplotlib only for a page

        return Written(write_report(run, report), write_html(run, report, html, fork=False))
    with Forked(partial(write_report, run, report)) as files:
        try:
            # matplotlib (~0.5 s) imports here, beside the child: only for a page, and after the fork
            from cloudbench.report.html import write_html  # noqa: PLC0415

            pages = write_html(run, report, html)
        except Exception:
            files.result()  # report.json's own error first (a full disk: exit 5), as when written before the page
            raise
        return Written(files.result(), pages)
