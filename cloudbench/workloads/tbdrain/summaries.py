"""Per-repetition summaries of the token-bucket drain workload: one set per pair."""

from __future__ import annotations

from typing import Any

from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow, SummaryRows, pair_group
from cloudbench.workloads.tbdrain.report import drain_results, drain_rows
from cloudbench.workloads.throughput.data import RunFacts, load_transfers

# Which way is better, per summary metric (``cloudbench compare``): a larger budget, faster rates.
DRAIN_BETTER = {"high_rate_mbps": "higher", "low_rate_mbps": "higher", "time_to_empty_s": "higher",
                "budget_mbit": "higher", "refill_rate_mbps": "higher"}


def drain_summaries(run: RunDir, manifest: Manifest, w: dict[str, Any]) -> list[SummaryRow]:
    """Per drain: drained, high and low rate, time to empty, budget, refill rate."""
    rows = SummaryRows(run, w["name"])
    series = load_transfers(run, w["name"])
    for d in drain_rows(drain_results(series, w), RunFacts(manifest)):
        g = pair_group(d["src"], d["dst"])
        rep = d["repetition"]
        rows.add(rep, "drained", g, float(d["drained"]), "1", 1)
        for metric, key, unit in (("high_rate_mbps", "high_mbps", "Mbit/s"),
                                  ("low_rate_mbps", "low_mbps", "Mbit/s"),
                                  ("time_to_empty_s", "time_to_empty_s", "s"),
                                  ("budget_mbit", "budget_mbit", "Mbit"),
                                  ("refill_rate_mbps", "refill_mbps", "Mbit/s")):
            rows.add(rep, metric, g, d[key], unit, 1)
    return list(rows)
