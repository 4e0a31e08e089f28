"""The echo workload's report section: latency groups, quorums, windows, pairs, worker health."""

from __future__ import annotations

import math
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from rich.console import Console
from rich.text import Text

from cloudbench.analysis.events import EventParams
from cloudbench.analysis.latency import PERCENTILES, needs_note, pct_label, quantile_estimable
from cloudbench.analysis.levelshift import PairWindows, group_series, level_shift_rows, step_windows_needed
from cloudbench.analysis.quantiles import P50, P99
from cloudbench.core.blocks import Block, fact, note, print_blocks, warning
from cloudbench.core.tables import ReportTable, fmt_number, rep_number, titled_table
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.echo import sweeps
from cloudbench.workloads.echo import views as views_
from cloudbench.workloads.echo.aggregates import EchoAggregates, aggregate_echo
from cloudbench.workloads.echo.params import window_of
from cloudbench.workloads.echo.summaries import spec_quorums
from cloudbench.workloads.echo.trial_files import utc_of

TABLES = ("groups", "quorums", "windows", "pairs", "level_shifts", "events")


def section(run: RunDir, manifest: Manifest, params: dict[str, Any]) -> dict[str, Any]:
    """The report section of one echo workload (``params``: its spec entry)."""
    rate = params.get("rate", 100.0)
    interval = 1.0 / float(rate) if isinstance(rate, int | float) and rate else None
    return section_of(aggregate_echo(run, manifest, params["name"], window_of(params),
                                     spec_quorums(manifest, params), round_interval_s=interval, level_shifts=True),
                      manifest, params, run,
                      sweeps.stratum_aggregates(run, manifest, params))


def section_of(agg: EchoAggregates, manifest: Manifest, params: dict[str, Any], run: RunDir,
               parts: list[sweeps.Stratum] | None = None) -> dict[str, Any]:
    """The section from the run's aggregates (:func:`aggregate_echo`).

    When a parameter was swept (``parts``: each value's aggregates,
    :func:`~cloudbench.workloads.echo.sweeps.stratum_aggregates`), ``groups``, ``quorums``,
    ``pairs``, ``boxes`` and ``tails`` hold a row per swept value with its ``sweep`` label
    (``payload=1024``): 64 B and 64 KiB are never pooled into one distribution. Windows,
    events and level shifts stay per trial (each trial has one value).

    Keys the HTML report's figures draw from, besides the tables (all RTTs in µs,
    warm-up rows left out, timeouts not RTTs):

    * ``boxes``: per latency group, ``count`` of RTTs, ``p5 p25 p50 p75 p95`` and
      ``mean`` (:data:`~cloudbench.analysis.latency.BOX_PERCENTILES`);
    * ``tails``: per group, rows (``exceedance`` = P(RTT > ``rtt_us``), ``rtt_us``) at
      :data:`~cloudbench.analysis.latency.CCDF_EXCEEDANCE` levels down to 1e-5 and not
      below 1/n, the last row the largest RTT at 1/n (:func:`~cloudbench.analysis.latency.ccdf_levels`);
    * ``pair_windows``: mean RTT per (repetition, trial, src, dst, window), like ``windows``
      per group; both carry ``start_utc`` when the workers recorded their clock;
    * ``hosts``: every host of the run (the src × dst grid shows a pair not in ``pairs`` as missing);
    * ``trial_utc``: trial id -> UTC time it started;
    * ``window_s``: the window length in seconds;
    * ``step_windows``: ``{"windows": N, "needs": M}``, the most windows a pair's series
      has and the fewest with which the step test can reach its alpha
      (:func:`~cloudbench.analysis.events.step_windows_needed`).
    """
    name = params["name"]
    with ThreadPoolExecutor(1) as pool:  # the modes' densities (numpy) beside the level shifts (Python)
        more = pool.submit(views_.section, run, manifest, params, agg, parts)  # modes, handshakes, sweeps
        shifts = agg.shift_rows if agg.shift_rows is not None else level_shift_rows(agg.pair_series, agg.events)
        extra = more.result()
    distributions = sweeps.by_value(parts) if parts else {}
    return {
        "kind": "echo",
        "unit": "us",
        "rows": agg.rows,
        "groups": agg.groups,
        "quorums": agg.quorums,
        "windows": with_medians(agg.windows, agg.pair_series, window_of(params), pairs=False),
        "pairs": agg.pairs,
        "level_shifts": [{**r, "time_utc": utc_of(agg.trial_t0_utc_us.get(r["trial"]), float(r["time_s"]))}
                         for r in shifts],
        "events": agg.events,
        "workers": echo_worker_health(manifest, name),
        "window_s": window_of(params),
        "step_windows": {"windows": max((len(s[4]) for s in agg.pair_series), default=0),
                         "needs": step_windows_needed(EventParams().alpha)},
        "boxes": agg.boxes,
        "tails": agg.tails,
        "pair_windows": with_medians(agg.pair_windows, agg.pair_series, window_of(params), pairs=True),
        "hosts": list(agg.hosts),
        "trial_utc": {t.id: t.started_utc for t in manifest.trials if t.workload == name},
        **extra,
        **distributions,
    }


