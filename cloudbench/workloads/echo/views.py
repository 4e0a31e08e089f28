"""The echo report's further views: multimodality, handshakes, connection modes side by side, sweeps.

:func:`section` adds its keys to the echo section (:mod:`.report` calls it with the
rows it loaded): ``modes`` (every latency distribution tested for more than one
mode, :mod:`cloudbench.analysis.modes`), ``connect`` (handshake times of
per-round connections), ``connection_modes`` (all the spec's echo workloads in
their modes, in the first one's section) and ``sweep`` (latency per swept value,
:mod:`.sweeps`). :func:`mode_lines` are the warnings about modes beside the percentile
table, :func:`views` the tables of the rest (the terminal prints them, the page shows them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.text import Text

from cloudbench.analysis.latency import PERCENTILES, needs_note, pct_label, quantile_estimable
from cloudbench.analysis.modes import ModeTest, find_modes, find_modes_histogram
from cloudbench.analysis.orderstats import bin_edges
from cloudbench.analysis.quantiles import P50, P90, P99
from cloudbench.core.blocks import Block, note, warning
from cloudbench.core.tables import fmt_number, titled_table
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.echo import connections, sweeps
from cloudbench.workloads.echo.aggregates import EchoAggregates, aggregate_echo
from cloudbench.workloads.echo.params import window_of

TABLES = ("modes", *connections.TABLES, *sweeps.TABLES)


def section(run: RunDir, manifest: Manifest, params: dict[str, Any], agg: EchoAggregates,
            parts: list[sweeps.Stratum] | None = None) -> dict[str, Any]:
    """The keys these views add to one echo workload's section (``agg``: its aggregates;
    ``parts``: each swept value's, when the caller has them)."""
    name = params["name"]
    per_round = params.get("connection") == "per_round"
    out: dict[str, Any] = {
        "mode": connections.mode_label(params),
        "modes": mode_rows(agg),
        "connect": agg.connect if per_round else [],
        "sweep": sweeps.sweep_table(run, manifest, params, parts),
        "connection_modes": [],
    }
    if connections.compares(manifest, params):
        rows: list[dict[str, Any]] = []
        for w in connections.echo_workloads(manifest):
            wagg = agg if w["name"] == name else aggregate_echo(run, manifest, w["name"],
                                                                 window_of(w))
            rows += connections.mode_rows(w["name"], w, wagg)
        out["connection_modes"] = connections.sort_modes(rows)
    return out


def mode_rows(agg: EchoAggregates) -> list[dict[str, Any]]:
    """One row per mode of each distribution (a unimodal one has one row): every latency
    group's RTTs (from its histogram, so it scales to any run) and every quorum's latencies."""
    tests: list[tuple[str, ModeTest]] = []
    edges = bin_edges(1000.0)
    for group, counts in agg.group_hists.items():
        tests.append((group, find_modes_histogram(edges, counts)))
    for qname, q in agg.quorum_values.items():
        finite = q[np.isfinite(q)]
        if len(finite):
            tests.append((qname, find_modes(finite)))
    rows = []
    for name, t in tests:
        unstable = " ".join(pct_label(p) for p in t.unstable_percentiles(PERCENTILES))
        for i, mode in enumerate(t.modes):
            rows.append(
                {
                    "distribution": name,
                    "multimodal": t.multimodal,
                    "dip": t.dip,
                    "p_value": t.p_value,
                    "n": t.n,
                    "n_tested": t.n_tested,
                    "mode": i + 1,
                    "location": mode.location,
                    "low": mode.low if np.isfinite(mode.low) else None,
                    "high": mode.high if np.isfinite(mode.high) else None,
                    "share": mode.share,
                    "unstable": unstable,
                }
            )
    return rows


