"""``report/index.html``: the report people look at, one self-contained file.

The page reads in the order a reader decides what to believe: what ran and
whether it can be trusted (status, damaged files, failures, the workers' CPU and
late rounds, every warning of the report), then each workload's figures and
tables, then the repetition analysis when ``confirm.json`` exists, and the
metadata at the end (spec, seed, hosts with labels and facts, versions).

The tables and lines are the terminal report's own (:func:`~cloudbench.report.render.report_views`):
the page shows every table row, warning and note the terminal prints, and adds figures.

Figures are matplotlib SVG inlined in the page (also written as
``report/figures/*.svg`` and ``*.png``); there is no script and no URL, so the
file opens over ``file://`` on a machine without a network. Every figure is
drawn from report.json's sections (:mod:`cloudbench.report.figures`).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from matplotlib.figure import Figure
from matplotlib.text import Text

from cloudbench.core.blocks import Block, ReportLine, table_cells
from cloudbench.core.files import utc_stamp
from cloudbench.core.tables import rep_number
from cloudbench.core.version import __version__
from cloudbench.errors import ResultError
from cloudbench.report.figures import section_figures
from cloudbench.report.figures.style import Note, Plot, inline_svg, save
from cloudbench.report.files import CONFIRM_DIR, REPORT_DIR
from cloudbench.report.forked import CAN_FORK, Forked
from cloudbench.report.render import ReportViews, report_views
from cloudbench.store import formats
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.echo.report import health_text

if TYPE_CHECKING:
    from cloudbench.report.confirm import ConfirmDoc

HTML_NAME = "index.html"
FIGURES_DIR = "figures"

CSS = """
body{font-family:"DejaVu Sans",Arial,sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#111;
line-height:1.4}
h1{font-size:1.5em;margin-bottom:.2em}h2{border-bottom:2px solid #444;padding-bottom:.1em;margin-top:2em}
h3{margin-top:1.4em}
nav ul{columns:3;font-size:.9em}
.status{display:inline-block;padding:.1em .6em;border:2px solid;font-weight:bold}
.ok{color:#05603a}.bad{color:#a4161a}.warn{color:#8a5a00}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border-bottom:1px solid #bbb;padding:.15em .5em;text-align:right;vertical-align:top}
th{border-bottom:2px solid #444}td.l,th.l{text-align:left}
figure{margin:1em 0;border:1px solid #ddd;padding:.5em}
figure svg{max-width:100%;height:auto;display:block}
figcaption{font-size:.85em;color:#333}
pre{background:#f4f4f4;padding:.6em;overflow:auto;font-size:.8em}
.small{font-size:.85em;color:#444}.note{font-size:.9em;color:#333}
@media print{nav{display:none}figure{break-inside:avoid}}
"""


def esc(x: Any) -> str:
    """Text for the page, escaped."""
    return html.escape(str(x), quote=True)


def cell(v: Any, digits: int = 1) -> str:
    """A table cell: numbers rounded, NaN and null as ``–``."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}f}"
    return esc(v)


def table(rows: Sequence[dict[str, Any]], cols: Sequence[tuple[str, str]], left: Sequence[str] = (),
          digits: int = 1) -> str:
    """An HTML table of ``rows``; ``cols`` are (key, header) pairs."""
    if not rows:
        return ""
    head = "".join(f'<th class="{"l" if k in left else ""}">{esc(h)}</th>' for k, h in cols)
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if k in left else ""}">{cell(r.get(k), digits)}</td>' for k, _ in cols)
        + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class Page:
    """The page being assembled: sections of HTML and the figures saved so far."""

    def __init__(self, figures_dir: Path) -> None:
        self.figures_dir = figures_dir
        self.parts: list[str | Plot] = []
        """The page's HTML in order; a figure stands as its Plot until it is saved."""
        self.toc: list[tuple[str, str]] = []
        self.plots: list[Plot] = []
        self.saved: dict[str, tuple[str, list[Path]]] = {}
        self.written: list[Path] = []
        self.names: set[str] = set()
        self.shown: set[str] = set()
        """Lines of the terminal report already on the page (the workers' health, under "Can it be trusted?")."""

    def heading(self, text: str, anchor: str) -> None:
        self.toc.append((anchor, text))
        self.parts.append(f'<h2 id="{esc(anchor)}">{esc(text)}</h2>')

    def add(self, fragment: str) -> None:
        self.parts.append(fragment)

    def figure(self, plot: Plot | Note) -> None:
        """Place ``plot`` (saved as SVG and PNG under figures/ by :meth:`save_figures`, its SVG
        inlined with its caption); a note (a figure with nothing to draw) is printed in its place,
        no file written."""
        if isinstance(plot, Note):
            self.parts.append(f'<p class="note"><b>{esc(plot.title)}.</b> {esc(plot.text)}</p>')
            return
        name = plot.name
        k = 2
        while name in self.names:
            name, k = f"{plot.name}-{k}", k + 1
        self.names.add(name)
        plot.name = name
        self.plots.append(plot)
        self.parts.append(plot)

    def save_figures(self, fork: bool) -> None:
        """Save every figure placed (SVG and PNG), about half the work by a forked child with ``fork``
        (:func:`split_by_text`): the figures are drawn, rendering them is the page's work (SVG and PNG
        in turn, on one core otherwise)."""
        mine, theirs = split_by_text(self.plots) if fork and len(self.plots) > 1 else (self.plots, [])
        child = Forked(partial(_saved, theirs, self.figures_dir)) if theirs else None
        try:
            self.saved = _saved(mine, self.figures_dir)
            if child is not None:
                self.saved |= child.result()
        finally:
            if child is not None:
                child.stop()  # on an error here: the child's figures are not waited for
            for p in self.plots:
                _close(p.figure)
        self.written = [path for p in self.plots for path in self.saved[p.name][1]]

    def text(self) -> str:
        """The page's sections, each figure with its SVG inlined (after :meth:`save_figures`)."""
        return "".join(self._figure_html(p) if isinstance(p, Plot) else p for p in self.parts)

    def _figure_html(self, plot: Plot) -> str:
        svg = self.saved[plot.name][0]
        return (f'<figure id="fig-{esc(plot.name)}">{inline_svg(svg, plot.alt)}'
                f"<figcaption><b>{esc(plot.title)}.</b> {esc(plot.alt)} "
                f'<span class="small">(files: {FIGURES_DIR}/{esc(plot.name)}.svg, .png)</span></figcaption></figure>')


def split_by_text(plots: list[Plot]) -> tuple[list[Plot], list[Plot]]:
    """``plots`` in two lists of about equal rendering work, each in the page's order: the most
    costly first, each to the lighter side (longest processing time first). A figure's cost is its
    number of texts: laying out and drawing text is most of a figure's SVG and PNG (on the 138 M run
    the src × dst grid's 315 texts took 0.68 s, the 30 of the quorum plot 0.09 s; every other half
    left the grid and the tail plot on one side)."""
    cost = {p.name: len(p.figure.findobj(Text)) + 1 for p in plots}
    sides: tuple[list[Plot], list[Plot]] = ([], [])
    load = [0, 0]
    for p in sorted(plots, key=lambda p: -cost[p.name]):  # sorted() is stable: ties keep the page's order
        side = 0 if load[0] <= load[1] else 1
        sides[side].append(p)
        load[side] += cost[p.name]
    order = {p.name: i for i, p in enumerate(plots)}
    mine, theirs = (sorted(s, key=lambda p: order[p.name]) for s in sides)
    return mine, theirs


def _saved(plots: list[Plot], folder: Path) -> dict[str, tuple[str, list[Path]]]:
    """Each plot saved as SVG and PNG in ``folder``: its name -> its SVG text and the paths."""
    return {p.name: save(p, folder) for p in plots}


def to_the_second(stamp: str | None) -> str:
    """An ISO UTC time as the terminal prints it, to the second (``2026-11-26T09:17:40Z``; the
    manifest keeps microseconds); ``?`` for none, anything unreadable as it is."""
    if not stamp:
        return "?"
    try:
        return utc_stamp(datetime.fromisoformat(stamp.replace("Z", "+00:00")))
    except ValueError:
        return stamp


def _close(fig: Figure) -> None:
    fig.clear()


# ---------------------------------------------------------------------- sections


def _trust(page: Page, report: dict[str, Any], views: ReportViews) -> None:
    page.heading("Can it be trusted?", "trust")
    status = report.get("status", "?")
    cls = "ok" if status == "complete" else "bad"
    page.add(f'<p>Run status: <span class="status {cls}">{esc(status)}</span>, '
             f"{esc(report.get('repetitions'))} repetition(s), "
             f"started {esc(to_the_second(report.get('started_utc')))}, "
             f"ended {esc(to_the_second(report.get('ended_utc')))} (UTC).</p>")
    if not report.get("damaged"):
        page.add('<p class="ok">Every file matches the checksum the run recorded.</p>')
    if not report.get("failures"):
        page.add('<p class="ok">No host failed.</p>')
    for b in views.trouble:  # damaged files and host failures, as the terminal prints them
        page.add(block_html(b))
    for wname, w in report.get("workloads", {}).items():
        health = w.get("workers")
        if health:
            share = health["late_sends"] / health["rounds"] if health.get("rounds") else 0.0
            cls = "warn" if health["cpu_pct_max"] > 50 or share > 0.01 else "ok"
            text = health_text(wname, health)
            page.shown.add(text)  # said here, not again under the workload's tables
            page.add(f'<p class="{cls}">{esc(text)}.</p>')
    # every warning the terminal prints, each naming its workload
    warnings = views.warnings()
    if warnings:
        page.add(f'<p class="warn"><b>{len(warnings)} warning(s)</b> (each also under its table below)</p><ul>'
                 + "".join(f'<li class="warn">{esc(m)}</li>' for m in warnings) + "</ul>")
    else:
        page.add('<p class="ok">No warnings.</p>')


def block_html(b: Block) -> str:
    """A table or line of the terminal report as HTML: the same title, headers, cells and text
    (a table's full headers; its rows as printed, without the terminal's layout)."""
    if isinstance(b, ReportLine):
        return f'<p class="{LINE_CLASS[b.kind]}">{esc(b.printed())}</p>'
    headers, rows = table_cells(b)
    left = [c.justify == "left" for c in b.columns]

    def td(tag: str, text: str, is_left: bool) -> str:
        return f'<{tag} class="{"l" if is_left else ""}">{"<br>".join(esc(x) for x in text.splitlines())}</{tag}>'

    head = "".join(td("th", h, lf) for h, lf in zip(headers, left, strict=True))
    body = "".join("<tr>" + "".join(td("td", c, lf) for c, lf in zip(r, left, strict=True)) + "</tr>" for r in rows)
    title = f"<h3>{esc(b.title)}</h3>" if b.title else ""
    return f"{title}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


LINE_CLASS = {"warning": "warn", "note": "note", "fact": "fact"}


def _workloads(page: Page, report: dict[str, Any], views: ReportViews) -> None:
    for wname, w in report.get("workloads", {}).items():
        page.heading(f"{wname} ({w.get('kind', '?')})", f"w-{wname}")
        if "rows" in w:
            page.add(f'<p class="small">{w["rows"]:,} rows of observations.</p>')
        for plot in section_figures(wname, w):
            page.figure(plot)
        for b in views.workloads.get(wname, []):
            if not (isinstance(b, ReportLine) and b.text in page.shown):
                page.add(block_html(b))


def _time_of_day(page: Page, tod: dict[str, Any], views: ReportViews) -> None:
    """A scheduled campaign's verdict, the hour × weekday heat maps and the coverage grid."""
    from cloudbench.report.figures.diurnal import time_of_day_figure  # noqa: PLC0415 - scheduled campaigns only

    page.heading("Time of day (the campaign so far)", "time-of-day")
    for b in views.time_of_day:
        page.add(block_html(b))
    plot = time_of_day_figure(tod)
    if plot is not None:
        page.figure(plot)


def find_confirm(run: RunDir) -> Path | None:
    """The ``confirm.json`` of the run's campaign (or of the run alone), if ``cloudbench confirm`` wrote one."""
    # confirm/ (where `cloudbench confirm` writes), then beside the runs (where it wrote before)
    for p in (run.path.parent / CONFIRM_DIR / "confirm.json", run.path / CONFIRM_DIR / "confirm.json",
              run.path.parent / "confirm.json", run.path / "confirm.json"):
        if p.is_file():
            return p
    return None


def _confirm(page: Page, path: Path) -> None:
    """The repetition analysis as ``cloudbench confirm`` prints it (:func:`confirm_views` of the
    result read back from ``confirm.json``: the same tables and lines), with its convergence figure."""
    # the repetition analysis (statsmodels with its checks) loads only for a page that shows it
    from cloudbench.report.confirm import confirm_from_document, confirm_views  # noqa: PLC0415
    from cloudbench.report.figures.confirm import convergence_figure  # noqa: PLC0415

    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ResultError(str(path), f"not a readable confirm.json: {e}") from e
    if not isinstance(doc, dict):
        raise ResultError(str(path), "confirm.json is not a JSON object")
    formats.CONFIRM.check(doc.get("schema"), str(path))
    try:
        result = confirm_from_document(cast("ConfirmDoc", doc))
    except (KeyError, TypeError, ValueError) as e:
        raise ResultError(str(path), f"confirm.json lacks a field or has a wrong value: {e!r}") from e
    page.heading("How many repetitions? (confirm)", "confirm")
    page.add(f'<p class="small">From {esc(path.parent.name)}/{esc(path.name)}, as '
             "<code>cloudbench confirm</code> prints it.</p>")
    plot = convergence_figure(doc)
    if plot is not None:
        page.figure(plot)
    for b in confirm_views(result, mixed=list(doc.get("mixed_metadata") or [])):
        page.add(block_html(b))


def _metadata(page: Page, report: dict[str, Any], manifest: Manifest) -> None:
    page.heading("Metadata", "metadata")
    page.add(f"<p>Campaign {esc(manifest.campaign)}, run {esc(manifest.run_id)}, seed {esc(manifest.seed)}; "
             f"spec {esc(manifest.spec_path)} (sha256 {esc(manifest.spec_sha256[:16])}…).</p>")
    hosts = []
    for r in manifest.repetitions:
        for h in r.hosts:
            facts = ", ".join(f"{k}={v}" for k, v in sorted(h.facts.items()) if not isinstance(v, dict | list))
            hosts.append({"repetition": rep_number(r.index), "name": h.name, **h.labels, "address": h.address,
                          "facts": facts})
    label_keys = sorted({k for r in manifest.repetitions for h in r.hosts for k in h.labels})
    page.add("<h3>Hosts</h3>" + table(
        hosts, [("repetition", "rep"), ("name", "host"), *[(k, k) for k in label_keys], ("address", "address"),
                ("facts", "facts")], left=("name", *label_keys, "address", "facts")))
    versions = {"cloudbench (this report)": __version__, "worker version": manifest.worker_version,
                **{f"worker {k}": json.dumps(v, sort_keys=True) for k, v in manifest.workers.items()},
                **{f"controller {k}": v for k, v in manifest.controller.items()},
                **{f"clock {k}": v for k, v in manifest.clock.items()}}
    page.add("<h3>Versions</h3>" + table([{"what": k, "value": str(v)} for k, v in versions.items()],
                                         [("what", "what"), ("value", "value")], left=("what", "value")))
    page.add("<h3>Spec</h3><details><summary>the spec as the run read it</summary><pre>"
             + esc(json.dumps(manifest.spec, indent=2, sort_keys=False)) + "</pre></details>")


def render_html(run: RunDir, report: dict[str, Any], figures_dir: Path,
                fork: bool = CAN_FORK) -> tuple[str, list[Path]]:
    """The page's text, and the figure files written into ``figures_dir`` (half of them by a forked
    child with ``fork``: the same files either way)."""
    manifest = run.manifest()
    page = Page(figures_dir)
    views = report_views(report)  # what the terminal prints, shown in the same words
    _trust(page, report, views)
    _workloads(page, report, views)
    if report.get("time_of_day"):
        _time_of_day(page, report["time_of_day"], views)
    confirm_path = find_confirm(run)
    if confirm_path is not None:
        _confirm(page, confirm_path)
    _metadata(page, report, manifest)
    page.save_figures(fork)
    nav = "<nav><ul>" + "".join(f'<li><a href="#{esc(a)}">{esc(t)}</a></li>' for a, t in page.toc) + "</ul></nav>"
    title = f"{report.get('campaign', '?')} — run {report.get('run_id', '?')}"
    text = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"generator\" content=\"cloudbench {esc(__version__)}\"><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{esc(title)}</h1><p>{esc(views.header.text)}</p>"
            f"<p class=\"small\">cloudbench report; one file, nothing loaded from elsewhere. "
            f"Figures are also under {FIGURES_DIR}/ as SVG and PNG.</p>"
            f"{nav}{page.text()}</body></html>\n")
    return text, page.written


def write_html(run: RunDir, report: dict[str, Any], path: Path | None = None, fork: bool = CAN_FORK) -> list[Path]:
    """Write the page (default ``<run>/report/index.html``) and its figures (``figures/``
    beside the page; with ``fork`` half of them saved by a forked child); the paths written, the page first."""
    path = path or run.path / REPORT_DIR / HTML_NAME
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        text, figs = render_html(run, report, path.parent / FIGURES_DIR, fork)
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        except BaseException:  # a full disk leaves no index.html.tmp
            tmp.unlink(missing_ok=True)
            raise
    except OSError as e:
        raise ResultError(str(path), f"cannot write the HTML report: {e.strerror or e}") from e
    return [path, *figs]
