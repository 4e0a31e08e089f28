"""Everything ``cloudbench report`` writes once the report is built, on both cores: report.json and the
CSVs in a forked child (:mod:`~cloudbench.report.forked`) while the page draws its figures, themselves
shared with a second child (:func:`~cloudbench.report.html.write_html`).

The page's modules (matplotlib, ~0.5 s to import, and its fonts, loaded by the first figure) load in a
thread while the report is built (:func:`preload_page`): the scan's threads spend their time in numpy,
Arrow and bottleneck without the GIL, so the import takes the idle core, not theirs. A report without a
page (``--no-html``) never imports matplotlib.
"""

from __future__ import annotations

import threading
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


def preload_page() -> threading.Thread:
    """Start importing the page's modules and loading matplotlib's fonts in a thread (a daemon: an
    error in the report ends the command without waiting for it); :func:`write_outputs` joins it
    before it forks."""
    t = threading.Thread(target=_warm_page, name="cloudbench-page-preload", daemon=True)
    t.start()
    return t


def _warm_page() -> None:
    import cloudbench.report.html  # noqa: F401, PLC0415
    from cloudbench.report.figures.style import warm_up  # noqa: PLC0415 - the point: imported in this thread

    warm_up()


def write_outputs(run: RunDir, report: dict[str, Any], html: Path | None = None, page: bool = True,
                  preload: threading.Thread | None = None, fork: bool = CAN_FORK) -> Written:
    """Write report.json, a CSV per table (:func:`~cloudbench.report.files.write_report`) and, with
    ``page``, the HTML page (``html``, default ``<run>/report/index.html``) and its figures. With
    ``fork``, report.json and the CSVs are written by a forked child while this process draws the page;
    the files are the same either way. ``preload`` (:func:`preload_page`) is waited for first."""
    if preload is not None:
        preload.join()  # an import half done in a thread must not be forked
    if not page:
        return Written(write_report(run, report))
    from cloudbench.report.html import write_html  # noqa: PLC0415 - matplotlib only for a page

    if not fork:
        return Written(write_report(run, report), write_html(run, report, html, fork=False))
    with Forked(partial(write_report, run, report)) as files:
        try:
            pages = write_html(run, report, html)
        except Exception:
            files.result()  # report.json's own error first (a full disk: exit 5), as when written before the page
            raise
        return Written(files.result(), pages)
