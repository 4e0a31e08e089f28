"""The echo section's figures: box plots per latency group (StormCloud Fig. 3), the tail
as a CCDF, windowed means over time with level shifts (Fig. 4), the src × dst grid
of p50 and p99, and quorum latencies. Inputs are the section's keys only."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
from matplotlib import dates as mdates
from matplotlib.colors import LogNorm, Normalize
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullLocator

from cloudbench.analysis.latency import min_n_for_quantile
from cloudbench.analysis.quantiles import P5, P25, P50, P75, P90, P95, P99, P99_9, P99_99, P99_999
from cloudbench.core.files import slug
from cloudbench.report.figures.style import (
    GROUP_STYLES,
    Drawing,
    Note,
    Plot,
    PowerLogFormatter,
    finite,
    fitted_suptitle,
    group_style,
    new_figure,
    panel_grid,
    plain_log,
)
from cloudbench.workloads.echo.report import rtt_count
from cloudbench.workloads.echo.sweeps import LEVEL, swept_fields

BOX_KEYS = (P5, P25, P50, P75, P95, "mean")
MAX_PAIR_LINES = 200
"""Pair series drawn thin in the time figure (a 100-host run has 9 900 pairs)."""
MAX_LINE_POINTS = 400
"""Points per thin pair line at most (beyond it, :func:`envelope`)."""
MAX_MARKERS = 60
"""Markers per thick group line at most (every k-th window beyond it; the line has every window)."""


def envelope(pts: list[tuple[Any, float]], most: int) -> list[tuple[Any, float]]:
    """``pts`` (in time order) cut to at most ``most`` points where it has more: each run of ``k``
    consecutive points keeps its lowest and its highest, in time order, so a spike or a dip one
    window wide stays on the line (every k-th point would drop it, and leave a spike's mark above
    its pair's line). A thin line is under a pixel per window at that density: the eye sees the band."""
    if len(pts) <= most:
        return pts
    k = math.ceil(2 * len(pts) / most)
    runs = -(-len(pts) // k)
    y = np.full(runs * k, np.nan)  # the last run padded; its NaNs are never the lowest or highest
    y[:len(pts)] = [p[1] for p in pts]
    first = np.arange(runs) * k
    keep = np.union1d(first + np.nanargmin(y.reshape(runs, k), axis=1),
                      first + np.nanargmax(y.reshape(runs, k), axis=1))
    return [pts[i] for i in keep]


DISTRIBUTIONS = ("groups", "quorums", "pairs", "boxes", "tails")
"""The section's keys whose rows are per swept value (``sweep``) when a parameter was swept."""


def figures(wname: str, sec: dict[str, Any]) -> list[Drawing]:
    """Every echo figure the section has data for, in reading order. When a parameter was
    swept, the distribution figures come once per swept value (never pooled over values)."""
    labels = list(dict.fromkeys(r["sweep"] for k in DISTRIBUTIONS for r in sec.get(k) or []
                                if r.get("sweep")))
    views = [(wname, sec)] if not labels else [
        (f"{wname} ({lb})", {**sec, **{k: [r for r in sec.get(k) or [] if r.get("sweep") == lb]
                                       for k in DISTRIBUTIONS}}) for lb in labels]
    out: list[Drawing] = sweep_plots(wname, sec)
    # the box plots of the swept values share one y scale, so that their boxes compare by eye
    shared = box_span([r for _, part in views for r in part.get("boxes") or []]) if labels else None
    for draw in (box_plot, tail_plot, time_plot, grid_plot, quorum_plot):
        for name, part in ([(wname, sec)] if draw is time_plot else views):
            p = box_plot(name, part, shared, len(views)) if draw is box_plot else draw(name, part)
            if p is not None:
                out.append(p)
    if not out:
        return [Note(f"{slug(wname)}-figures", f"{wname}: figures",
                     f"No figures of {wname}: the section has no replies to draw (no group, pair, window or tail "
                     "rows; the tables below say what each trial recorded).")]
    return out


SWEEP_DASHES: tuple[Any, ...] = ("-", "--", ":", "-.")
"""Line style per value of the other swept parameter (payload and rate swept together)."""


def _size(v: float) -> str:
    """64, 1 KiB, 64 KiB."""
    return f"{v / 1024:g} KiB" if v >= 1024 else f"{v:g}"


def sweep_plots(wname: str, sec: dict[str, Any]) -> list[Drawing]:
    """RTT against each swept parameter (StormCloud Fig. 11): a p50 panel and a p99 panel,
    each on its own axis, a line per latency group in its house style, the median over
    repetitions of each one's value with its CI as error bars where there is one."""
    rows = sec.get("sweep") or []
    fields = swept_fields(rows)
    out: list[Drawing] = []
    for field in fields:
        others = [f for f in fields if f != field]
        keys = [k for k in (P50, P99) if any(finite(r.get(f"rep_{k}_median")) for r in rows)]
        name, title = f"{slug(wname)}-sweep-{field}", f"{wname}: RTT against {field}"
        if not keys:
            out.append(Note(name, title, f"No figure of RTT against {field}: no value of the sweep has a median "
                                         "RTT (no replies; the sweep table lists the counts)."))
            continue
        fig, axes = panel_grid(len(keys), 4.4, 3.6, min_width=7.0)
        parts = []
        for ax, key in zip(axes, keys, strict=True):
            lines: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
            for r in rows:
                if finite(r.get(f"rep_{key}_median")):
                    lines.setdefault((r["group"], *(r[o] for o in others)), []).append(r)
            other_values = sorted({k[1:] for k in lines})
            ys_all = []
            for (group, *ov), sel in lines.items():
                st = group_style(group)
                sel.sort(key=lambda r: float(r[field]))
                xs = np.array([float(r[field]) for r in sel])
                ys = np.array([r[f"rep_{key}_median"] for r in sel], float)
                lo = np.array([r[f"rep_{key}_lower"] if finite(r.get(f"rep_{key}_lower")) else y
                               for r, y in zip(sel, ys, strict=True)], float)
                hi = np.array([r[f"rep_{key}_upper"] if finite(r.get(f"rep_{key}_upper")) else y
                               for r, y in zip(sel, ys, strict=True)], float)
                dash = st.dash if not others else SWEEP_DASHES[other_values.index(tuple(ov)) % len(SWEEP_DASHES)]
                label = " ".join([group, *(f"{o}={v:g}" for o, v in zip(others, ov, strict=True))])
                ax.errorbar(xs, ys, yerr=[ys - lo, hi - ys], color=st.color, linestyle=dash, marker=st.marker,
                            markersize=5, linewidth=1.6, capsize=3, label=label)
                ys_all += [*lo.tolist(), *hi.tolist()]
                if key == P50:
                    parts.append(f"{label} p50 from {_fmt_us(ys[0])} at {_size(xs[0])} to {_fmt_us(ys[-1])} at "
                                 f"{_size(xs[-1])}" if field == "payload" else
                                 f"{label} p50 from {_fmt_us(ys[0])} at {xs[0]:g} to {_fmt_us(ys[-1])} at {xs[-1]:g}")
            ax.set_xscale("log", base=2)
            if _log_wanted(ys_all):
                ax.set_yscale("log")
                plain_log(ax.yaxis)
            ticks = sorted({float(r[field]) for r in rows})
            ax.set_xticks(ticks, [_size(v) if field == "payload" else f"{v:g}" for v in ticks])
            # the swept values only on the x axis; a log RTT axis keeps its minor ticks, which carry
            # its labels inside a decade (off, a 135 µs to 3.4 ms axis was labelled "10^3" alone)
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel(f"{field} ({'bytes' if field == 'payload' else 'rounds/s'})")
            ax.set_ylabel(f"{key} RTT (µs)")
            ax.set_title(f"{key}: median over repetitions, {LEVEL:.0%} CI")
            ax.grid(alpha=0.3, which="both")
            ax.legend(title="latency group", fontsize=7)
        fitted_suptitle(fig, title)
        alt = (f"RTT of {wname} against {field}, a panel per percentile ({', '.join(keys)}), a line per latency "
               f"group: the median over repetitions of each repetition's value, error bars its {LEVEL:.0%} CI "
               "where the repetitions give one: " + "; ".join(parts) + ".")
        out.append(Plot(name, title, alt, fig))
    return out


def _nothing(name: str, title: str, what: str, listed: list[Any], unit: str, needs: str) -> Note | None:
    """The note that stands in for a figure whose section lists rows (``listed``) of which none
    can be drawn; None when it lists none (the figure does not apply: no quorums asked for)."""
    if not listed:
        return None
    return Note(name, title, f"No {what}: none of the {len(listed)} {unit} row(s) has {needs} (too few or no "
                             "replies; the tables below give the counts).")


def _fmt_us(x: float) -> str:
    return f"{x / 1000:.3g} ms" if x >= 1000 else f"{x:.3g} µs"


def _log_wanted(values: list[float]) -> bool:
    vals = [v for v in values if finite(v) and v > 0]
    return bool(vals) and max(vals) / min(vals) > 20


def _box_rows(listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in listed if all(finite(r.get(k)) for k in BOX_KEYS)]


def box_span(listed: list[dict[str, Any]]) -> tuple[float, float] | None:
    """The y range of box plots of ``listed`` rows (whiskers and means), with a margin: a
    scale several box plots share (None: nothing to draw)."""
    rows = _box_rows(listed)
    if not rows:
        return None
    lo = min(min(r[P5], r["mean"]) for r in rows)
    hi = max(max(r[P95], r["mean"]) for r in rows)
    if _log_wanted([lo, hi]):
        return lo / 1.25, hi * 1.25
    pad = 0.06 * (hi - lo or abs(hi) or 1.0)
    return max(lo - pad, 0.0) if lo >= 0 else lo - pad, hi + pad


def box_plot(wname: str, sec: dict[str, Any], span: tuple[float, float] | None = None,
             sharing: int = 1) -> Drawing | None:
    """Box per group: box p25–p75, median line, whiskers p5 and p95, mean marker; ``span``: a y
    range shared by ``sharing`` box plots (one per swept value) instead of its own."""
    listed = sec.get("boxes") or []
    rows = _box_rows(listed)
    if not rows:
        return _nothing(f"{slug(wname)}-box", f"{wname}: RTT per latency group", "box plot", listed,
                        "latency group", "the percentiles of a box")
    fig = new_figure(max(4.5, 1.3 * len(rows) + 2.0) + 1.6, 4.0)  # the legend beside the axes
    ax = fig.add_subplot()
    stats = [{"label": r["group"], "whislo": r[P5], "q1": r[P25], "med": r[P50], "q3": r[P75],
              "whishi": r[P95], "mean": r["mean"], "fliers": []} for r in rows]
    art = ax.bxp(stats, showmeans=True, showfliers=False, patch_artist=True, widths=0.55,
                 medianprops={"color": "black", "linewidth": 2.0},
                 meanprops={"marker": "D", "markerfacecolor": "white", "markeredgecolor": "black",
                            "markersize": 6})
    for box, r in zip(art["boxes"], rows, strict=True):
        st = group_style(r["group"])
        box.set_facecolor(st.color)
        box.set_alpha(0.85)
        box.set_hatch(st.hatch)
        box.set_edgecolor("black")
    if _log_wanted([r[P5] for r in rows] + [r[P95] for r in rows] + list(span or ())):
        ax.set_yscale("log")
        plain_log(ax.yaxis)
    if span is not None:
        ax.set_ylim(*span)
    ax.set_ylabel("round-trip time (µs)")
    ax.set_xlabel("latency group")
    ax.grid(axis="y", alpha=0.3, which="both")
    ax.set_title(f"{wname}: RTT per latency group")
    ax.legend(handles=[Line2D([], [], color="black", linewidth=2, label="median"),
                       Line2D([], [], marker="D", color="none", markerfacecolor="white", markeredgecolor="black",
                              label="mean")],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), title="box p25–p75,\nwhiskers p5–p95")  # off the boxes
    alt = (f"Box plot of {wname} round-trip times per latency group (box p25 to p75, line the median, "
           "whiskers p5 and p95, diamond the mean): "
           + "; ".join(f"{r['group']} median {_fmt_us(r[P50])}, p5 {_fmt_us(r[P5])}, "
                       f"p95 {_fmt_us(r[P95])}, mean {_fmt_us(r['mean'])}" for r in rows) + "."
           + (f" The y axis is the same in the {sharing} box plots of the swept values, so their boxes compare "
              "by eye." if span is not None and sharing > 1 else ""))
    return Plot(f"{slug(wname)}-box", f"{wname}: RTT per latency group", alt, fig)


def tail_plot(wname: str, sec: dict[str, Any]) -> Drawing | None:
    """CCDF per group on log–log axes, from 1 down to where the sample ends (1/n, at most
    1e-5, p99.999): the axis and the percentile marks stop there too, so a group of 80
    RTTs is not drawn against levels it cannot reach (analysis.latency.TAIL_K)."""
    by: dict[str, list[tuple[float, float]]] = {}
    for r in sec.get("tails") or []:
        if finite(r.get("exceedance")) and finite(r.get("rtt_us")) and r["rtt_us"] > 0:
            by.setdefault(r["group"], []).append((r["exceedance"], r["rtt_us"]))
    if not by:
        return _nothing(f"{slug(wname)}-tail", f"{wname}: RTT tail (CCDF)", "tail figure", sec.get("tails") or [],
                        "CCDF point", "a round-trip time above 0")
    fig = new_figure(7.0, 4.2)
    ax = fig.add_subplot()
    parts = []
    for g, pts in by.items():
        st = group_style(g)
        pts.sort(reverse=True)
        ax.plot([p[1] for p in pts], [p[0] for p in pts], color=st.color, linestyle=st.dash, marker=st.marker,
                markersize=4, markevery=4, linewidth=1.6, label=g)
        parts.append(f"{g} from {_fmt_us(pts[0][1])} to {_fmt_us(pts[-1][1])} at P = {pts[-1][0]:.1g}")
    # 1/n of the largest group, at most p99.999's level
    floor = max(min(p[0] for pts in by.values() for p in pts), 1e-5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log(ax.xaxis)  # RTTs as 100, 1,000; the exceedance keeps its powers of ten (as plain text)
    ax.yaxis.set_major_formatter(PowerLogFormatter())
    ax.yaxis.set_minor_formatter(PowerLogFormatter(labelOnlyBase=False))
    ax.set_ylim(floor / 2.0, 1.3)
    for e, name in ((1e-2, P99), (1e-3, P99_9), (1e-4, P99_99), (1e-5, P99_999)):
        if e < floor * (1 - 1e-9):
            break
        ax.axhline(e, color="0.6", linewidth=0.6, linestyle=":")
        ax.annotate(name, (1.0, e), xycoords=("axes fraction", "data"), xytext=(2, 0),
                    textcoords="offset points", va="center", fontsize=7, color="0.35")
    ax.set_xlabel("round-trip time x (µs)")
    ax.set_ylabel("P(RTT > x)  (fraction of replies)")
    ax.grid(alpha=0.3, which="major")
    ax.set_title(f"{wname}: the tail (complementary CDF)")
    ax.legend(title="latency group", loc="lower left")
    alt = (f"Complementary CDF of {wname} round-trip times per latency group on log-log axes, each "
           f"down to where its replies end (1/n; the axis to {floor:.1g}): " + "; ".join(parts) + ".")
    return Plot(f"{slug(wname)}-tail", f"{wname}: RTT tail (CCDF)", alt, fig)


def _parse_utc(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


SUBSECOND_SPAN_S = 20.0
"""A time axis shorter than this labels its ticks to the tenth of a second."""


def _utc_tenths(x: float, _pos: int | None = None) -> str:
    """``09:29:02.4``: a tick of a time axis of a few seconds (whole seconds label several ticks alike)."""
    return str(mdates.num2date(x).strftime("%H:%M:%S.%f")[:-5])  # type: ignore[no-untyped-call]


def time_plot(wname: str, sec: dict[str, Any]) -> Drawing | None:
    """Window medians per group (thick) and per pair (thin) over UTC time, the statistic the
    level shifts are sought in; steps and spikes marked on them (reports without medians:
    window means)."""
    stat = "median" if any(finite(r.get("median")) for r in sec.get("windows") or []) else "mean"
    windows = [r for r in sec.get("windows") or [] if finite(r.get(stat))]
    if not windows:
        return _nothing(f"{slug(wname)}-time", f"{wname}: windowed {stat}s over time", "time figure",
                        sec.get("windows") or [], "window", f"a {stat}")
    starts = {t: _parse_utc(u) for t, u in (sec.get("trial_utc") or {}).items()}
    half = float(sec.get("window_s") or 0.0) / 2.0
    use_utc = all(starts.get(r["trial"]) is not None for r in windows)

    x_of = _x_of(starts, use_utc)
    fig = new_figure(8.0, 4.4)
    ax = fig.add_subplot()
    lines: dict[tuple[Any, ...], list[tuple[Any, float]]] = {}
    at: dict[tuple[Any, ...], float] = {}  # a pair's window value, to place its events on its line
    window_s = float(sec.get("window_s") or 0.0)
    for r in sec.get("pair_windows") or []:
        if finite(r.get(stat)) and r.get("group") != "self":
            key = (r["group"], r["src"], r["dst"], r["repetition"], r["trial"])
            lines.setdefault(key, []).append((x_of(r["trial"], r["start_s"] + half), r[stat]))
            at[(f"{r['src']}>{r['dst']}", r["repetition"], r["trial"], r["start_s"])] = r[stat]
    # a large run has thousands of pair series: draw the pairs with a level shift, then
    # the rest up to MAX_PAIR_LINES, each cut to MAX_LINE_POINTS, so the SVG stays small
    shifted = {(s.get("series", ""), s.get("repetition"), s.get("trial")) for s in sec.get("level_shifts") or []}
    keys = sorted(lines, key=lambda k: (f"{k[1]}>{k[2]}", k[3], k[4]) not in shifted)
    for key in keys[:MAX_PAIR_LINES]:
        st = group_style(key[0])
        pts = envelope(sorted(lines[key]), MAX_LINE_POINTS)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=st.color, linewidth=0.6,
                alpha=0.35, marker="." if len(pts) < 3 else None, markersize=2)
    pairs_note = (f"; {MAX_PAIR_LINES} of {len(lines)} pair series drawn, those with level shifts first"
                  if len(lines) > MAX_PAIR_LINES else "")
    groups: dict[tuple[str, int, str], list[tuple[Any, float]]] = {}
    for r in windows:
        groups.setdefault((r["group"], r["repetition"], r["trial"]), []).append(
            (x_of(r["trial"], r["start_s"] + half), r[stat]))
    seen: set[str] = set()
    order = {g: i for i, g in enumerate(GROUP_STYLES)}
    for (g, _, _), pts in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        st = group_style(g)
        pts.sort()
        # every window on the line, a marker (the group's, for grayscale) on at most MAX_MARKERS of them:
        # 720 markers a line were one band of ink and half the page's bytes
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=st.color, linestyle=st.dash, marker=st.marker,
                markersize=5, linewidth=2.0, label=None if g in seen else g,
                markevery=max(1, math.ceil(len(pts) / MAX_MARKERS)))
        seen.add(g)
    n_steps, n_spikes, unmarked = _mark_shifts(ax, sec.get("level_shifts") or [], x_of, at, window_s)
    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="0.4", linewidth=0.6, label="one pair (thin)"),
                Line2D([], [], marker="^", color="black", markerfacecolor="yellow", linestyle="none",
                       label=f"level shift ({n_steps})"),
                Line2D([], [], marker="*", color="black", markerfacecolor="red", linestyle="none", markersize=10,
                       label=f"spike ({n_spikes})")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="latency group")
    if _log_wanted([r[stat] for r in windows]):
        ax.set_yscale("log")
        plain_log(ax.yaxis)
    _time_axis(ax, [t for t in starts.values() if t is not None] if use_utc else [])
    ax.set_ylabel(f"{stat} RTT per {sec.get('window_s', '?'):g} s window (µs)"
                  if finite(sec.get("window_s")) else f"{stat} RTT per window (µs)")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(f"{wname}: windowed {stat} RTT over time")
    left_out = ("self" not in seen and any(r.get("group") == "self"
                                           for r in [*(sec.get("windows") or []), *(sec.get("pair_windows") or [])]))
    alt = (f"Windowed {stat} round-trip time of {wname} over time, a thick line per latency group and a thin "
           f"line per host pair, {len(windows)} group windows; {n_steps} level shift(s) marked with "
           f"triangles and {n_spikes} spike(s) with stars{pairs_note}"
           + (f"; {unmarked} pair event(s) of the events table not marked (their pair has no line)"
              if unmarked else "") + "."
           + (" No self line: a host's echoes to itself cross no network, so the level-shift search (and this "
              f"figure, which draws its window {stat}s) leaves them out; their RTTs are in the box plot and the "
              "CCDF." if left_out else ""))
    return Plot(f"{slug(wname)}-time", f"{wname}: windowed {stat}s over time", alt, fig)


