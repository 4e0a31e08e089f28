"""Per-repetition summaries of the throughput workload: per pair, and per latency group."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow, SummaryRows, pair_group
from cloudbench.workloads.throughput.data import MBIT, RunFacts, interval_rates, load_transfers
from cloudbench.workloads.throughput.report import trial_rows

# Which way is better, per summary metric (``cloudbench compare``).
THROUGHPUT_BETTER = {"throughput_cov": "lower", "throughput_*": "higher", "capacity_lb_mbps": "higher",
                     "shift_share": "lower", "loss_pct": "lower"}


def throughput_summaries(run: RunDir, manifest: Manifest, w: dict[str, Any]) -> list[SummaryRow]:
    """Mean per pair and direction; per latency group: mean, p50, p5, CoV, shifts, UDP loss, capacity."""
    rows = SummaryRows(run, w["name"])
    series = load_transfers(run, w["name"])
    trows = trial_rows(series, RunFacts(manifest), w)
    groups: dict[tuple[int, str], list[int]] = defaultdict(list)
    for i, r in enumerate(trows):
        suffix = "" if r["direction"] == "forward" else ":reverse"
        groups[(r["repetition"], r["group"] + suffix)].append(i)
        rows.add(r["repetition"], "throughput_mbps", pair_group(r["src"], r["dst"]), r["mean_mbps"],
                 "Mbit/s", r["intervals"])
    for (rep, g), idx in sorted(groups.items()):
        sel = [trows[i] for i in idx]
        pooled = np.concatenate([interval_rates(series[i]) for i in idx]) / MBIT
        n = len(pooled)
        rows.add(rep, "throughput_mbps", g, float(np.mean([r["mean_mbps"] for r in sel])), "Mbit/s", n)
        if n:
            rows.add(rep, "throughput_p50_mbps", g, float(np.median(pooled)), "Mbit/s", n)
            rows.add(rep, "throughput_p5_mbps", g, float(np.percentile(pooled, 5)), "Mbit/s", n)
        rows.add(rep, "throughput_cov", g, _nanmean([r["cov"] for r in sel]), "1", n)
        rows.add(rep, "shift_share", g, float(np.mean([math.isfinite(r["shift_s"]) for r in sel])), "1",
                 len(sel))
        if any(series[i].protocol == "udp" for i in idx):
            rows.add(rep, "loss_pct", g, _nanmean([r["loss_pct"] for r in sel]), "%", n)
            caps = [r["capacity_lb_mbps"] for r in sel if math.isfinite(r["capacity_lb_mbps"])]
            rows.add(rep, "capacity_lb_mbps", g, max(caps) if caps else math.nan, "Mbit/s", len(sel))
    return list(rows)


def _nanmean(values: list[float]) -> float:
    ok = [v for v in values if math.isfinite(v)]
    return float(np.mean(ok)) if ok else math.nan
