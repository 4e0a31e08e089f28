"""``cloudbench compare`` for people: the terminal table, ``compare/index.html`` with its forest
plot (one self-contained file), and both files written (:func:`write_compare`)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from cloudbench.analysis.compare import ALPHA, MIN_N
from cloudbench.core.blocks import print_line
from cloudbench.core.files import write_json_atomic
from cloudbench.core.tables import titled_table
from cloudbench.core.units import fmt_quantity, unit_name
from cloudbench.core.version import __version__
from cloudbench.errors import ResultError
from cloudbench.report.compare import COMPARE_DIR, HTML_NAME, JSON_NAME, CompareResult, Row, many, to_json
from cloudbench.report.confirm_text import JSON_KEYS
from cloudbench.store.manifest import POOLING_METADATA


def _pct(x: float) -> str:
    return f"{x * 100:+.2f}%" if abs(x) < 0.1 else f"{x * 100:+.1f}%"


def change_text(r: Row) -> tuple[str, str]:
    """The change and its 95 % interval as table cells, on the scale that decides."""
    c = r.result
    if c.decided_on == "ratio" and c.ratio is not None:
        ci = "" if c.ratio_ci is None else f"[{_pct(c.ratio_ci[0] - 1)}, {_pct(c.ratio_ci[1] - 1)}]"
        return _pct(c.ratio - 1), ci
    unit = _unit(r.unit)
    ci = "" if c.diff_ci is None else f"[{c.diff_ci[0]:+.4g}, {c.diff_ci[1]:+.4g}]"
    return f"{c.diff:+.4g}{unit}", ci


def _units(res: CompareResult) -> str:
    return "runs" if "run" in res.unit_of_analysis.values() else "repetitions"


def _unit(unit: str) -> str:
    """`` µs`` after a value (the data's ``us``); nothing for dimensionless (``1``) or no unit."""
    return "" if unit in ("", "1") else f" {unit_name(unit)}"


_STYLE = {"better": "green", "worse": "red", "different": "magenta", "equivalent": "cyan"}


def verdict_text(r: Row, markup: bool = True) -> str:
    """The verdict, with ``~N more`` when inconclusive, coloured by rich markup when ``markup``."""
    c = r.result
    v = c.verdict
    if v == "inconclusive" and c.more is not None:
        v = f"inconclusive: ~{c.more} more"
    style = _STYLE.get(c.verdict)
    return f"[{style}]{v}[/]" if markup and style else v


def render(res: CompareResult | Sequence[CompareResult], console: Console) -> None:
    """The comparison for a person (benchstat's spirit): a row per series; a table per pair."""
    if not isinstance(res, CompareResult):
        for i, one in enumerate(res):
            if i:
                console.print()
            render(one, console)
        return
    several = len({r.key.workload for r in res.rows}) > 1
    t = res.threshold
    ua, ub = res.unit_of_analysis["A"], res.unit_of_analysis["B"]
    per = f"median per {ua}" if ua == ub else f"median per {ua} (A) / {ub} (B)"
    title = f"B vs A: {per}, threshold ±{t.text()} - A = {res.a.spec}, B = {res.b.spec}"
    if res.a.label not in ("A", "B"):
        title = f"{res.b.label} vs {res.a.label}: {per}, threshold ±{t.text()}"
    table = titled_table(title, ("metric", "group", "n A/B", "A", "B", "change", "95% CI", "p (Holm)",
                                 "verdict"), left=("metric", "group", "verdict"), key=2)
    for r in res.rows:
        c = r.result
        change, ci = change_text(r)
        table.add_row(f"{r.key.workload}:{r.key.metric}" if several else r.key.metric, r.key.group,
                      f"{c.n_a}/{c.n_b}", fmt_quantity(c.median_a.estimate, r.unit),
                      fmt_quantity(c.median_b.estimate, r.unit), change, ci or "-",
                      "-" if c.p_holm is None else f"{c.p_holm:.3g}", verdict_text(r))
    console.print(table)
    print_line(console, Text(
        f"change: {'B/A - 1 (Hodges-Lehmann ratio)' if t.relative else 'B - A (Hodges-Lehmann shift)'}"
        f" with its 95% interval; better/worse: p (Holm) < {ALPHA} and beyond ±{t.text()}; "
        f"equivalent: 90% interval inside ±{t.text()}; n < {MIN_N} per side: no interval; "
        f"~N more: about N more {_units(res)} per side would likely decide (from the spread seen).",
        style="dim"))
    if res.differences:
        console.print("[bold]what differs[/] (key metadata, A vs B):", highlight=False)
        for d in res.differences:
            key, detail = d["key"], d["detail"]
            # the detail names the key or the field under it (wan.links[0].delay_s): not twice
            rest = detail[len(key):] if detail.startswith(key) else f": {detail}"
            print_line(console, f"  [yellow]{escape(key)}[/]{escape(rest)}")
    else:
        print_line(console, "[bold]what differs[/]: nothing in the key metadata (same provider, regions, "
                            "vm types, workload parameters, worker versions)")
    for name, keys in (("A", res.only_a), ("B", res.only_b)):
        if keys:
            listed = ", ".join(f"{k.metric}/{k.group}" for k in keys[:8])
            more = f" and {len(keys) - 8} more" if len(keys) > 8 else ""
            print_line(console, f"[yellow]only in {name}[/] (not compared): {escape(listed)}{more}")
    for n in res.notes:
        print_line(console, f"[yellow]note:[/] {escape(n)}", hang=len("note: "))


# -------------------------------------------------------------------- HTML

_CSS = """
body{font-family:"DejaVu Sans",Arial,sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#111}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border-bottom:1px solid #bbb;padding:.15em .5em;text-align:right}th{border-bottom:2px solid #444}
td.l,th.l{text-align:left}.better{color:#05603a;font-weight:bold}.worse{color:#a4161a;font-weight:bold}
.equivalent{color:#1d4e89}.diff{background:#fff3c4}.small{font-size:.85em;color:#444}
figure{margin:1em 0;border:1px solid #ddd;padding:.5em}figcaption{font-size:.85em;color:#333}
"""


def forest_svg(res: CompareResult) -> str:
    """The relative change of each row (B/A - 1) with its 95 % interval, the ±threshold band shaded
    and 0 marked; rows without a ratio or an interval are drawn as a point or left out (named)."""
    rows = [r for r in res.rows if r.result.ratio is not None]
    if not rows:
        return "<p class='small'>no row has a relative difference (A's medians are 0)</p>"
    band = res.threshold.value if res.threshold.relative else None
    xs = [r.result.ratio - 1 for r in rows if r.result.ratio is not None]
    for r in rows:
        if r.result.ratio_ci is not None:
            xs += [r.result.ratio_ci[0] - 1, r.result.ratio_ci[1] - 1]
    lim = max([abs(x) for x in xs] + [band or 0.0, 0.01]) * 1.1
    label_w, plot_w, row_h, top = 330, 520, 22, 30
    height = top + row_h * len(rows) + 40

    def x(v: float) -> float:
        return label_w + (v + lim) / (2 * lim) * plot_w

    alt = "Forest plot of B/A - 1 per series: " + "; ".join(
        f"{r.key.metric} / {r.key.group} {verdict_text(r, markup=False)}" for r in rows)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 20}" height="{height}" '
             f'font-family="DejaVu Sans,Arial,sans-serif" font-size="12" role="img" aria-label="{html.escape(alt)}">']
    if band is not None:
        parts.append(f'<rect x="{x(-band):.1f}" y="{top - 10}" width="{x(band) - x(-band):.1f}" '
                     f'height="{row_h * len(rows) + 10}" fill="#d9ead3"><title>±{res.threshold.text()}'
                     '</title></rect>')
    parts.append(f'<line x1="{x(0):.1f}" y1="{top - 10}" x2="{x(0):.1f}" y2="{top + row_h * len(rows)}" '
                 'stroke="#444" stroke-dasharray="3,3"/>')
    colors = {"better": "#05603a", "worse": "#a4161a", "equivalent": "#1d4e89"}
    for i, r in enumerate(rows):
        c = r.result
        y = top + i * row_h + row_h / 2
        name = html.escape(f"{r.key.metric} / {r.key.group}")
        parts.append(f'<text x="{label_w - 8}" y="{y + 4:.1f}" text-anchor="end">{name}</text>')
        col = colors.get(c.verdict, "#555")
        if c.ratio_ci is not None:
            parts.append(f'<line x1="{x(c.ratio_ci[0] - 1):.1f}" y1="{y:.1f}" x2="{x(c.ratio_ci[1] - 1):.1f}" '
                         f'y2="{y:.1f}" stroke="{col}" stroke-width="2"/>')
        assert c.ratio is not None
        parts.append(f'<circle cx="{x(c.ratio - 1):.1f}" cy="{y:.1f}" r="4" fill="{col}">'
                     f'<title>{html.escape(verdict_text(r, markup=False))}</title></circle>')
    axis_y = top + row_h * len(rows) + 5
    parts.append(f'<line x1="{label_w}" y1="{axis_y}" x2="{label_w + plot_w}" y2="{axis_y}" stroke="#444"/>')
    for k in range(-4, 5):
        v = lim * k / 4.5
        parts.append(f'<line x1="{x(v):.1f}" y1="{axis_y}" x2="{x(v):.1f}" y2="{axis_y + 4}" stroke="#444"/>')
        parts.append(f'<text x="{x(v):.1f}" y="{axis_y + 16}" text-anchor="middle">{v * 100:+.1f}%</text>')
    parts.append(f'<text x="{label_w + plot_w / 2}" y="{axis_y + 32}" text-anchor="middle">'
                 'B/A - 1 (Hodges-Lehmann ratio), 95% interval</text></svg>')
    return "".join(parts)