def _x_of(starts: dict[str, datetime | None], use_utc: bool) -> Callable[[str, float], Any]:
    """Where :func:`time_plot` draws ``t`` seconds into a trial: matplotlib's date (days) when
    ``use_utc``, else ``t``. A trial's start is converted once and its seconds added (date2num on
    each of a 6-hour run's 46,080 pair windows was a third of the figure's drawing)."""
    day0 = {trial: float(mdates.date2num(t0)) for trial, t0 in starts.items()  # type: ignore[no-untyped-call]
            if t0 is not None}

    def x_of(trial: str, t: float) -> Any:
        if not use_utc or trial not in day0:
            return t
        return day0[trial] + t / 86400.0

    return x_of


def _time_axis(ax: Any, starts: list[datetime]) -> None:
    """The x axis of :func:`time_plot`: UTC clock times when every trial's start is known
    (``starts``; tenths of a second on a short span, where whole seconds repeat), else the
    seconds since the trial began."""
    if not starts:
        ax.set_xlabel("time since the trial began (s); window middles")
        return
    lo, hi = ax.get_xlim()
    if (hi - lo) * 86400.0 < SUBSECOND_SPAN_S:
        ax.xaxis.set_major_formatter(FuncFormatter(_utc_tenths))
    else:
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))  # type: ignore[no-untyped-call]
    ax.set_xlabel(f"time (UTC, {min(starts).strftime('%Y-%m-%d')}); window middles")