def with_medians(rows: list[dict[str, Any]], pair_series: list[PairWindows], window_s: float,
                 pairs: bool) -> list[dict[str, Any]]:
    """Window rows with the ``median`` the level shifts are sought in: a pair's window median
    (``pairs``), or a group's median of its pairs' window medians
    (:func:`~cloudbench.analysis.levelshift.group_series`); None where there is none (self-loops)."""
    med: dict[tuple[Any, ...], float] = {}
    for r, trial, name, group, ts, vs in (pair_series if pairs else group_series(pair_series)):
        key = name if pairs else group
        for t, v in zip(np.asarray(ts, dtype=float).tolist(), np.asarray(vs, dtype=float).tolist(), strict=True):
            med[(r, trial, key, round(t / window_s))] = v
    out = []
    for row in rows:
        key = f"{row['src']}>{row['dst']}" if pairs else row["group"]
        out.append({**row, "median": med.get((row["repetition"], row["trial"], key,
                                               round(float(row["start_s"]) / window_s)))})
    return out


def views(wname: str, w: dict[str, Any], options: Mapping[str, bool]) -> list[Block]:
    """The echo section's tables and lines, as the terminal prints them and the page shows them:
    group and quorum tables, modes, worker health, windows and pairs (on request), events,
    level shifts, then handshakes, connection modes side by side and sweeps."""
    out: list[Block] = []
    swept = ["sweep"] if any("sweep" in r for r in w["groups"]) else []
    out.append(_distribution_table(f"{wname}: RTT by latency group (µs)", w["groups"], ["group", *swept]))
    out += views_.mode_lines(wname, w)  # beside the percentiles: modes, and which percentiles are unstable
    if w["quorums"]:
        out.append(_distribution_table(
            f"{wname}: quorum latency (µs; k-th fastest reply per round)", w["quorums"],
            ["quorum", "group", *swept]))
    health = w.get("workers")
    if health:
        out.append(fact(health_text(wname, health)))
    if options.get("windows") and w["windows"]:
        cols = ("repetition", "trial", "start_s", "group", "count", "mean")
        wt = titled_table(f"{wname}: windowed mean RTT (µs)", cols, left=("trial", "group"),
                          short={"repetition": "rep"}, key=4)
        for r in w["windows"]:
            wt.add_row(*[Text(rep_number(r[c]) if c == "repetition" else fmt_number(r[c])) for c in cols])
        out.append(wt)
    if options.get("pairs") and w["pairs"]:
        out.append(pairs_table(wname, w["pairs"], swept))
    events = w.get("events")
    steps = w.get("step_windows")
    if events is not None and steps and 0 < steps["windows"] < steps["needs"]:
        out.append(warning(f"{wname}: steps not testable: {steps['windows']} windows, needs "
                           f"{steps['needs']} (the step test's smallest p-value is above its alpha; "
                           "a longer trial or a shorter `window` has more)"))
    if events:
        et = titled_table(f"{wname}: spikes and steps per pair, on raw RTTs (µs, s; origin host = "
                          "the measuring host, not the link)",
                          ("rep", "pair", "kind", "origin", "at", "for", "size", "95 % CI", "p"),
                          left=("pair", "kind", "origin"))
        for r in events:
            et.add_row(*map(Text, (rep_number(r["repetition"]), str(r["series"]), str(r["kind"]), str(r["origin"]),
                                   f"{r['time_s']:.2f}", f"{r['duration_s']:.2f}" if r["kind"] == "spike" else "",
                                   f"{r['size']:.0f}", size_ci(r), f"{r['p_value']:.0e}")))
        out.append(et)
        shares = [size_ci(r).rsplit(" ", 1)[1] for r in events if size_ci(r).endswith("%)")]
        if shares:  # the share is the interval's own coverage, not a fraction of anything in the row
            out.append(note(f"{wname}: a 95 % CI with a share beside it, as {shares[0]}, covers only that share: "
                            "the spike has too few echoes (under 7) for an exact 95 % interval of its median, "
                            "so its interval is its echoes' min..max"))
    # per pair, the events table above (raw RTTs, significance, host labels) replaces the
    # window-median shifts, which have neither; the group series keep theirs
    shifts = [r for r in w.get("level_shifts") or []
              if not (events is not None and ">" in str(r.get("series", "")))]
    if shifts:
        shift_cols = ("repetition", "series", "kind", "time_s", "size", "before", "after")
        st = titled_table(f"{wname}: level shifts and spikes (µs)", shift_cols, left=("series", "kind"),
                          short={"repetition": "rep"}, key=3)
        for r in shifts:
            st.add_row(*[Text(rep_number(r.get(c, "")) if c == "repetition" else fmt_number(r.get(c, ""), 2))
                         for c in shift_cols])
        out.append(st)
    out += views_.views(wname, w)  # handshakes, connection modes side by side, sweeps
    return out


