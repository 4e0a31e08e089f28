"""The traceroute section's figures: each pair's MDA graph (hops left to right, the
interfaces of one hop stacked, AS and fastest reply under each) and the inflation
of the minimum RTT over the propagation bound. Inputs are the section's keys only."""

from __future__ import annotations

from typing import Any

import numpy as np

from cloudbench.core.files import slug
from cloudbench.report.figures.style import Drawing, Plot, finite, new_figure

MAX_GRAPHS = 24
"""MDA graphs drawn per workload (the pairs past it are named in the caption of the last)."""


def figures(wname: str, sec: dict[str, Any]) -> list[Drawing]:
    """An MDA graph per pair (latest repetition), then the inflation bars."""
    out: list[Drawing] = [mda_plot(wname, g) for g in (sec.get("graphs") or [])[:MAX_GRAPHS]]
    infl = inflation_plot(wname, sec)
    return out + ([infl] if infl is not None else [])


def mda_plot(wname: str, g: dict[str, Any]) -> Plot:
    """One MDA graph: hop 0 (the source) on the left, parallel interfaces stacked."""
    hops: list[list[str]] = g["hops"]
    pos: dict[str, tuple[float, float]] = {}
    for x, nodes in enumerate(hops):
        for k, n in enumerate(nodes):
            pos[n] = (float(x), (len(nodes) - 1) / 2.0 - k)
    height = max(len(h) for h in hops)
    fig = new_figure(max(5.0, 1.35 * len(hops)), max(2.4, 1.0 * height + 1.3))
    ax = fig.add_subplot()
    for a, b in g["edges"]:
        if a in pos and b in pos:
            ax.annotate("", xy=pos[b], xytext=pos[a],
                        arrowprops={"arrowstyle": "->", "color": "0.35", "shrinkA": 9, "shrinkB": 9})
    anon = 0
    for n, (px, py) in pos.items():
        is_anon = n.startswith("*")
        anon += is_anon
        end = n in (g["src"], g["dst"]) or (px == 0) or n == hops[-1][-1]
        ax.plot([px], [py], marker="s" if end else "o", markersize=15, linestyle="none",
                markerfacecolor="white" if is_anon else ("#E69F00" if end else "#56B4E9"), markeredgecolor="black")
        label = "*" if is_anon else n
        if n in g.get("asn", {}):
            label += f"\nAS{g['asn'][n]}"
        rtt = g.get("rtt_min_us", {}).get(n)
        if finite(rtt):
            label += f"\n{rtt / 1000:.2f} ms"
        ax.text(px, py - 0.3, label, ha="center", va="top", fontsize=6.5)
    ax.set_xticks(range(len(hops)), [str(i) for i in range(len(hops))])
    ax.set_xlabel("hop (TTL; 0 is the source); under each interface: address, AS, fastest reply (ms)")
    ax.set_yticks([])
    ax.set_ylim(-(height / 2.0) - 1.0, height / 2.0 + 0.2)
    ax.set_xlim(-0.6, len(hops) - 0.4)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"{g['src']} → {g['dst']} (repetition {g['repetition']})")
    widest = max(len(h) for h in hops[1:]) if len(hops) > 1 else 1
    ases = sorted(set(g.get("asn", {}).values()))
    alt = (f"MDA graph of {wname} from {g['src']} to {g['dst']} (repetition {g['repetition']}): "
           f"{len(hops) - 1} hop(s), {len(pos) - 1} interface(s) beyond the source, at most {widest} in parallel "
           f"at one hop, {anon} anonymous" + (f"; ASes {', '.join(f'AS{a}' for a in ases)}" if ases else "") + ".")
    return Plot(f"{slug(wname)}-mda-{slug(g['src'])}-{slug(g['dst'])}", f"{g['src']} → {g['dst']}", alt, fig)


def inflation_plot(wname: str, sec: dict[str, Any]) -> Plot | None:
    """Bars: minimum RTT over the propagation bound at c (and in fibre, 2/3 c)."""
    rows = [r for r in sec.get("inflation") or [] if finite(r.get("inflation_c"))]
    if not rows:
        return None
    fig = new_figure(max(4.5, 0.9 * len(rows) + 2.5), 3.6)
    ax = fig.add_subplot()
    x = np.arange(len(rows))
    ax.bar(x, [r["inflation_c"] for r in rows], 0.6, color="#56B4E9", edgecolor="black",
           label="min RTT / bound at c")
    fib = [r.get("inflation_fibre") for r in rows]
    if all(finite(v) for v in fib):
        ax.plot(x, fib, marker="D", color="black", linestyle="none", label="min RTT / bound in fibre (2/3 c)")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x, [f"{r['src']}\n{r['dst']}" for r in rows], fontsize=7)
    ax.set_ylabel("inflation (ratio, 1 = speed of light)")
    ax.set_xlabel("source, destination")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"{wname}: path inflation over the propagation bound")
    alt = (f"Bars of the minimum RTT of {wname} over the propagation bound between the regions: " + "; ".join(
        f"{r['src']} to {r['dst']} ×{r['inflation_c']:.2f} of c" for r in rows) + ".")
    return Plot(f"{slug(wname)}-inflation", f"{wname}: inflation", alt, fig)
