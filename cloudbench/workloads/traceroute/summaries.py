"""The traceroute workload's per-repetition summaries: hops, diamonds, width, min RTT per pair."""

from __future__ import annotations

from cloudbench.analysis.paths import diamonds
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow, pair_group, summary_row
from cloudbench.workloads.traceroute.data import graphs

# Which way is better, per summary metric (``cloudbench compare``): only the RTT has one.
PATH_BETTER = {"path_rtt_min_us": "lower"}


def path_summaries(run: RunDir, workload: str) -> list[SummaryRow]:
    """Per repetition and pair: hops, diamonds, widest diamond, min RTT to the destination."""
    rows: list[SummaryRow] = []
    for (rep, src, dst), g in graphs(run, workload).items():
        ds = diamonds(g)
        rtt = g.rtt_min_us.get(g.dst)
        values = [("path_hops", float(g.hop_count()), "1"), ("path_diamonds", float(len(ds)), "1"),
                  ("path_max_width", float(max((d.width for d in ds), default=1)), "1")]
        if rtt is not None:
            values.append(("path_rtt_min_us", rtt, "us"))
        for metric, value, unit in values:
            rows.append(summary_row(run, rep, workload, metric, pair_group(src, dst), value, unit,
                                    len(g.edges)))
    return rows
