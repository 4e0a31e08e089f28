"""The throughput and tokenbucket sections' figures: interval series per pair with the
capacity lower bound, direction asymmetry, and each drain's rate curve with its
fitted rates, time to empty and refill. Inputs are the sections' keys only."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from cloudbench.core.files import slug
from cloudbench.core.tables import rep_number
from cloudbench.report.figures.style import (
    Drawing,
    Note,
    Plot,
    finite,
    fitted_suptitle,
    group_style,
    new_figure,
    panel_grid,
    rate_limits,
    rate_top,
)

MAX_PANELS = 12
"""Panels drawn per figure; the rest are counted in the caption (their numbers stay in the tables)."""


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r.get("repetition"), r.get("trial"), r.get("src"), r.get("dst"))


REP_DASHES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
"""Line style of each repetition in a series panel (cycled beyond six)."""


def _rate_axes(ax: Axes, title: str, xlabel: str, limits: tuple[float, float],
               legend_loc: Literal["lower right", "upper right"] | None = None) -> None:
    """Title, labels and a rate axis over ``limits`` (:func:`~.style.rate_limits` of what is
    drawn); the axis label says so when it does not start at 0."""
    ax.set_title(title, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("rate (Mbit/s)" if limits[0] == 0 else "rate (Mbit/s; axis not from 0)")
    ax.set_ylim(*limits)
    ax.grid(alpha=0.3)
    if legend_loc is not None:
        ax.legend(fontsize=6.5, loc=legend_loc)


def figures(wname: str, sec: dict[str, Any]) -> list[Drawing]:
    """Interval series and asymmetry of a throughput section."""
    return [p for p in (series_plot(wname, sec), asymmetry_plot(wname, sec)) if p is not None]


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.1f}" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}–{hi:.1f}"


def series_plot(wname: str, sec: dict[str, Any]) -> Drawing | None:
    """A panel per path (sender, receiver, direction) with each repetition's rate over time
    overlaid (one line style per repetition), the UDP capacity lower bound and the expected
    goodput as reference lines; one rate axis for all panels, scaled to their data
    (:func:`~.style.rate_limits`: from 0 when a rate drops, else the band the rates lie in).
    A section whose series hold no finite rate gets a :class:`~.style.Note`."""
    listed = sec.get("series") or []
    if not listed:
        return None
    series = [s for s in listed if any(finite(v) for v in s.get("mbps") or [])]
    if not series:
        return Note(f"{slug(wname)}-series", f"{wname}: interval series",
                    f"No figure of the interval series: none of the {len(listed)} series has a measured rate "
                    "(the per-trial table says what each trial recorded).")
    paths: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for s in series:
        paths.setdefault((s["src"], s["dst"], s.get("direction", "")), []).append(s)
    shown = list(paths.items())[:MAX_PANELS]
    rows = {_key(r): r for r in sec.get("trials") or []}
    reps = sorted({s["repetition"] for _, ss in shown for s in ss}, key=str)
    dash = {r: REP_DASHES[i % len(REP_DASHES)] for i, r in enumerate(reps)}
    fig, axes = panel_grid(len(shown), 4.2, 2.3)
    # one scale for every panel, so that paths compare at a glance
    limits = rate_limits(*(s["mbps"] for _, ss in shown for s in ss),
                         *([rows.get(_key(s), {}).get(k) for _, ss in shown for s in ss]
                           for k in ("capacity_lb_mbps", "expected_mbps")))
    parts = []
    has_cap = has_expected = has_drop = False
    for ax, ((src, dst, direction), ss) in zip(axes, shown, strict=True):
        group = ss[0].get("group") or ""
        st = group_style(group)
        caps, expected = [], []
        for s in sorted(ss, key=lambda s: str(s["repetition"])):
            mbps = [v if finite(v) else np.nan for v in s["mbps"]]
            ax.plot(s["t_s"], mbps, color=st.color, linestyle=dash[s["repetition"]], linewidth=1.3)
            row = rows.get(_key(s), {})
            text = f"{src}→{dst} rep {rep_number(s['repetition'])} mean {row.get('mean_mbps', float('nan')):.1f} Mbit/s"
            cap = row.get("capacity_lb_mbps")
            if finite(cap):
                ax.axhline(cap, color="black", linestyle=dash[s["repetition"]], linewidth=0.8)
                caps.append(cap)
                text += f", capacity ≥ {cap:.1f}"
            if finite(row.get("expected_mbps")):
                expected.append(row["expected_mbps"])
            if finite(row.get("shift_s")):
                ax.axvline(row["shift_s"], color="#D55E00", linestyle=dash[s["repetition"]], linewidth=1)
                has_drop = True
            parts.append(text)
        if expected:
            ax.axhline(float(np.median(expected)), color="0.55", linestyle=(0, (1, 1)), linewidth=1.2)
        has_cap |= bool(caps)
        has_expected |= bool(expected)
        refs = ([f"capacity ≥ {_span(caps)}"] if caps else []) + ([f"expected {_span(expected)}"] if expected else [])
        _rate_axes(ax, f"{src} → {dst} ({direction}, {group})" + (f"\n{'; '.join(refs)} Mbit/s" if refs else ""),
                   "time since the series began (s)", limits)
    handles = [Line2D([], [], color="0.3", linestyle=dash[r], linewidth=1.3, label=f"rep {rep_number(r)}")
               for r in reps]
    if has_cap:
        handles.append(Line2D([], [], color="black", linewidth=0.8, label="capacity lower bound (UDP)"))
    if has_expected:
        handles.append(Line2D([], [], color="0.55", linestyle=(0, (1, 1)), linewidth=1.2,
                              label="expected goodput of the cap"))
    if has_drop:
        handles.append(Line2D([], [], color="#D55E00", linewidth=1, label="rate drop"))
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 6), fontsize=7)
    hidden = len(paths) - len(shown)
    more = f" ({hidden} more path(s) in the tables)" if hidden else ""
    fitted_suptitle(fig, f"{wname}: rate per report interval, repetitions overlaid{more}")
    alt = (f"Throughput of {wname} over time, one panel per sender, receiver and direction with the repetitions "
           "overlaid, the rate axis from 0: " + "; ".join(parts) + f".{more}")
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
    ax.set_xticks(x, [f"{r['a']}\n{r['b']}\n(rep {rep_number(r['repetition'])})" for r in rows], fontsize=7)
    ax.set_ylim(0.0, rate_top([r["a_to_b_mbps"] for r in rows], [r["b_to_a_mbps"] for r in rows]))
    ax.set_ylabel("mean rate (Mbit/s)")
    ax.set_xlabel("host pair a, b")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, not over the tallest
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"{wname}: direction asymmetry")
    alt = (f"Bars of the mean rate each way for {wname}: " + "; ".join(
        f"{r['a']} to {r['b']} {r['a_to_b_mbps']:.1f} and back {r['b_to_a_mbps']:.1f} Mbit/s" for r in rows) + ".")
    return Plot(f"{slug(wname)}-asymmetry", f"{wname}: direction asymmetry", alt, fig)


def drain_figures(wname: str, sec: dict[str, Any]) -> list[Drawing]:
    """One figure of every drain's rate curve, fitted rates and times marked."""
    series = {_key(s): s for s in sec.get("series") or [] if any(finite(v) for v in s.get("mbps") or [])}
    listed = sec.get("drains") or []
    drains = [(d, series[_key(d)]) for d in listed if _key(d) in series][:MAX_PANELS]
    if not drains:
        return [Note(f"{slug(wname)}-drains", f"{wname}: drain curves",
                     f"No figure of the drains: none of the {len(listed)} drain(s) has a measured rate series "
                     "(the drain table says what each trial recorded).")] if listed else []
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
        _rate_axes(ax, f"{d['src']} → {d['dst']} ({d.get('vm_type', '')}, rep {rep_number(d['repetition'])})",
                   "time since the drain began (s)",
                   rate_limits(r.tolist(), *(d.get(k) for k in ("high_mbps", "low_mbps", "expected_high_mbps",
                                                                "expected_low_mbps"))), "upper right")
    fitted_suptitle(fig, f"{wname}: token-bucket drains")
    alt = f"Rate over time of each drain of {wname}, with the fitted rates and times: " + "; ".join(parts) + "."
    return [Plot(f"{slug(wname)}-drains", f"{wname}: drain curves", alt, fig)]
