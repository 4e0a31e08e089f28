"""The echo report's tables, shaped from the scan's counts and selected order statistics.

:func:`aggregate_echo` runs the scan (:mod:`~cloudbench.workloads.echo.scan`) and turns
its per-key numbers into the rows the report, the figures and the summaries use
(:class:`EchoAggregates`): latency groups overall and per repetition, pairs, windows,
quorums, handshakes, box plots and tails.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cloudbench.analysis.latency import BOX_PERCENTILES, CCDF_EXCEEDANCE, ccdf_levels, distribution_row, pct_label
from cloudbench.analysis.levelshift import PairWindows, level_shift_rows
from cloudbench.analysis.quantiles import P50, P99
from cloudbench.core.topology import GROUP_ORDER
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.echo.params import Quorum
from cloudbench.workloads.echo.scan import EchoScan, FirstPass, SelectedRtts
from cloudbench.workloads.echo.trial_files import concat, utc_of

Row = dict[str, Any]


@dataclass
class EchoAggregates:
    """What the echo report and the summaries need, computed from one run's files."""

    hosts: list[str]
    repetitions: list[int]
    groups: list[Row]
    groups_by_rep: dict[int, list[Row]]
    pairs: list[Row]
    windows: list[Row]
    pair_windows: list[Row]
    quorums: list[Row]
    quorums_by_rep: dict[int, list[Row]]
    trial_t0_utc_us: dict[str, float] = field(default_factory=dict)
    """Per trial: CLOCK_REALTIME µs of round 0 (the earliest host's), where the workers recorded it."""
    quorum_values: dict[str, np.ndarray] = field(default_factory=dict)
    """Every quorum latency (µs, inf for too few replies), by ``Qk/n name``."""
    group_hists: dict[str, np.ndarray] = field(default_factory=dict)
    """Per latency group: counts of RTTs in the bins of ``orderstats.bin_edges(1000.0)``."""
    connect: list[Row] = field(default_factory=list)
    """Per latency group: the handshake times of per-round connections (µs), as distribution rows."""
    events: list[Row] = field(default_factory=list)
    """Spikes and steps per pair on raw RTTs, host events labelled (with ``round_interval_s``)."""
    boxes: list[Row] = field(default_factory=list)
    """Per latency group: count of RTTs, the box plot's percentiles and the mean (µs)."""
    tails: list[Row] = field(default_factory=list)
    """Per latency group: CCDF points (exceedance, rtt_us) down to 1/n."""
    pair_series: list[PairWindows] = field(default_factory=list)
    """(repetition, trial, "src>dst", group, window start s, window median µs) per pair."""
    rows: int = 0
    shift_rows: list[Row] | None = None
    """:func:`~cloudbench.analysis.levelshift.level_shift_rows` of ``pair_series`` and ``events``
    (with ``level_shifts``; None without)."""


def aggregate_echo(run: RunDir, manifest: Manifest, workload: str, window_s: float,
                   quorums: Sequence[Quorum] = (), threads: int | None = None,
                   round_interval_s: float | None = None, trials: Collection[str] | None = None,
                   level_shifts: bool = False) -> EchoAggregates:
    """Every aggregate of a run's echo workload the report and the summaries use (two passes).

    ``round_interval_s`` (1 / rate) turns on the per-pair event detection on raw RTTs
    (:mod:`cloudbench.analysis.events`); the summaries do without it. ``level_shifts``: the
    level shifts' rows too (``shift_rows``), found beside the second pass: they need only the
    first (0.3-0.5 s of the report's tail on the 138 M-observation run, mostly Python).
    """
    scan = EchoScan(run, manifest, workload, window_s, quorums, threads, round_interval_s, trials)
    first = scan.first_pass()
    # beside this thread: the level shifts (from the first pass alone) during the second pass, and
    # the quorums' selections (numpy) during the windows' rows (Python)
    with ThreadPoolExecutor(2) as pool:
        shifts = pool.submit(level_shift_rows, first.pair_series, first.events) if level_shifts else None
        selected = scan.second_pass(first)
        groups, by_rep = _group_tables(scan, selected)
        quorum_job = pool.submit(_quorum_tables, scan, first)
        windows, pair_windows = _window_tables(scan, first)
        quorums_all, quorums_rep, quorum_values = quorum_job.result()
        shift_rows = shifts.result() if shifts is not None else None
    totals = selected.totals
    group_hists = {g.value: totals.hist[gi] for gi, g in enumerate(GROUP_ORDER) if totals.hist[gi].any()}
    boxes, tails = _boxes_and_tails(selected)
    t0s = {f.trial: t0 for f in scan.files if (t0 := f.t0_utc()) is not None}
    return EchoAggregates(boxes=boxes, tails=tails, events=first.events, quorum_values=quorum_values,
                          trial_t0_utc_us=t0s, group_hists=group_hists, connect=_handshake_table(scan, first),
                          hosts=scan.keys.hosts, repetitions=scan.keys.repetitions,
                          groups=groups, groups_by_rep=by_rep, pairs=_pair_table(scan, selected), windows=windows,
                          pair_windows=pair_windows, quorums=quorums_all, quorums_by_rep=quorums_rep,
                          pair_series=first.pair_series, rows=first.rows, shift_rows=shift_rows)


