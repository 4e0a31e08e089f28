"""The colocation section's figure: per repetition, each host's egress under full load
beside its rate alone and its nominal rate, coloured by the group it was inferred to
share a NIC with (the blog's bar chart). Input: the section's ``hosts`` rows only."""

from __future__ import annotations

from typing import Any

import numpy as np

from cloudbench.core.files import slug
from cloudbench.core.tables import rep_number
from cloudbench.report.figures.style import (
    GROUP_STYLES,
    Drawing,
    Note,
    Plot,
    finite,
    fitted_suptitle,
    panel_grid,
    rate_top,
)

ALONE = "#BBBBBB"
"""The bars of a host's rate alone (a grey no inferred group takes)."""
PALETTE = tuple(s.color for s in GROUP_STYLES.values())[1:]
"""Colours of the inferred groups G1, G2, ... (the house palette without its grey); a host in no group is dark grey."""
HATCHES = tuple(s.hatch for s in GROUP_STYLES.values())[1:]


def figures(wname: str, sec: dict[str, Any]) -> list[Drawing]:
    """One figure of every repetition's egress bars (a panel per repetition)."""
    listed = sec.get("hosts") or []
    rows = [r for r in listed if finite(r.get("egress_mbps")) or finite(r.get("baseline_mbps"))]
    name, title = f"{slug(wname)}-egress", f"{wname}: egress per host under full load"
    if not rows:
        return [Note(name, title, f"No figure of the egress per host: none of the {len(listed)} host row(s) has "
                                  "a measured rate (the hosts table says what was recorded).")] if listed else []
    reps = sorted({r["repetition"] for r in rows})
    groups = sorted({r["group"] for r in rows if r["group"] != "-"})
    colour = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}
    hatch = {g: HATCHES[i % len(HATCHES)] for i, g in enumerate(groups)}
    width = max(4.6, 0.7 * max(sum(r["repetition"] == rep for r in rows) for rep in reps) + 2.0)
    fig, axes = panel_grid(len(reps), width, 3.4)
    parts = []
    for ax, rep in zip(axes, reps, strict=True):
        sel = [r for r in rows if r["repetition"] == rep]
        x = np.arange(len(sel))
        ax.bar(x - 0.2, [r["baseline_mbps"] if finite(r.get("baseline_mbps")) else 0.0 for r in sel], 0.4,
               color=ALONE, edgecolor="black", label="alone")
        for xi, r in zip(x, sel, strict=True):
            g = r["group"]
            ax.bar([xi + 0.2], [r["egress_mbps"] if finite(r.get("egress_mbps")) else 0.0], 0.4,
                   color=colour.get(g, "#555555"), hatch=hatch.get(g, ""), edgecolor="black",
                   label=f"full load, {g}" if g != "-" else "full load, alone on its NIC")
        noms = [r.get("nominal_mbps") for r in sel]
        if any(finite(v) for v in noms):
            ax.scatter(x, [v if finite(v) else np.nan for v in noms], marker="_", s=400, color="black",
                       linewidths=2, label="nominal", zorder=3)
        ax.set_xticks(x, [f"{r['host']}\n{r['group']}" for r in sel], fontsize=7)
        ax.set_ylim(0.0, rate_top([r.get(k) for r in sel for k in ("baseline_mbps", "egress_mbps", "nominal_mbps")]))
        ax.set_ylabel("egress (Mbit/s)")
        ax.set_xlabel("host, inferred group (- : none)")
        ax.set_title(f"repetition {rep_number(rep)}", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))  # one entry per group, not per bar
        ax.legend(unique.values(), unique.keys(), fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        parts += [f"{r['host']} ({r['group']}, rep {rep_number(rep)}) {r['egress_mbps']:.1f} under full load, "
                  f"{r['baseline_mbps']:.1f} alone" for r in sel
                  if finite(r.get("egress_mbps")) and finite(r.get("baseline_mbps"))]
    fitted_suptitle(fig, f"{title} (colour: inferred group)")
    alt = (f"Bars of each host's egress of {wname} when every host sends at once, beside its rate alone and its "
           "nominal rate (a black tick), in Mbit/s, coloured by the group it was inferred to share a NIC with: "
           + "; ".join(parts) + ".")
    return [Plot(name, title, alt, fig)]
