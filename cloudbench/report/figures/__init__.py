"""Figures of the HTML report, drawn with matplotlib from report.json's sections only.

Every figure is built from the aggregates a section holds (quantiles, CCDF points,
window means, binned rates, MDA graphs), never from observations, so drawing
costs the same for a two-minute run and a 138 M-row one. Each module draws one
workload kind and returns :class:`~.style.Plot` objects (a matplotlib figure, a
file name, a title and a text alternative); :mod:`cloudbench.report.html` saves
them as SVG and PNG and inlines the SVG. Where a section has rows for a figure
but none it can draw (no replies, no rate), the figure is a :class:`~.style.Note`
saying why: the page prints it, no file is written (an empty panel says nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cloudbench.report.figures import colocation, echo, paths, throughput
from cloudbench.report.figures.style import Drawing, Note, Plot, drawing

SectionFigures = Callable[[str, dict[str, Any]], list[Drawing]]

BY_KIND: dict[str, SectionFigures] = {
    "echo": echo.figures,
    "throughput": throughput.figures,
    "tokenbucket": throughput.drain_figures,
    "tbdrain": throughput.drain_figures,  # a report.json written before the kind was renamed
    "traceroute": paths.figures,
    "colocation": colocation.figures,
}
"""Workload kind -> the function drawing its section's figures (a kind not listed has none)."""


def section_figures(wname: str, section: dict[str, Any]) -> list[Drawing]:
    """The figures of one workload's section, in reading order; a :class:`~.style.Note`
    where a figure would have nothing to draw (no file is written for it)."""
    draw = BY_KIND.get(str(section.get("kind")))
    if draw is None:
        return []
    with drawing():  # text takes its font when it is created
        return draw(wname, section)


__all__ = ["BY_KIND", "Drawing", "Note", "Plot", "section_figures"]