def render(wname: str, w: dict[str, Any], console: Console, options: Mapping[str, bool]) -> None:
    """Print the echo section for a person (:func:`views`)."""
    print_blocks(views(wname, w, options), console)


def health_text(wname: str, health: Mapping[str, Any]) -> str:
    """The workers' CPU and late rounds as one sentence."""
    share = health["late_sends"] / health["rounds"] if health["rounds"] else 0.0
    lag = f"{health['max_send_lag_us'] / 1000:.1f} ms"
    # a round is late past a tolerance (the worker's: half an interval, at most 1 ms), so the
    # largest lag of rounds none of which was late is within it ("0 of 100 rounds (0.00%) left
    # late, by at most 0.8 ms" read as a contradiction)
    late = (f"no round of {health['rounds']:,} left late (the latest {lag} after its time, within the "
            "tolerance: half a round's interval, at most 1 ms)" if health["late_sends"] == 0 else
            f"{health['late_sends']:,} of {health['rounds']:,} rounds ({share:.2%}) left late, by at most {lag}")
    return (f"{wname}: workers used at most {health['cpu_pct_max']:.1f} % of a core "
            f"({health['cpu_pct_max_host']}, {health['cpu_pct_max_trial']}); {late}{_stamps(health)}")


def pairs_table(wname: str, pairs: list[dict[str, Any]], swept: list[str]) -> ReportTable:
    """The per-pair RTT table (printed on request: ``--pairs``)."""
    pair_cols = ("src", "dst", "group", *swept, "count", "timeouts", "mean", P50, P99, "max")
    note = needs_note([rtt_count(r) for r in pairs], (50.0, 99.0), what="RTTs")
    pt = titled_table(f"{wname}: per pair (µs){'; ' + note if note else ''}", pair_cols,
                      left=("src", "dst", "group", *swept), key=2)
    for r in pairs:
        pt.add_row(*[Text(pct_cell(r, float(c[1:])) if c in (P50, P99) else fmt_number(r[c]))
                     for c in pair_cols])
    return pt