def _group_tables(scan: EchoScan, selected: SelectedRtts) -> tuple[list[Row], dict[int, list[Row]]]:
    """Distribution rows of the latency groups overall and per repetition."""
    keys, measured = scan.keys, selected.totals.measured
    groups = [{"group": g.value, **selected.distribution(keys.group_key(gi))}
              for gi, g in enumerate(GROUP_ORDER) if measured[keys.group_key(gi)]]
    by_rep: dict[int, list[Row]] = {}
    for r, rp in keys.rep_position.items():
        by_rep[r] = [{"group": g.value, **selected.distribution(keys.rep_group_key(rp, gi))}
                     for gi, g in enumerate(GROUP_ORDER) if measured[keys.rep_group_key(rp, gi)]]
    return groups, by_rep


def _pair_table(scan: EchoScan, selected: SelectedRtts) -> list[Row]:
    """One row per measured (sender, peer) over all repetitions."""
    keys, measured = scan.keys, selected.totals.measured
    pairs = []
    for a in range(keys.n_hosts):
        for b in range(keys.n_hosts):
            key = keys.pair_key(a, b)
            if not measured[key]:
                continue
            d = selected.distribution(key)
            grp = keys.group_of_pair(a, b)
            pairs.append({"src": keys.hosts[a], "dst": keys.hosts[b],
                          "group": GROUP_ORDER[grp].value if grp >= 0 else "",
                          "count": int(measured[key]), "timeouts": d["timeouts"],
                          "mean": d["mean"], P50: d[P50], P99: d[P99], "max": d["max"]})
    return pairs


def _handshake_table(scan: EchoScan, first: FirstPass) -> list[Row]:
    """Per latency group: the handshake times (µs) of per-round connections, as distribution rows."""
    connect: list[Row] = []
    if first.leaves.handshakes:
        leaves = np.concatenate([lf for lf, _ in first.leaves.handshakes])
        times = np.concatenate([c for _, c in first.leaves.handshakes])
        group_of_leaf = scan.keys.leaf_keys[0][leaves]
        for gi, g in enumerate(GROUP_ORDER):
            sel = group_of_leaf == scan.keys.group_key(gi)
            if sel.any():
                connect.append({"group": g.value, **distribution_row(times[sel], 0)})
    return connect


def _boxes_and_tails(selected: SelectedRtts) -> tuple[list[Row], list[Row]]:
    """Per latency group: the box plot's percentiles and mean, and the CCDF's points down to 1/n."""
    boxes: list[Row] = []
    tails: list[Row] = []
    for gi, g in enumerate(GROUP_ORDER):
        n = selected.count(gi)
        if not selected.totals.measured[gi] or not n:
            continue
        qs = selected.percentiles(gi, BOX_PERCENTILES)
        boxes.append({"group": g.value, "count": n, **{pct_label(p): q for p, q in zip(BOX_PERCENTILES, qs,
                                                                                        strict=True)},
                      "mean": float(selected.totals.sums[gi] / n)})
        levels = [e for e in CCDF_EXCEEDANCE if e >= 1.0 / n]
        xs = selected.percentiles(gi, ccdf_levels(n))
        pts = [(float(e), float(x)) for e, x in zip(levels, xs, strict=True)]
        if not levels or levels[-1] > 1.0 / n:
            pts.append((1.0 / n, selected.max(gi)))
        tails += [{"group": g.value, "exceedance": e, "rtt_us": x} for e, x in pts]
    return boxes, tails