def _mark_shifts(ax: Any, shifts: list[dict[str, Any]], x_of: Callable[[str, float], Any],
                 at: dict[tuple[Any, ...], float], window_s: float) -> tuple[int, int, int]:
    """Mark each level shift on ``ax`` (a step: a triangle at its new level; a spike: a star at
    its peak); a pair's event, measured on raw RTTs, sits on its window's value in ``at`` (the
    line drawn, or its nearest window with a value). The numbers of steps and spikes marked, and of
    pair events left unmarked (their pair has no line), which the caption counts: the events table
    lists them."""
    n_steps = n_spikes = unmarked = 0
    for s in shifts:
        if not (finite(s.get("time_s")) and finite(s.get("before")) and finite(s.get("after"))):
            continue
        x = x_of(s["trial"], s["time_s"])
        y_after, y_spike = s["after"], s["before"] + (s.get("size") or 0.0)
        if ">" in str(s.get("series", "")) and window_s > 0:
            w0 = math.floor(float(s["time_s"]) / window_s) * window_s
            y_at = at.get((s["series"], s.get("repetition"), s.get("trial"), w0))
            if y_at is None:  # its window has no value (too few RTTs): the pair's nearest window that has one
                near = [(abs(k[3] - w0), v) for k, v in at.items()
                        if k[:3] == (s["series"], s.get("repetition"), s.get("trial"))]
                y_at = min(near)[1] if near else None
            if y_at is None:
                unmarked += 1
                continue
            y_after = y_spike = y_at
        if s["kind"] == "step":
            n_steps += 1
            ax.plot([x], [y_after], marker="^" if s["after"] >= s["before"] else "v", color="black",
                    markerfacecolor="yellow", markersize=9, linestyle="none", zorder=5)
        else:
            n_spikes += 1
            ax.plot([x], [y_spike], marker="*", color="black",
                    markerfacecolor="red", markersize=11, linestyle="none", zorder=5)
    return n_steps, n_spikes, unmarked


