"""``cloudbench compare DIR --changes`` as a page: ``compare/changes.html`` (one self-contained
file, no script, no request) with a figure per series that has a change listed: its run values
over UTC time, each change point, the levels either side and the interval of the level after
(the level before plus the difference's 95 % interval); ``compare/changes.json`` beside it."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

from cloudbench.core.files import write_json_atomic
from cloudbench.core.units import unit_name
from cloudbench.core.version import __version__
from cloudbench.errors import ResultError
from cloudbench.report.changes import ChangeJSON, ChangesJSON, SeriesJSON, size_text
from cloudbench.report.compare import COMPARE_DIR
from cloudbench.report.confirm import fmt_value

HTML_NAME = "changes.html"
JSON_NAME = "changes.json"

_CSS = """
body{font-family:"DejaVu Sans",Arial,sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#111}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border-bottom:1px solid #bbb;padding:.15em .5em;text-align:right}th{border-bottom:2px solid #444}
td.l,th.l{text-align:left}.small{font-size:.85em;color:#444}
figure{margin:1em 0;border:1px solid #ddd;padding:.5em}figcaption{font-size:.85em;color:#333}
"""


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def series_svg(s: SeriesJSON, changes: list[ChangeJSON]) -> str:
    """One series: its runs (dots) over UTC time, a dashed line between the last run at the old
    level and the first at the new one for each change, the levels either side (lines) and the
    95 % interval of the level after (shaded: level before + the difference's interval)."""
    pts = sorted((p[0], p[1]) for p in s["run_values"])
    if not pts:
        return "<p class='small'>no run values</p>"
    ts = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    for c in changes:
        ys += [c["level_before"] + c["diff_ci"][0], c["level_before"] + c["diff_ci"][1]]
    t0, t1 = min(ts), max(ts)
    y0, y1 = min(ys), max(ys)
    pad = (y1 - y0) * 0.08 or abs(y0) * 0.05 or 1.0
    y0, y1 = y0 - pad, y1 + pad
    left, width, top, height = 70, 960, 12, 220

    def x(t: float) -> float:
        return left + (t - t0) / ((t1 - t0) or 1.0) * width

    def y(v: float) -> float:
        return top + (y1 - v) / (y1 - y0) * height

    sizes = "; ".join(f"{size_text(c)[0]} {size_text(c)[1]} since {c['time_utc']}" for c in changes)
    alt = f"{s['metric']} / {s['group']}: {len(pts)} runs, {len(changes)} change(s): {sizes}"
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" height="{top + height + 40}" '
             f'font-family="DejaVu Sans,Arial,sans-serif" font-size="11" role="img" '
             f'aria-label="{html.escape(alt)}">']
    order = sorted(changes, key=lambda c: _epoch(c["time_utc"]))
    cuts = [0.5 * (_epoch(c["previous_run_utc"]) + _epoch(c["time_utc"])) for c in order]
    bounds = [t0, *cuts, t1]
    for i, c in enumerate(order):
        lo, hi = c["level_before"] + c["diff_ci"][0], c["level_before"] + c["diff_ci"][1]
        xa, xb = x(bounds[i + 1]), x(bounds[i + 2])
        parts.append(f'<rect x="{xa:.1f}" y="{y(hi):.1f}" width="{xb - xa:.1f}" height="{max(y(lo) - y(hi), 1):.1f}" '
                     f'fill="#f4cccc"><title>95% interval of the level after: '
                     f'{html.escape(fmt_value(lo))}..{html.escape(fmt_value(hi))} {html.escape(unit_name(c["unit"]))}'
                     '</title></rect>')
    for t, v in pts:
        parts.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2" fill="#1d4e89"/>')
    for i, c in enumerate(order):
        xc = x(cuts[i])
        parts.append(f'<line x1="{xc:.1f}" y1="{top}" x2="{xc:.1f}" y2="{top + height}" stroke="#a4161a" '
                     f'stroke-dasharray="4,3"><title>{html.escape(c["time_utc"])}</title></line>')
        for level, a, b in ((c["level_before"], bounds[i], bounds[i + 1]),
                            (c["level_after"], bounds[i + 1], bounds[i + 2])):
            parts.append(f'<line x1="{x(a):.1f}" y1="{y(level):.1f}" x2="{x(b):.1f}" y2="{y(level):.1f}" '
                         'stroke="#a4161a" stroke-width="2"/>')
        size, _ = size_text(c)
        parts.append(f'<text x="{xc + 4:.1f}" y="{top + 12}" fill="#a4161a">{html.escape(size)}</text>')
    base = top + height
    parts.append(f'<line x1="{left}" y1="{base}" x2="{left + width}" y2="{base}" stroke="#444"/>'
                 f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#444"/>')
    for k in range(5):
        t = t0 + (t1 - t0) * k / 4
        label = datetime.fromtimestamp(t, UTC).strftime("%m-%d %H:%M")
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"  # the ends stay inside the figure
        parts.append(f'<text x="{x(t):.1f}" y="{base + 14}" text-anchor="{anchor}">{label}</text>')
        v = y0 + (y1 - y0) * k / 4
        parts.append(f'<text x="{left - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{html.escape(fmt_value(v))}</text>')
    parts.append(f'<text x="{left + width / 2}" y="{base + 30}" text-anchor="middle">UTC time (one dot per run; '
                 f'{html.escape(unit_name(s["unit"]))})</text></svg>')
    return "".join(parts)


def to_html(res: ChangesJSON) -> str:
    """The page: a figure per series with a change listed, the table of changes, the notes."""
    e = html.escape
    by_series: dict[tuple[str, str, str], list[ChangeJSON]] = {}
    for c in res["changes"]:
        by_series.setdefault((c["workload"], c["metric"], c["group"]), []).append(c)
    figures = []
    for s in res["series"]:
        cs = by_series.get((s["workload"], s["metric"], s["group"]))
        if not cs:
            continue
        removed = (" The diurnal test found a time-of-day effect; a sinusoid was removed before the search."
                   if s["time_of_day_removed"] else "")
        figures.append(f"<figure>{series_svg(s, cs)}<figcaption>{e(s['workload'])} {e(s['metric'])} / "
                       f"{e(s['group'])}: one dot per run (its repetitions' median); dashed: a change point; "
                       f"lines: the levels either side; shaded: the 95% interval of the level after.{removed}"
                       "</figcaption></figure>")
    rows = []
    for c in res["changes"]:
        size, ci = size_text(c)
        u = e(unit_name(c["unit"]))
        rows.append(f"<tr><td class=l>{e(c['workload'])}</td><td class=l>{e(c['metric'])}</td>"
                    f"<td class=l>{e(c['group'])}</td><td class=l>{e(c['time_utc'])}</td>"
                    f"<td>{e(fmt_value(c['level_before']))} {u}</td>"
                    f"<td>{e(fmt_value(c['level_after']))} {u}</td><td>{e(size)}</td><td>{e(ci)}</td>"
                    f"<td>{'-' if (q := c['p_holm']) is None else f'{q:.2g}'}</td></tr>")
    tested = sum(s["p_first"] is not None for s in res["series"])
    table = ("<table><tr><th class=l>workload</th><th class=l>metric</th><th class=l>group</th>"
             "<th class=l>since (UTC)</th><th>before</th><th>after</th><th>size</th><th>95% CI</th>"
             f"<th>p (Holm)</th></tr>{''.join(rows)}</table>") if rows else (
             f"<p>No change point (CUSUM test per series, Holm-adjusted p &lt; {res['alpha']:g}, beyond "
             f"±{e(res['threshold'])}).</p>")
    notes = "".join(f"<li>{e(n)}</li>" for n in res["notes"])
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>cloudbench compare --changes</title>"
            f"<style>{_CSS}</style></head><body><h1>Changes in <code>{e(res['path'])}</code></h1>"
            f"<p>{len(res['changes'])} change(s) in {tested} series searched, {res['runs']} runs; the unit of "
            f"analysis is the {e(res['unit_of_analysis'])}. Method: {e(res['method'])}. Threshold "
            f"±{e(res['threshold'])}.</p>{''.join(figures)}<h2>Changes</h2>{table}"
            "<p class=small>since: the first run at the new level (the change happened after the run before it); "
            "size: level after / level before - 1 between the neighbouring changes, with its 95% interval.</p>"
            + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
            + f"<p class=small>cloudbench {e(__version__)}</p></body></html>")


def write_changes(res: ChangesJSON, out: Path) -> Path:
    """``out/compare/changes.html`` and ``out/compare/changes.json``; returns the HTML's path."""
    d = Path(out) / COMPARE_DIR
    try:
        d.mkdir(parents=True, exist_ok=True)
        write_json_atomic(d / JSON_NAME, res)
        (d / HTML_NAME).write_text(to_html(res), encoding="utf-8")
    except OSError as err:
        raise ResultError(str(d), f"cannot write the changes: {err.strerror or err}") from err
    return d / HTML_NAME