def _quorum_tables(scan: EchoScan, first: FirstPass) -> tuple[list[Row], dict[int, list[Row]], dict[str, np.ndarray]]:
    """Quorum rows overall and per repetition, and each quorum's latencies (µs, inf: too few replies)."""
    quorums_all: list[Row] = []
    quorums_rep: dict[int, list[Row]] = {r: [] for r in scan.keys.repetitions}
    quorum_values: dict[str, np.ndarray] = {}
    for qi, q in enumerate(scan.quorums):
        for k in q.ks:
            per_rep = {r: concat(parts) for r, rp in scan.keys.rep_position.items()
                       if (parts := first.quorum_latencies.get((qi, k, rp)))}
            label = {"quorum": f"Q{k}/{q.size}", "group": q.name}
            rows = {r: {**label, **_quorum_row(v)} for r, v in per_rep.items() if len(v)}
            for r, row in rows.items():
                quorums_rep[r].append(row)
            values = concat([np.empty(0), *per_rep.values()]) if len(per_rep) != 1 else next(iter(per_rep.values()))
            quorum_values[f"Q{k}/{q.size} {q.name}"] = values
            # a single repetition's row is the overall one: its order statistics are not selected twice
            quorums_all.append(dict(*rows.values()) if len(rows) == 1 else {**label, **_quorum_row(values)})
    return quorums_all, quorums_rep, quorum_values


def _quorum_row(q: np.ndarray) -> dict[str, float | int]:
    finite = q[np.isfinite(q)]
    return distribution_row(finite, int((~np.isfinite(q)).sum()))


def _window_tables(scan: EchoScan, first: FirstPass) -> tuple[list[Row], list[Row]]:
    """Windowed means per (repetition, trial, window, group) and per (repetition, trial, pair, window)."""
    if not first.windows:
        return [], []
    keys = scan.keys
    window_keys = np.concatenate([k for k, _, _ in first.windows])
    uk, inv = np.unique(window_keys, return_inverse=True)
    sums = np.bincount(inv, weights=np.concatenate([s for _, s, _ in first.windows]))
    counts = np.bincount(inv, weights=np.concatenate([c for _, _, c in first.windows])).astype(np.int64)
    fi, leaf, w = keys.split_window_key(uk)
    rp, src, dst = keys.split_leaf(leaf)
    rep_of = np.array(first.file_reps, dtype=np.int64)
    grp = keys.pair_group[rp, src, dst]
    t0 = [f.t0_utc() for f in scan.files]

    @functools.cache
    def start_utc(a: int, wi: int) -> str | None:  # a window's start, formatted once for all its pairs
        return utc_of(t0[a], wi * scan.window_s)

    reps, trials = rep_of.tolist(), [f.trial for f in scan.files]
    groups = [g.value for g in GROUP_ORDER]
    # Python ints and floats (tolist) for ~46 K rows: the same values, without a numpy scalar per cell
    pair_rows = [{"repetition": reps[a], "trial": trials[a], "window": wi,
                  "start_s": wi * scan.window_s, "start_utc": start_utc(a, wi),
                  "src": keys.hosts[s], "dst": keys.hosts[d], "group": groups[g],
                  "count": c, "mean": sm / c}
                 for a, wi, s, d, g, sm, c in zip(fi.tolist(), w.tolist(), src.tolist(), dst.tolist(),
                                                  grp.tolist(), sums.tolist(), counts.tolist(), strict=True)]
    ug, ginv = np.unique(keys.group_window_key(fi, w, grp), return_inverse=True)
    gsum = np.bincount(ginv, weights=sums)
    gcnt = np.bincount(ginv, weights=counts).astype(np.int64)
    rows: list[Row] = []
    for key, sm, c in zip(ug, gsum, gcnt, strict=True):
        a, wi, g = keys.split_group_window_key(key)
        rows.append({"repetition": int(rep_of[a]), "trial": scan.files[a].trial, "window": wi,
                     "start_s": float(wi * scan.window_s), "start_utc": start_utc(a, wi),
                     "group": GROUP_ORDER[g].value, "count": int(c), "mean": float(sm / c)})
    order = {g.value: i for i, g in enumerate(GROUP_ORDER)}
    rows.sort(key=lambda r: (r["repetition"], r["trial"], r["window"], order[r["group"]]))
    return rows, pair_rows