def grid_norm(values: np.ndarray) -> Normalize:
    """The colour scale of one grid: its own values' range, logarithmic when they span more
    than a factor of 5 (a p99 grid next to a p50 one gets a scale of its own)."""
    lo, hi = float(values.min()), float(values.max())
    if lo > 0 and hi / lo > 5:
        return LogNorm(lo, hi)
    if hi == lo:  # one value: a scale around it, so the cells take its middle colour
        pad = abs(lo) * 0.01 or 1.0
        return Normalize(lo - pad, hi + pad)
    return Normalize(lo, hi)


def grid_cell(us: float) -> str:
    """A heat-map cell: µs under 1000, else ms with one decimal under 10 ms (the colour bar says
    so): ``1.0``, not ``1`` beside ``425`` µs cells, and ``150``, not ``1.5e+02``."""
    if us < 999.5:  # 999.7 is 1.0 ms, not "1000"
        return f"{us:.0f}"
    return f"{us / 1000:.1f}" if us < 9950 else f"{us / 1000:.0f}"


def grid_plot(wname: str, sec: dict[str, Any]) -> Drawing | None:
    """src × dst heat maps of p50 and p99, each on a colour scale of its own (p99 is many times
    p50: on one scale the p50 grid is one dark colour); pairs without a value are hatched."""
    pairs = sec.get("pairs") or []
    hosts = list(sec.get("hosts") or sorted({r["src"] for r in pairs} | {r["dst"] for r in pairs}))
    if not pairs or not hosts:
        return None
    idx = {h: i for i, h in enumerate(hosts)}
    n = len(hosts)
    mats = {k: np.full((n, n), np.nan) for k in (P50, P99)}
    for r in pairs:
        if r["src"] in idx and r["dst"] in idx:
            for k, m in mats.items():
                if finite(r.get(k)):
                    m[idx[r["src"]], idx[r["dst"]]] = r[k]
    missing_grids = [k for k, m in mats.items() if not np.isfinite(m).any()]
    mats = {k: m for k, m in mats.items() if np.isfinite(m).any()}
    if not mats:
        return Note(f"{slug(wname)}-grid", f"{wname}: src × dst grid of p50 and p99",
                    f"No source × destination grid: none of the {len(pairs)} pair(s) has a p50 or p99 "
                    "(no replies; the pairs table lists their counts and timeouts).")
    size = min(12.0, 3.0 + 0.45 * n)
    fig = new_figure(len(mats) * (size + 1.4) + 0.4, size + 0.6)
    axes = np.atleast_1d(fig.subplots(1, len(mats)))
    ranges = []
    for ax, (k, m) in zip(axes, mats.items(), strict=True):
        ax.patch.set_facecolor("white")
        ax.patch.set_hatch("xx")
        ax.patch.set_edgecolor("0.75")
        vals = m[np.isfinite(m)]
        norm = grid_norm(vals)
        # the cells as an image of the grid's size, coloured before it is enlarged (Agg) or left to the
        # viewer, pixelated (SVG): "nearest" normalised it at the figure's size, 0.1-0.2 s a grid and file
        image = ax.imshow(np.ma.masked_invalid(m), cmap="viridis", norm=norm, interpolation="none",
                          interpolation_stage="rgba", aspect="equal")
        ax.set_xticks(range(n), hosts, rotation=90, fontsize=7 if n > 10 else 8)
        ax.set_yticks(range(n), hosts, fontsize=7 if n > 10 else 8)
        ax.set_xlabel("destination host")
        ax.set_ylabel("source host")
        ax.set_title(f"{k} RTT")
        if n <= 12:
            for i in range(n):
                for j in range(n):
                    v = m[i, j]
                    if np.isfinite(v):
                        dark = norm(v) < 0.6
                        ax.text(j, i, grid_cell(v), ha="center", va="center",
                                fontsize=6.5, color="white" if dark else "black")
        bar = fig.colorbar(image, ax=ax, shrink=0.8, label=f"{k} RTT (µs; cells ≥ 1000 µs in ms)")
        if isinstance(norm, LogNorm):
            plain_log(bar.ax.yaxis)
        ranges.append(f"{k} from {_fmt_us(float(vals.min()))} to {_fmt_us(float(vals.max()))}")
    missing = int(np.isnan(next(iter(mats.values()))).sum())
    most = max((rtt_count(r) for r in pairs), default=0)
    why = "".join(f"; no {k} grid: a pair has at most {most:,} RTTs, a {k} needs {need:,}" if most < need
                  else f"; no {k} grid: no pair has a {k}"
                  for k, need in ((k, min_n_for_quantile(float(k[1:]))) for k in missing_grids))
    fitted_suptitle(fig, f"{wname}: RTT per source × destination, each grid on its own colour scale "
                    f"(hatched: no value){why}")
    alt = (f"Heat maps of {wname} round-trip time per source host (rows) and destination host (columns), "
           f"{' and '.join(mats)} left to right, each on its own colour scale: {'; '.join(ranges)}; {n} hosts, "
           f"{missing} of {n * n} cells missing (hatched){why}.")
    return Plot(f"{slug(wname)}-grid", f"{wname}: src × dst grid of {' and '.join(mats)}", alt, fig)