def mode_lines(wname: str, w: dict[str, Any]) -> list[Block]:
    """A warning for each multimodal distribution: its modes, and the percentiles between them."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in w.get("modes") or []:
        by.setdefault(r["distribution"], []).append(r)
    out: list[Block] = []
    for dist, rows in by.items():
        if not rows[0]["multimodal"]:
            continue
        modes = ", ".join(f"{_us(r['location'])} ({r['share']:.1%})" for r in rows)
        first = rows[0]
        p = "< 0.001" if first["p_value"] < 1e-3 else f"= {first['p_value']:.3f}"
        out.append(warning(
            f"{wname}: {dist} RTT has {len(rows)} modes (dip test p {p}, "
            f"{first['n_tested']:,} of {first['n']:,} values): {modes}. Percentiles between modes are "
            f"unstable{' (' + first['unstable'] + ')' if first['unstable'] else ''}: a small change in "
            "the modes' shares moves them from one mode to another."))
    return out


def views(wname: str, w: dict[str, Any]) -> list[Block]:
    """Handshake times, the connection modes side by side, and the sweep table."""
    out: list[Block] = []
    if w.get("connect"):
        cols: tuple[str, ...] = ("group", "count", P50, P90, P99, "max")
        t = titled_table(f"{wname}: TCP handshake of the per-round connections (µs)", cols, left=("group",))
        for r in w["connect"]:
            t.add_row(*[Text(fmt_number(r[c])) for c in cols])
        out.append(t)
    if w.get("connection_modes"):
        # One table per latency group, a column per workload: it fits a terminal.
        by_group: dict[str, list[dict[str, Any]]] = {}
        for r in w["connection_modes"]:
            by_group.setdefault(r["group"], []).append(r)
        metrics = ("count", "timeouts", *connections.COLUMNS, "connect_p50", "connect_p99")
        pcts = [float(c[1:]) for c in connections.COLUMNS if c.startswith("p")]
        for group, rows in by_group.items():
            ns = [int(r["count"]) - int(r["timeouts"]) for r in rows]
            note = needs_note(ns, pcts, what="RTTs")
            # "-": a persistent connection has no handshake per round (not "too few to estimate": "—")
            none = " (-: none, the connection persists)" if any(r["connect_p50"] is None for r in rows) else ""
            t = titled_table(f"echo connection modes side by side, {group}: RTT (µs); connect = TCP "
                             f"handshake{none}{'; ' + note if note else ''}")
            t.add_column("")
            for r in rows:
                t.add_column(f"{r['workload']}\n{r['mode']}", justify="right")
            for m in metrics:
                t.add_row(Text(m.replace("_", " ")),
                          *[Text(_mode_cell(r, m, n)) for r, n in zip(rows, ns, strict=True)])
            out.append(t)
        out += _scheduling_note(w["connection_modes"])
    if w.get("sweep"):
        fields = sweeps.swept_fields(w["sweep"])
        cols = ("group", *fields, "reps", "count", P50, P99)
        t = titled_table(
            f"{wname}: RTT per {' and '.join(fields)} (µs); rep = the median over repetitions of each "
            f"one's value [{sweeps.LEVEL:.0%} CI]",
            (*cols, "rep p50", "rep p99"),
            left=("group",),
        )
        for r in w["sweep"]:
            t.add_row(*[Text(fmt_number(r["repetitions" if c == "reps" else c])) for c in cols],
                      Text(_ci(r, P50)), Text(_ci(r, P99)))
        out.append(t)
    return out


SCHEDULING_SCALE_US = 200.0
"""Below this, the medians of the connection modes are said to be set by process wake-ups."""


def _scheduling_note(rows: list[dict[str, Any]]) -> list[Block]:
    """Why a new connection's echo can be faster than a persistent one's (as seen on the
    namespace testbed: cold 34.6 µs against hot 70.5 µs at p50 in one run, 38.2 against 21.9 in
    another): at tens of µs the RTT is the receiving worker's wake-up. It is bimodal (about 10 µs
    when the receiver is running, about 30 µs when it must be woken, more when the cores are
    busy); a per-round connection's echo follows its handshake, which already woke the receiver,
    while a persistent connection's waits idle between rounds."""
    medians = [r[P50] for r in rows if r.get(P50) is not None]
    if not medians or max(medians) >= SCHEDULING_SCALE_US:
        return []
    return [note(
        f"the modes' medians are all under {SCHEDULING_SCALE_US:.0f} µs, where an RTT is mostly the "
        "receiving process's wake-up (about 10 µs when it is running, 30 µs or more when it must be woken or the cores "
        "are busy), not the path: a per-round connection's echo follows its handshake, which has "
        "already woken the receiver, so it can be faster than a persistent connection's. Their "
        "order here can change with the rate and the machine's load; the handshake rows are the "
        "new connection's own cost.")]


def _mode_cell(r: dict[str, Any], metric: str, n: int) -> str:
    """A cell of the side-by-side table: "—" for an RTT percentile its n RTTs cannot estimate."""
    if metric in connections.COLUMNS and metric.startswith("p") and n > 0 and not quantile_estimable(
            n, float(metric[1:])):
        return "—"
    return fmt_number(r[metric]) if r[metric] is not None else "-"


def _ci(r: dict[str, Any], key: str) -> str:
    est, lo, hi = r[f"rep_{key}_median"], r[f"rep_{key}_lower"], r[f"rep_{key}_upper"]
    if lo is None or hi is None:
        return f"{fmt_number(est)} (too few for a CI)" if r["repetitions"] > 1 else fmt_number(est)
    return f"{fmt_number(est)} [{fmt_number(lo)}–{fmt_number(hi)}]"


def _us(x: float) -> str:
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.0f} µs"
