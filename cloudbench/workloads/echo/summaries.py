"""The echo workload's per-repetition summaries (what ``cloudbench confirm`` reads)."""

from __future__ import annotations

import math
from typing import Any

from cloudbench.analysis.quantiles import P50, P99
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow, quorum_group, summary_row
from cloudbench.workloads.echo.aggregates import EchoAggregates
from cloudbench.workloads.echo.params import Quorum

# Which way is better, per summary metric (``cloudbench compare``): every RTT and the timeout share lower.
ECHO_BETTER = {"rtt_*": "lower", "quorum_*": "lower", "timeout_frac": "lower"}


def spec_quorums(manifest: Manifest, params: dict[str, Any]) -> list[Quorum]:
    """The quorums of one echo workload (``params``: its spec entry), members resolved."""
    groups = manifest.spec.get("groups", {})
    out: list[Quorum] = []
    for q in params.get("quorums", []):
        members = q.get("hosts") or groups.get(q.get("group"), [])
        out.append((q.get("group") or ",".join(members), list(members), list(q["k"])))
    return out


def echo_summaries(run: RunDir, agg: EchoAggregates, workload: str) -> list[SummaryRow]:
    """Per repetition: p50, p99, mean and timeout share per latency group; quorum p50 and p99.
    A percentile a repetition's RTTs cannot estimate (NaN, analysis.latency.TAIL_K: p99 of
    fewer than 100) is left out, not summarised as the largest value."""
    rows: list[SummaryRow] = []
    for rep in agg.repetitions:
        for g in agg.groups_by_rep.get(rep, []):
            for metric, key in (("rtt_p50_us", P50), ("rtt_p99_us", P99), ("rtt_mean_us", "mean")):
                if math.isfinite(g[key]):
                    rows.append(summary_row(run, rep, workload, metric, g["group"], g[key], "us",
                                            g["count"]))
            rows.append(summary_row(run, rep, workload, "timeout_frac", g["group"],
                                    g["timeouts"] / max(g["count"], 1), "1", g["count"]))
        for q in agg.quorums_by_rep.get(rep, []):
            k, n = q["quorum"][1:].split("/")
            for metric, key in ((f"quorum_q{k}of{n}_p50_us", P50), (f"quorum_q{k}of{n}_p99_us", P99)):
                if not math.isfinite(q[key]):
                    continue
                rows.append(summary_row(run, rep, workload, metric, quorum_group(q["group"]), q[key],
                                        "us", q["count"]))
    return rows
