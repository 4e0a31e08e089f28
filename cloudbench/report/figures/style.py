"""One look for every figure: a colour, marker and dash per latency group (legible in
grayscale), units on the axes, and SVG that can be inlined in an HTML page."""

from __future__ import annotations

import contextlib
import io
import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import LogFormatterMathtext

from cloudbench.core.topology import GROUP_ORDER


@dataclass(frozen=True)
class GroupStyle:
    """How a figure draws one group: color, marker, line style and hatch (readable in grey)."""
    color: str
    marker: str
    dash: Any  # a matplotlib linestyle
    hatch: str


# Okabe & Ito's colour-blind-safe palette, ordered so that neighbouring groups differ
# in lightness too; markers, dashes and hatches tell the groups apart in grayscale.
GROUP_STYLES: dict[str, GroupStyle] = {
    g.value: s for g, s in zip(GROUP_ORDER, (
        GroupStyle("#555555", "o", "-", ""),
        GroupStyle("#0072B2", "s", "--", "//"),
        GroupStyle("#009E73", "^", "-.", "\\\\"),
        GroupStyle("#E69F00", "D", ":", "||"),
        GroupStyle("#D55E00", "v", (0, (6, 2, 1, 2, 1, 2)), "xx"),
        GroupStyle("#CC79A7", "P", (0, (1, 1)), "--"),
    ), strict=True)
}
OTHER = GroupStyle("#000000", "X", "-", "")

FONT: dict[str, Any] = {"font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial"],
        "font.size": 9.0, "axes.titlesize": 10.0, "axes.labelsize": 9.0, "legend.fontsize": 8.0,
        "svg.fonttype": "none"}


def drawing(**extra: Any) -> contextlib.AbstractContextManager[None]:
    """The rc settings of every figure (fonts, SVG text as text), plus ``extra``."""
    rc: Any = {**FONT, **extra}
    return mpl.rc_context(rc)


class PlainLogFormatter(LogFormatterMathtext):
    """Labels of a logarithmic axis as plain numbers (``60``, ``400``, ``2,000``, ``0.001``): the
    ticks matplotlib labels, written as a reader writes RTTs, not ``6×10^1``."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        if not super().__call__(x, pos):  # a tick this axis leaves unlabelled
            return ""
        return f"{x:,.0f}" if x >= 1 else f"{x:g}"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class PowerLogFormatter(LogFormatterMathtext):
    """Labels of a logarithmic axis of shares (``1``, ``10⁻³``): the ticks matplotlib labels, its
    powers of ten in plain text with superscript digits. Matplotlib's own labels are TeX-like
    ``$10^{-3}$``, which its mathtext parser typesets: 0.2–0.4 s per figure and file format, the
    largest cost of drawing the CCDF."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        if not super().__call__(x, pos):  # a tick this axis leaves unlabelled
            return ""
        e = round(math.log10(x)) if x > 0 else None
        if e is not None and math.isclose(x, 10.0**e):
            return "10" + str(e).translate(_SUPERSCRIPT)  # what matplotlib typesets as $10^{e}$
        return f"{x:g}"


def plain_log(*axes: Axis) -> None:
    """Plain numbers on the major and minor ticks of logarithmic ``axes`` (call after ``set_*scale``)."""
    for axis in axes:
        axis.set_major_formatter(PlainLogFormatter())
        axis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False))


def group_style(group: str) -> GroupStyle:
    """The style of a latency group (groups outside StormCloud's share one, black)."""
    return GROUP_STYLES.get(group, OTHER)


@dataclass
class Plot:
    """One figure of the report: file stem, title, text alternative, the figure."""

    name: str
    title: str
    alt: str
    figure: Figure


@dataclass
class Note:
    """What the report shows instead of a figure that would have nothing to draw: the
    figure's file stem and title, and why there is nothing (no file is written)."""

    name: str
    title: str
    text: str


Drawing = Plot | Note
"""One item of a section's figures: a figure, or the note that stands in for one."""

HEADROOM = 1.15
"""Top of a rate axis over the largest value drawn on it: the lines stay clear of the border."""


ZOOM_FLOOR = 0.5
"""A rate axis starts at 0 unless every value drawn is at least this fraction of the largest."""


def _finite_values(values: tuple[Any, ...]) -> list[float]:
    return [float(v) for x in values for v in (x if isinstance(x, list | tuple | np.ndarray) else [x])
            if finite(v)]