QUORUM_MARKS = ((P50, "o"), (P90, "s"), (P99, "^"), (P99_9, "D"))


def quorum_plot(wname: str, sec: dict[str, Any]) -> Drawing | None:
    """Per quorum (Qk/n of a group): the p5–p99.9 range with p50, p90, p99, p99.9 marked."""
    rows = [r for r in sec.get("quorums") or [] if finite(r.get(P50))]
    if not rows:
        return _nothing(f"{slug(wname)}-quorums", f"{wname}: quorum latency", "quorum figure",
                        sec.get("quorums") or [], "quorum", "a median")
    fig = new_figure(7.0, 1.2 + 0.5 * len(rows))
    ax = fig.add_subplot()
    labels = [f"{r['group']} {r['quorum']}" for r in rows]
    for y, r in enumerate(rows):
        lo, hi = r.get(P5), r.get(P99_9)
        if finite(lo) and finite(hi):
            ax.plot([lo, hi], [y, y], color="0.5", linewidth=1.5)
        for k, marker in QUORUM_MARKS:
            if finite(r.get(k)):
                ax.plot([r[k]], [y], marker=marker, color="black", markerfacecolor="white" if k != P50 else "black",
                        linestyle="none", markersize=7, label=k if y == 0 else None)
    ax.set_yticks(range(len(rows)), labels)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    if _log_wanted([r.get(P5) for r in rows] + [r.get(P99_9) for r in rows]):
        ax.set_xscale("log")
        plain_log(ax.xaxis)
    ax.set_xlabel("quorum latency: k-th fastest reply of a round (µs); line p5–p99.9")
    ax.grid(axis="x", alpha=0.3, which="both")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{wname}: quorum latency")
    alt = (f"Quorum latencies of {wname}: " + "; ".join(
        f"{lab} median {_fmt_us(r[P50])}, p99 {_fmt_us(r[P99])}" if finite(r.get(P99)) else
        f"{lab} median {_fmt_us(r[P50])}" for lab, r in zip(labels, rows, strict=True)) + ".")
    return Plot(f"{slug(wname)}-quorums", f"{wname}: quorum latency", alt, fig)
