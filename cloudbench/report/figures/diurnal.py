"""The time-of-day figure of the HTML report: a scheduled campaign's runs per weekday × hour
(the coverage grid) and the median value of each series shown per cell (the heat maps).
Input: report.json's ``time_of_day`` section only."""

from __future__ import annotations

from typing import Any

import numpy as np

from cloudbench.core.units import natural_unit
from cloudbench.report.diurnal import WEEKDAYS
from cloudbench.report.figures.style import Plot, new_figure


def time_of_day_figure(tod: dict[str, Any]) -> Plot | None:
    """Coverage grid then one heat map per series; None when the section has neither."""
    panels: list[tuple[str, np.ndarray, str, str]] = []  # title, grid, colour label, colour map
    coverage = tod.get("coverage")
    if coverage:
        panels.append(("runs per cell (coverage)", np.array(coverage, dtype=float), "runs", "Greys"))
    for h in tod.get("heatmaps") or []:
        grid = np.array([[np.nan if v is None else float(v) for v in row] for row in h["heatmap"]], dtype=float)
        mark = "significant" if h.get("significant") else "not significant"
        p = f", p (Holm) {h['p_holm']:.2g}" if h.get("p_holm") is not None else ""
        # the colour scale in the values' natural unit, as the tables print them (ms, not 20000 us)
        unit = str(h.get("unit") or "")
        finite = np.abs(grid[np.isfinite(grid)])
        factor, name = natural_unit(float(finite.max()), unit) if finite.size and unit else (1.0, unit)
        panels.append((f"{h['workload']}: {h['metric']} / {h['group']} ({mark}{p})", grid * factor,
                       f"median ({name})" if name else "median", "viridis"))
    if not panels:
        return None
    fig = new_figure(8.0, 2.3 * len(panels) + 0.6)
    axes = np.atleast_1d(fig.subplots(len(panels), 1, squeeze=False)).ravel()
    for ax, (title, grid, label, cmap) in zip(axes, panels, strict=True):
        masked = np.ma.masked_invalid(grid)
        im = ax.imshow(masked, aspect="auto", cmap=cmap, interpolation="nearest")
        ax.set_facecolor("#f0f0f0")  # cells without a run: light grey, unlike any colour of the scale
        ax.set_yticks(range(7), WEEKDAYS, fontsize=7)
        ax.set_xticks(range(0, 24, 3), [f"{h:02d}" for h in range(0, 24, 3)], fontsize=7)
        ax.set_xlabel(f"hour of day ({tod.get('timezone', 'UTC')})", fontsize=7)
        ax.set_title(title, fontsize=8)
        fig.colorbar(im, ax=ax, label=label, shrink=0.9)
    alt = (f"Time of day over {tod.get('runs', '?')} runs ({tod.get('timezone', 'UTC')}): "
           f"{tod.get('verdict', '')}. Panels: " + "; ".join(t for t, *_ in panels) + ".")
    return Plot("time-of-day", "Time of day: coverage and medians by weekday and hour", alt, fig)