def to_html(res: CompareResult | Sequence[CompareResult]) -> str:
    """The page: one section per comparison (``--by`` with more than two levels gives several)."""
    e = html.escape
    parts = [_html_section(r, len(many(res)) > 1) for r in many(res)]
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>cloudbench compare</title>"
            f"<style>{_CSS}</style></head><body>{''.join(parts)}"
            f"<p class=small>cloudbench {e(__version__)}</p></body></html>")


def _html_section(res: CompareResult, several: bool) -> str:
    t = res.threshold
    e = html.escape
    h1, h2 = ("h2", "h3") if several else ("h1", "h2")
    head = ("<tr><th class=l>workload</th><th class=l>metric</th><th class=l>group</th><th>n A/B</th>"
            "<th>median A</th><th>median B</th><th>change</th><th>95% CI</th><th>p</th><th>p (Holm)</th>"
            "<th class=l>verdict</th></tr>")
    body = []
    for r in res.rows:
        c = r.result
        change, ci = change_text(r)
        body.append(
            f"<tr><td class=l>{e(r.key.workload)}</td><td class=l>{e(r.key.metric)}</td>"
            f"<td class=l>{e(r.key.group)}</td><td>{c.n_a}/{c.n_b}</td>"
            f"<td>{e(fmt_quantity(c.median_a.estimate, r.unit))}</td>"
            f"<td>{e(fmt_quantity(c.median_b.estimate, r.unit))}</td><td>{e(change)}</td><td>{e(ci or '-')}</td>"
            f"<td>{'-' if c.p is None else f'{c.p:.3g}'}</td>"
            f"<td>{'-' if c.p_holm is None else f'{c.p_holm:.3g}'}</td>"
            f"<td class='l {e(c.verdict.split()[0])}'>{e(verdict_text(r, markup=False))}</td></tr>")
    keys = [k for k in POOLING_METADATA if k in res.a.metadata or k in res.b.metadata]
    differing = {d["key"]: d["detail"] for d in res.differences}
    meta = []
    for k in keys:
        cls = " class=diff" if k in differing else ""
        a_v, b_v = res.a.metadata.get(k, "-"), res.b.metadata.get(k, "-")
        if k in JSON_KEYS:
            a_v = b_v = differing.get(k, "same")
        meta.append(f"<tr{cls}><td class=l>{e(k)}</td><td class=l>{e(a_v)}</td><td class=l>{e(b_v)}</td></tr>")
    only = "".join(f"<li>only in {n}: {e(k.workload)} {e(k.metric)} / {e(k.group)}</li>"
                   for n, ks in (("A", res.only_a), ("B", res.only_b)) for k in ks)
    notes = "".join(f"<li>{e(n)}</li>" for n in res.notes)
    title = f"{res.b.label} vs {res.a.label}" if several else "B vs A"
    return (
        f"<section><{h1}>{e(title)}</{h1}>"
        f"<p>A = <code>{e(res.a.spec)}</code> ({len(res.a.runs)} run(s)), B = <code>{e(res.b.spec)}</code> "
        f"({len(res.b.runs)} run(s)). Unit of analysis: A {e(res.unit_of_analysis['A'])}, "
        f"B {e(res.unit_of_analysis['B'])}. Threshold ±{e(t.text())}.</p>"
        f"<figure>{forest_svg(res)}<figcaption>Relative difference of each series (B/A - 1) with its 95% "
        f"interval; shaded: ±{e(t.text())}; green better, red worse, blue equivalent.</figcaption></figure>"
        f"<{h2}>Rows</{h2}><table>{head}{''.join(body)}</table>"
        f"<p class=small>better/worse: p (Holm) &lt; {ALPHA} and the estimate beyond ±threshold; "
        f"equivalent: the 90% interval inside ±threshold (TOST); fewer than {MIN_N} units per side: "
        "no interval, inconclusive.</p>"
        f"<{h2}>What differs</{h2}><table><tr><th class=l>key</th><th class=l>A</th><th class=l>B</th></tr>"
        f"{''.join(meta)}</table>"
        + (f"<{h2}>Not compared</{h2}><ul>{only}</ul>" if only else "")
        + (f"<{h2}>Notes</{h2}><ul>{notes}</ul>" if notes else "")
        + "</section>"
    )


def write_compare(res: CompareResult | Sequence[CompareResult], out: Path, by: str | None = None) -> Path:
    """``out/compare/index.html`` and ``out/compare/compare.json``; returns the HTML's path."""
    d = Path(out) / COMPARE_DIR
    try:
        d.mkdir(parents=True, exist_ok=True)
        write_json_atomic(d / JSON_NAME, to_json(res, by))
        (d / HTML_NAME).write_text(to_html(res), encoding="utf-8")
    except OSError as e:
        raise ResultError(str(d), f"cannot write the comparison: {e.strerror or e}") from e
    return d / HTML_NAME