def size_ci(row: Mapping[str, Any]) -> str:
    """An event's size interval: ``lo..hi``, its coverage beside it when under 95 % (a short
    spike's min–max), ``n/a`` when there is none (rows of old reports: NaN)."""
    lo, hi, level = row.get("size_ci_low"), row.get("size_ci_high"), row.get("size_ci_level")
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "n/a"
    text = f"{lo:.0f}..{hi:.0f}"
    if level is not None and math.isfinite(level) and level < 0.95 - 1e-9:
        text += f" ({level:.0%})"
    return text


def echo_worker_health(manifest: Manifest, workload: str) -> dict[str, Any] | None:
    """What the echo workers said about themselves: their CPU share and rounds sent late.

    A worker short of CPU sends its rounds late, and stamps replies late where the
    kernel does not stamp them, so these say how far its RTTs can be trusted. CPU
    is the worker's whole run (server included) over its wall time; a round is
    late when it left more than 1 ms (or half an interval) after its scheduled
    time; ``kernel_stamps``/``user_stamps`` count the echoes stamped by the kernel
    on arrival and by the worker when it read them. None when no trial reported.
    """
    worst: tuple[float, str, str] | None = None
    late = rounds = lag_us = kernel = user = 0
    for t in manifest.trials:
        if t.workload != workload:
            continue
        for host, s in t.stats.items():
            wall = float(s.get("wall_s") or 0.0)
            if wall > 0:
                pct = 100.0 * float(s.get("cpu_s") or 0.0) / wall
                if worst is None or pct > worst[0]:
                    worst = (pct, host, t.id)
            late += int(s.get("late_sends") or 0)
            rounds += int(s.get("rounds") or 0)
            lag_us = max(lag_us, int(s.get("max_send_lag_us") or 0))
            kernel += int(s.get("kernel_stamps") or 0)
            user += int(s.get("user_stamps") or 0)
    if worst is None:
        return None
    return {"cpu_pct_max": round(worst[0], 2), "cpu_pct_max_host": worst[1],
            "cpu_pct_max_trial": worst[2], "rounds": rounds, "late_sends": late,
            "max_send_lag_us": lag_us, "kernel_stamps": kernel, "user_stamps": user}


def _stamps(health: Mapping[str, Any]) -> str:
    """How the echoes were stamped; empty for workers that did not count it (worker 1)."""
    kernel, user = int(health.get("kernel_stamps") or 0), int(health.get("user_stamps") or 0)
    if not kernel + user:
        return ""
    if not user:
        return f"; all {kernel:,} echoes stamped by the kernel"
    return (f"; {user:,} of {kernel + user:,} echoes ({user / (kernel + user):.2%}) stamped on read, "
            "not by the kernel")


def rtt_count(r: dict[str, Any]) -> int:
    """The RTTs a distribution row rests on (its count without the timeouts)."""
    return int(r.get("count") or 0) - int(r.get("timeouts") or 0)


def pct_cell(r: dict[str, Any], p: float, n: int | None = None) -> str:
    """A percentile cell: "—" where the row's RTTs cannot estimate it (latency.TAIL_K)."""
    n = rtt_count(r) if n is None else n
    if n > 0 and not quantile_estimable(n, p):
        return "—"
    return fmt_number(r.get(pct_label(p), float("nan")))


def _distribution_table(title: str, rows: list[dict[str, Any]], labels: list[str]) -> ReportTable:
    """Table-1 style: one row per group; stacked (groups as columns) when too narrow. A
    percentile the row's RTTs cannot estimate prints "—", the title says what it needs."""
    note = needs_note([rtt_count(r) for r in rows], what="RTTs")
    cols = ["count", "timeouts", "mean"]
    t = titled_table(f"{title}{'; ' + note if note else ''}",
                     [*labels, *cols, *[pct_label(p) for p in PERCENTILES], "max"], left=labels,
                     key=len(labels))
    for r in rows:
        t.add_row(*map(Text, [*[str(r[c]) for c in labels], *[fmt_number(r[c]) for c in cols],
                              *[pct_cell(r, p) for p in PERCENTILES], fmt_number(r["max"])]))
    return t
