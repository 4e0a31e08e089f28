"""The confirm figure of the HTML report: for each series of ``confirm.json``, the
quantile and its CI against the number of repetitions (CONFIRM, Maricq et al.),
with the ±e bounds and the n needed. Input: confirm.json's content only."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.ticker import MaxNLocator

from cloudbench.core.units import fmt_quantity, natural_unit
from cloudbench.report.figures.style import Note, Plot, finite, fitted_suptitle, panel_grid

MAX_SERIES = 12
"""Series drawn in the figure (all of them are in the CI table)."""

_DASHES = (":", "--", "-.", (0, (1, 4)))


def convergence_figure(doc: dict[str, Any]) -> Plot | Note | None:
    """Small multiples of the convergence curves of ``confirm.json`` (``doc``); a note when it
    has series but none with a curve, None when it has no series."""
    listed = doc.get("series") or []
    # a curve needs two sizes with an estimate: one size is a point, an empty-looking panel
    curves = [s for s in listed if s.get("convergence") and len(s["convergence"].get("sizes") or []) > 1
              and sum(finite(v) for v in s["convergence"].get("estimate") or []) > 1]
    # a curve whose estimate and CI are one value at every n (no timeouts: 0 %) is a flat line on an
    # axis around nothing: said in the caption, not drawn
    flat = [s for s in curves if _constant(s["convergence"])]
    series = [s for s in curves if s not in flat]
    flat_text = "; ".join(f"{s['metric']} of {s['group']}: {fmt_quantity(s.get('estimate'), s.get('unit') or '')} "
                          "at every n, with no CI width (not drawn)" for s in flat)
    if curves and not series:
        return Note("confirm-convergence", "confirm: convergence",
                    f"No convergence figure: every series with a curve is one value at every n ({flat_text}).")
    if not series:
        if not listed:
            return None
        ns = sorted({s["n"] for s in listed if isinstance(s.get("n"), int)})
        need = sorted({s["n_required_for_ci"] for s in listed if isinstance(s.get("n_required_for_ci"), int)})
        text = (f"No convergence figure: none of the {len(listed)} series has subsets of two sizes or more to "
                f"draw a curve over (n = {', '.join(map(str, ns)) or '?'})")
        if len(need) == 1:
            qn = (doc.get("params") or {}).get("quantile_name", "quantile")
            text += (f"; the curve starts at the fewest repetitions with an exact CI of the {qn} ({need[0]}), "
                     f"so it needs {need[0] + 1} or more")
        return Note("confirm-convergence", "confirm: convergence",
                    text + "; the table gives each series' estimate and why no target was reached.")
    shown = series[:MAX_SERIES]
    qn = (doc.get("params") or {}).get("quantile_name", "quantile")
    fig, axes = panel_grid(len(shown), 4.4, 2.9, min_width=7.0)
    parts = []
    for ax, s in zip(axes, shown, strict=True):
        c = s["convergence"]
        n = np.array(c["sizes"], float)
        raw = {k: np.array([np.nan if v is None else v for v in c[k]], float) for k in ("estimate", "lower", "upper")}
        top = float(np.nanmax(np.abs(raw["estimate"])))
        # the axis in the estimate's natural unit (ms from 1,000 us on, a fraction in %), as the tables
        factor, unit_name = natural_unit(top, s["unit"]) if s.get("unit") else (1.0, "")
        est, lo, hi = (raw[k] * factor for k in ("estimate", "lower", "upper"))
        ax.fill_between(n, lo, hi, color="#9ecae1", alpha=0.7, linewidth=0, label="CI (mean of subsets)")
        ax.plot(n, est, color="#08519c", linewidth=2, label=qn)
        needs = []
        for t, dash in zip(s.get("targets") or [], _DASHES * 4, strict=False):
            band = t["error"] * np.abs(est)
            ax.plot(n, est + band, color="#cb181d", linestyle=dash, linewidth=1, label=f"±{t['error']:.0%}")
            ax.plot(n, est - band, color="#cb181d", linestyle=dash, linewidth=1)
            if t.get("n_needed") is not None:
                ax.axvline(t["n_needed"], color="#cb181d", linestyle=dash, linewidth=0.8)
                needs.append(f"±{t['error']:.0%} at n = {t['n_needed']}")
            elif t.get("prediction"):
                needs.append(f"±{t['error']:.0%} predicted at n ≈ {t['prediction']['n']}")
        unit = f" ({unit_name})" if unit_name else ""
        ax.set_xlabel("repetitions n")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # n is a count: no 6.25 repetitions
        ax.set_ylabel(f"{qn} of {s['metric']}{unit}", fontsize=7)
        ax.set_title(f"{s['workload']}: {s['metric']} / {s['group']}", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="upper right")
        est_txt = fmt_quantity(s["estimate"], s.get("unit") or "") if finite(s.get("estimate")) else "no estimate"
        parts.append(f"{s['metric']} of {s['group']}: {est_txt}, " + (", ".join(needs) or "no bound reached"))
    if flat_text:
        parts.append(flat_text)
    more = f" ({len(series) - len(shown)} more series in the table)" if len(series) > len(shown) else ""
    fitted_suptitle(fig, f"{qn} and its CI against the repetitions{more}", fontsize=10)
    alt = ("Convergence curves: the estimate and its confidence interval against the number of repetitions, "
           "with the relative error bounds; " + "; ".join(parts) + f".{more}")
    return Plot("confirm-convergence", "confirm: convergence", alt, fig)


def _constant(c: dict[str, Any]) -> bool:
    """Whether a convergence curve's estimate and CI bounds are one value at every size."""
    values = {float(v) for k in ("estimate", "lower", "upper") for v in c.get(k) or [] if finite(v)}
    return len(values) <= 1
