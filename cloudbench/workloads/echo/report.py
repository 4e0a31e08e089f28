"""The echo workload's report section: latency groups, quorums, windows, pairs, worker health."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cloudbench.analysis.events import Event, detect_pair_events, label_host_events
from cloudbench.analysis.latency import (
    PERCENTILES,
    EchoData,
    group_table,
    pair_table,
    pct_label,
    quorum_table,
    windowed_means,
)
from cloudbench.analysis.levelshift import echo_level_shifts
from cloudbench.core.tables import fmt_number, titled_table
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.echo.data import load_echo
from cloudbench.workloads.echo.summaries import spec_quorums

TABLES = ("groups", "quorums", "windows", "pairs", "level_shifts", "events")


def section(run: RunDir, manifest: Manifest, params: dict[str, Any]) -> dict[str, Any]:
    """The report section of one echo workload (``params``: its spec entry)."""
    name = params["name"]
    window = float(params.get("window", 30.0))
    d = load_echo(run, manifest, name)
    windows = windowed_means(d, window)
    return {
        "kind": "echo",
        "unit": "us",
        "rows": len(d),
        "groups": group_table(d),
        "quorums": quorum_table(d, spec_quorums(manifest, params)),
        "windows": windows,
        "pairs": pair_table(d),
        "level_shifts": echo_level_shifts(d, window, windows),
        "events": pair_events(d, window, 1.0 / float(params.get("rate", 100.0))),
        "workers": echo_worker_health(manifest, name),
    }


def render(wname: str, w: dict[str, Any], console: Console, options: Mapping[str, bool]) -> None:
    """The echo section for a person: group and quorum tables, worker health, level shifts."""
    console.print(_distribution_table(console, f"{wname}: RTT by latency group (µs)", w["groups"], ["group"]))
    if w["quorums"]:
        console.print(_distribution_table(
            console, f"{wname}: quorum latency (µs; k-th fastest reply per round)", w["quorums"],
            ["quorum", "group"]))
    health = w.get("workers")
    if health:
        share = health["late_sends"] / health["rounds"] if health["rounds"] else 0.0
        console.print(
            f"{escape(wname)}: workers used at most {health['cpu_pct_max']:.1f} % of a core "
            f"({escape(health['cpu_pct_max_host'])}, {escape(health['cpu_pct_max_trial'])}); "
            f"{health['late_sends']} of {health['rounds']} rounds ({share:.2%}) left late, "
            f"by at most {health['max_send_lag_us'] / 1000:.1f} ms{_stamps(health)}")
    if options.get("windows") and w["windows"]:
        cols = ("repetition", "trial", "start_s", "group", "count", "mean")
        wt = titled_table(f"{wname}: windowed mean RTT (µs)", cols)
        for r in w["windows"]:
            wt.add_row(*[fmt_number(r[c]) for c in cols])
        console.print(wt)
    if options.get("pairs") and w["pairs"]:
        pair_cols = ("src", "dst", "group", "count", "timeouts", "mean", "p50", "p99", "max")
        pt = titled_table(f"{wname}: per pair (µs)", pair_cols)
        for r in w["pairs"]:
            pt.add_row(*[fmt_number(r[c]) for c in pair_cols])
        console.print(pt)
    events = w.get("events")
    if events:
        et = titled_table(f"{wname}: spikes and steps per pair, on raw RTTs (µs, s; origin host = "
                          "the measuring host, not the link)",
                          ("rep", "pair", "kind", "origin", "at", "for", "size", "95 % CI", "p"),
                          left=("pair", "kind", "origin"))
        for r in events:
            et.add_row(str(r["repetition"]), str(r["series"]), str(r["kind"]), str(r["origin"]),
                       f"{r['time_s']:.2f}", f"{r['duration_s']:.2f}" if r["kind"] == "spike" else "",
                       f"{r['size']:.0f}", f"{r['size_ci_low']:.0f}..{r['size_ci_high']:.0f}",
                       f"{r['p_value']:.0e}")
        console.print(et)
    # per pair, the events table above (raw RTTs, significance, host labels) replaces the
    # window-median shifts, which have neither; the group series keep theirs
    shifts = [r for r in w.get("level_shifts") or []
              if not (events is not None and ">" in str(r.get("series", "")))]
    if shifts:
        shift_cols = ("repetition", "series", "kind", "time_s", "size", "before", "after")
        st = titled_table(f"{wname}: level shifts and spikes (µs)", shift_cols, left=("series", "kind"))
        for r in shifts:
            st.add_row(*[fmt_number(r.get(c, ""), 2) for c in shift_cols])
        console.print(st)


# --- issue 16: per-pair events on raw RTTs. The one call site of analysis.events;
# the detector takes per-pair arrays (time, RTT, round) and the round interval.
def pair_events(d: EchoData, window_s: float, round_interval_s: float) -> list[dict[str, Any]]:
    """Spikes and steps of every ordered pair's raw RTTs, host events labelled.

    Times are seconds after the source worker's start (as ``send_us``), so the
    pairs of one source, which :func:`label_host_events` compares, share a clock.
    """
    m = d.measured() & ~np.isnan(d.rtt_us) & (d.src != d.dst)
    if not m.any():
        return []
    keys = np.stack([d.repetition[m], d.trial[m], d.src[m], d.dst[m]])
    uniq, inv = np.unique(keys, axis=1, return_inverse=True)
    inv = inv.reshape(-1)
    t_all, y_all, r_all = d.send_us[m] / 1e6, d.rtt_us[m], d.round[m]
    runs: dict[tuple[int, int], dict[tuple[str, str], list[Event]]] = {}
    for k in range(uniq.shape[1]):
        rep, tr, a, b = (int(x) for x in uniq[:, k])
        sel = inv == k
        runs.setdefault((rep, tr), {})[(d.hosts[a], d.hosts[b])] = detect_pair_events(
            t_all[sel], y_all[sel], round_interval_s, window_s, round_index=r_all[sel])
    rows: list[dict[str, Any]] = []
    for (rep, tr), by_pair in sorted(runs.items()):
        for (src, dst), evs in sorted(label_host_events(by_pair, round_interval_s, window_s).items()):
            rows += [e.to_row(repetition=rep, trial=d.trials[tr], series=f"{src}>{dst}") for e in evs]
    return rows


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


def _stamps(health: dict[str, Any]) -> str:
    """How the echoes were stamped; empty for workers that did not count it (worker 1)."""
    kernel, user = int(health.get("kernel_stamps") or 0), int(health.get("user_stamps") or 0)
    if not kernel + user:
        return ""
    if not user:
        return f"; all {kernel} echoes stamped by the kernel"
    return (f"; {user} of {kernel + user} echoes ({user / (kernel + user):.2%}) stamped on read, "
            "not by the kernel")


def _distribution_table(console: Console, title: str, rows: list[dict[str, Any]], labels: list[str]) -> Table:
    """Table-1 style: one row per group; transposed (groups as columns) when narrow."""
    cols = ["count", "timeouts", "mean", *[pct_label(p) for p in PERCENTILES], "max"]
    wide = console.width >= 16 * (len(cols) + len(labels)) // 2 + 40
    t = titled_table(title)
    if wide:
        for c in labels:
            t.add_column(c, no_wrap=True)
        for c in cols:
            t.add_column(c, justify="right", no_wrap=True)
        for r in rows:
            t.add_row(*[str(r[c]) for c in labels], *[fmt_number(r[c]) for c in cols])
        return t
    t.add_column("", no_wrap=True)
    for r in rows:
        t.add_column(" ".join(str(r[c]) for c in labels), justify="right", no_wrap=True)
    for c in cols:
        t.add_row(c, *[fmt_number(r[c]) for r in rows])
    return t