def rate_top(*values: Any) -> float:
    """The top of a rate axis that starts at 0 (bars): :data:`HEADROOM` over the largest
    finite value in ``values`` (numbers or sequences of them), 1 when there is none above 0."""
    top = max(_finite_values(values), default=0.0)
    return top * HEADROOM if top > 0 else 1.0


def rate_limits(*values: Any) -> tuple[float, float]:
    """The limits of a rate axis for lines over time, scaled to ``values`` (numbers or
    sequences of them): from 0 to :data:`HEADROOM` over the largest when the values reach
    below :data:`ZOOM_FLOOR` of it (a drop, a slow path: 0 is part of the story); otherwise
    the band they lie in with a margin of a tenth of its width (at least 1 % of the level)
    on each side, so that 95 Mbit/s ± 1 is not a flat line against the top border."""
    vals = _finite_values(values)
    lo, hi = min(vals, default=0.0), max(vals, default=0.0)
    if hi <= 0:
        return 0.0, 1.0
    if lo < ZOOM_FLOOR * hi:
        return 0.0, hi * HEADROOM
    pad = max(0.1 * (hi - lo), 0.01 * hi)
    return lo - pad, hi + pad


def new_figure(width: float = 7.0, height: float = 4.0) -> Figure:
    """A figure outside pyplot (no global state), laid out to fit its labels."""
    with drawing():
        fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def fitted_suptitle(fig: Figure, text: str, **kwargs: Any) -> Text:
    """The figure's title, wrapped at spaces to the figure's width: a narrow figure (one heat map
    of four hosts) cut a one-line title at both ends."""
    title = fig.suptitle(text, **kwargs)
    room = 0.96 * fig.bbox.width
    width = title.get_window_extent().width  # the figure's own renderer (Agg: new_figure)
    if width > room:
        title.set_text(textwrap.fill(text, max(20, int(len(text) * room / width))))
    return title


def panel_grid(n: int, panel_width: float, panel_height: float,
               min_width: float = 0.0) -> tuple[Figure, list[Axes]]:
    """A figure of ``n`` small multiples, in one column for one panel and two otherwise
    (the spare cell of an odd count hidden), and its ``n`` axes in reading order."""
    cols = 1 if n == 1 else 2
    rows = math.ceil(n / cols)
    fig = new_figure(max(min_width, panel_width * cols + 0.6), panel_height * rows + 0.8)
    axes: list[Axes] = list(np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def svg_text(plot: Plot) -> str:
    """The figure as a standalone SVG document (ids salted by the figure's name, no date,
    so a report drawn twice is the same file)."""
    buf = io.StringIO()
    with drawing(**{"svg.hashsalt": plot.name}):
        plot.figure.savefig(buf, format="svg", metadata={"Date": None, "Creator": "cloudbench"})
    return buf.getvalue()


_PROLOGUE = re.compile(r"\A.*?(?=<svg)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_NAMESPACES = re.compile(r'\s+xmlns(:xlink)?="[^"]*"')


def inline_svg(svg: str, alt: str) -> str:
    """An SVG document as an element of an HTML page: no XML prologue, no RDF metadata
    and no namespace declarations (the HTML parser puts ``<svg>`` in the SVG namespace
    and knows ``xlink:href``), so the page names no URL at all; ``role="img"`` and
    ``aria-label`` carry the text alternative."""
    body = _METADATA.sub("", _PROLOGUE.sub("", svg, count=1))
    body = _NAMESPACES.sub("", body)
    label = (alt.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;"))
    return body.replace("<svg", f'<svg role="img" aria-label="{label}"', 1)


def save(plot: Plot, folder: Path) -> tuple[str, list[Path]]:
    """Write ``folder/<name>.svg`` and ``.png``; the SVG text and the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    svg = svg_text(plot)
    svg_path, png_path = folder / f"{plot.name}.svg", folder / f"{plot.name}.png"
    svg_path.write_text(svg)
    # the PNG keeps the SVG's layout: constrained layout measures every label again otherwise (a
    # tenth of the figures' time), and its margins are fractions of the figure at any dpi
    plot.figure.set_layout_engine("none")
    with drawing():
        plot.figure.savefig(png_path, format="png", dpi=150, metadata={"Software": "cloudbench"})
    return svg, [svg_path, png_path]


def finite(x: Any) -> bool:
    """A number that can be drawn (report.json stores NaN as null)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and x == x and abs(x) != float("inf")
