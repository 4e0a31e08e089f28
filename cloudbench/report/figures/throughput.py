"""The throughput and tokenbucket sections' figures: interval series per pair with the
capacity lower bound, direction asymmetry, and each drain's rate curve with its
fitted rates, time to empty and refill. Inputs are the sections' keys only."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from matplotlib.axes import Axes

from cloudbench.core.files import slug
from cloudbench.report.figures.style import Plot, finite, group_style, new_figure, panel_grid

MAX_PANELS = 12
"""Series drawn per figure; the rest are named in the caption (their numbers stay in the tables)."""


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r.get("repetition"), r.get("trial"), r.get("src"), r.get("dst"))


def _rate_axes(ax: Axes, title: str, xlabel: str, legend_loc: Literal["lower right", "upper right"]) -> None:
    ax.set_title(title, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("rate (Mbit/s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6.5, loc=legend_loc)


def figures(wname: str, sec: dict[str, Any]) -> list[Plot]:
    """Interval series and asymmetry of a throughput section."""
    out = [p for p in (series_plot(wname, sec), asymmetry_plot(wname, sec)) if p is not None]
    return out


def series_plot(wname: str, sec: dict[str, Any]) -> Plot | None:
    """A panel per series: rate over time, the UDP capacity lower bound dashed."""
    series = [s for s in sec.get("series") or [] if s.get("t_s")]
    if not series:
        return None
    shown = series[:MAX_PANELS]
    rows = {_key(r): r for r in sec.get("trials") or []}
    fig, axes = panel_grid(len(shown), 4.2, 2.3)
    parts = []
    for ax, s in zip(axes, shown, strict=True):
        st = group_style(s.get("group", ""))
        ax.plot(s["t_s"], s["mbps"], color=st.color, linestyle=st.dash, marker=st.marker, markevery=max(1, len(
            s["t_s"]) // 12), markersize=3, linewidth=1.3, label=s.get("group") or "rate")
        row = rows.get(_key(s), {})
        cap = row.get("capacity_lb_mbps")
        text = f"{s['src']}→{s['dst']} mean {row.get('mean_mbps', float('nan')):.1f} Mbit/s"
        if finite(cap):
            ax.axhline(cap, color="black", linestyle="--", linewidth=1, label=f"capacity ≥ {cap:.1f}")
            text += f", capacity ≥ {cap:.1f}"
        if finite(row.get("shift_s")):
            ax.axvline(row["shift_s"], color="black", linestyle=":", linewidth=1, label="rate drop")
        parts.append(text)
        _rate_axes(ax, f"{s['src']} → {s['dst']} (rep {s['repetition']}, {s.get('direction', '')})",
                   "time since the series began (s)", "lower right")
    more = f" ({len(series) - len(shown)} more series in the tables)" if len(series) > len(shown) else ""
    fig.suptitle(f"{wname}: rate per report interval{more}")
    alt = (f"Throughput of {wname} over time, one panel per sender and receiver: " + "; ".join(parts)
           + f".{more}")
    return Plot(f"{slug(wname)}-series", f"{wname}: interval series", alt, fig)


def asymmetry_plot(wname: str, sec: dict[str, Any]) -> Plot | None:
    """Bars a→b and b→a per host pair measured both ways."""
    rows = [r for r in sec.get("asymmetry") or [] if finite(r.get("a_to_b_mbps")) and finite(r.get("b_to_a_mbps"))]
    if not rows:
        return None
    fig = new_figure(max(4.5, 1.1 * len(rows) + 2.0), 3.6)
    ax = fig.add_subplot()
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["a_to_b_mbps"] for r in rows], 0.4, color="#0072B2", edgecolor="black", label="a → b")
    ax.bar(x + 0.2, [r["b_to_a_mbps"] for r in rows], 0.4, color="#E69F00", edgecolor="black", hatch="//",
           label="b → a")
    for xi, r in zip(x, rows, strict=True):
        if finite(r.get("ratio")):
            ax.annotate(f"×{r['ratio']:.2f}", (xi, max(r["a_to_b_mbps"], r["b_to_a_mbps"])), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(x, [f"{r['a']}\n{r['b']}\n(rep {r['repetition']})" for r in rows], fontsize=7)
    ax.set_ylabel("mean rate (Mbit/s)")
    ax.set_xlabel("host pair a, b")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"{wname}: direction asymmetry")
    alt = (f"Bars of the mean rate each way for {wname}: " + "; ".join(
        f"{r['a']} to {r['b']} {r['a_to_b_mbps']:.1f} and back {r['b_to_a_mbps']:.1f} Mbit/s" for r in rows) + ".")
    return Plot(f"{slug(wname)}-asymmetry", f"{wname}: direction asymmetry", alt, fig)


def drain_figures(wname: str, sec: dict[str, Any]) -> list[Plot]:
    """One figure of every drain's rate curve, fitted rates and times marked."""
    series = {_key(s): s for s in sec.get("series") or [] if s.get("t_s")}
    drains = [(d, series[_key(d)]) for d in sec.get("drains") or [] if _key(d) in series][:MAX_PANELS]
    if not drains:
        return []
    fig, axes = panel_grid(len(drains), 4.6, 2.8)
    parts = []
    for ax, (d, s) in zip(axes, drains, strict=True):
        t, r, b = np.array(s["t_s"], float), np.array(s["mbps"], float), np.array(s["burst"])
        for burst, style in ((0, "-"), (1, "--")):
            m = b == burst
            if m.any():
                ax.plot(t[m], r[m], color="#0072B2", linestyle=style, linewidth=1.4,
                        label="first drain" if burst == 0 else "after the rest")
        end0 = float(t[b == 0].max()) if (b == 0).any() else float(t.max())
        text = f"{d['src']}→{d['dst']}"
        levels: tuple[tuple[str, Any, str], ...] = (("high_mbps", (0, (6, 2)), "high"),
                                                    ("low_mbps", (0, (1, 1.5)), "low"))
        for key, dash, name in levels:
            if finite(d.get(key)):
                ax.hlines(d[key], 0, end0, colors="black", linestyles=dash, linewidth=1.2,
                          label=f"{name} {d[key]:.1f} Mbit/s")
                text += f", {name} {d[key]:.1f} Mbit/s"
        if finite(d.get("time_to_empty_s")):
            ax.axvline(d["time_to_empty_s"], color="#D55E00", linewidth=1.4,
                       label=f"empty after {d['time_to_empty_s']:.1f} s")
            text += f", empty after {d['time_to_empty_s']:.1f} s"
        if (b == 1).any():
            t1 = float(t[b == 1].min())
            refill = d.get("refill_mbps")
            ax.axvline(t1, color="#009E73", linestyle="-.", linewidth=1.2,
                       label=f"refill {refill:.1f} Mbit/s" if finite(refill) else "second drain")
            if finite(refill):
                text += f", refill {refill:.1f} Mbit/s after a {d.get('rest_s', float('nan')):.0f} s rest"
        if finite(d.get("expected_high_mbps")):
            ax.axhline(d["expected_high_mbps"], color="0.6", linestyle=":", linewidth=1,
                       label="configured high/low")
            if finite(d.get("expected_low_mbps")):
                ax.axhline(d["expected_low_mbps"], color="0.6", linestyle=":", linewidth=1)
        parts.append(text)
        _rate_axes(ax, f"{d['src']} → {d['dst']} ({d.get('vm_type', '')}, rep {d['repetition']})",
                   "time since the drain began (s)", "upper right")
    fig.suptitle(f"{wname}: token-bucket drains")
    alt = f"Rate over time of each drain of {wname}, with the fitted rates and times: " + "; ".join(parts) + "."
    return [Plot(f"{slug(wname)}-drains", f"{wname}: drain curves", alt, fig)]
