"""Swept echo parameters (``payload: [64, 1024, 16384, 65536]``, ``rate: [...]``): strata and the latency curve.

The plan gives a swept workload one trial per value (in the seeded random
order); each trial's values are in the manifest (``TrialRecord.sweep``). Here
the run's rows are split by those values:

* summaries: each latency group's summary rows get the value in their group
  name (``same_zone@payload=1024``, :func:`~cloudbench.store.summaries.sweep_group`),
  so ``cloudbench confirm`` pools repetitions per value and gives each its CI;
* the report: per latency group and value, the median over repetitions of each
  repetition's p50 and p99 with the exact order-statistic CI that confirm
  computes (Le Boudec Thm. 2.1; none below 6 repetitions at 95 %); the report's
  figure of latency against the swept value (StormCloud, Fig. 11) is drawn from
  that table (:func:`cloudbench.report.figures.echo.sweep_plots`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from cloudbench.analysis.quantiles import P50, P99
from cloudbench.analysis.stats import quantile_ci
from cloudbench.core.topology import GROUP_ORDER
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow, sweep_group
from cloudbench.workloads.base import sweep_label
from cloudbench.workloads.echo.aggregates import EchoAggregates, aggregate_echo
from cloudbench.workloads.echo.params import window_of
from cloudbench.workloads.echo.summaries import echo_summaries, spec_quorums

TABLES = ("sweep",)
LEVEL = 0.95


def strata(manifest: Manifest, workload: str) -> list[tuple[dict[str, Any], set[str]]]:
    """The workload's trials split by swept values, in increasing order of them; ``[]`` when
    nothing was swept."""
    trials = [t for t in manifest.trials if t.workload == workload]
    sweeps = [dict(t.sweep or {}) for t in trials]
    if not any(sweeps):
        return []
    labels = sorted({sweep_label(s) for s in sweeps}, key=lambda lb: _sort_key(sweeps, lb))
    out = []
    for lb in labels:
        ids = {t.id for t, s in zip(trials, sweeps, strict=True) if sweep_label(s) == lb}
        values = next(s for s in sweeps if sweep_label(s) == lb)
        out.append((values, ids))
    return out


def _sort_key(sweeps: list[dict[str, Any]], label: str) -> tuple[float, ...]:
    values = next(s for s in sweeps if sweep_label(s) == label)
    return tuple(float(v) for _, v in sorted(values.items()))


def _aggregate(run: RunDir, manifest: Manifest, params: dict[str, Any], trials: set[str] | None) -> EchoAggregates:
    return aggregate_echo(run, manifest, params["name"], window_of(params),
                          spec_quorums(manifest, params), trials=trials)


def stratified(run: RunDir, manifest: Manifest, params: dict[str, Any]) -> list[SummaryRow]:
    """The workload's summaries, or, when a parameter was swept, the summaries of each value's
    trials with the value in the group names."""
    parts = strata(manifest, params["name"])
    if not parts:
        return echo_summaries(run, _aggregate(run, manifest, params, None), params["name"])
    rows: list[SummaryRow] = []
    for values, ids in parts:
        label = sweep_label(values)
        rows += [dataclasses.replace(r, group=sweep_group(r.group, label))
                 for r in echo_summaries(run, _aggregate(run, manifest, params, ids), params["name"])]
    return rows


Stratum = tuple[dict[str, Any], EchoAggregates]
"""One swept value's parameters and the aggregates of its trials alone."""

DISTRIBUTIONS = ("groups", "quorums", "pairs", "boxes", "tails")
"""The section's keys that hold a distribution of RTTs: per swept value when a parameter was
swept, never one distribution pooled over values (64 B and 64 KiB are different latencies)."""


def stratum_aggregates(run: RunDir, manifest: Manifest, params: dict[str, Any]) -> list[Stratum]:
    """The aggregates of each swept value's trials, in increasing order of the values; ``[]``
    when nothing was swept."""
    return [(values, _aggregate(run, manifest, params, ids))
            for values, ids in strata(manifest, params["name"])]


def by_value(parts: list[Stratum]) -> dict[str, list[dict[str, Any]]]:
    """The :data:`DISTRIBUTIONS` of each swept value, each row with its ``sweep`` label
    (``payload=1024``) after the row's own labels."""
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in DISTRIBUTIONS}
    for values, agg in parts:
        label = sweep_label(values)
        for key in DISTRIBUTIONS:
            for r in getattr(agg, key):
                head = {k: r[k] for k in ("quorum", "src", "dst", "group") if k in r}
                out[key].append({**head, "sweep": label, **r})
    return out


def sweep_table(run: RunDir, manifest: Manifest, params: dict[str, Any],
                parts: list[Stratum] | None = None) -> list[dict[str, Any]]:
    """Per latency group and swept value: rows, p50 and p99 of all rows, and the median over
    repetitions of each repetition's p50 and p99 with its CI (µs). ``parts``: the strata's
    aggregates when the caller has them (:func:`stratum_aggregates`)."""
    out: list[dict[str, Any]] = []
    for values, agg in (stratum_aggregates(run, manifest, params) if parts is None else parts):
        reps = [r for r in agg.repetitions if agg.groups_by_rep.get(r)]
        per_rep = {rep: {g["group"]: g for g in agg.groups_by_rep[rep]} for rep in reps}
        for g in agg.groups:
            row: dict[str, Any] = {
                "group": g["group"],
                **values,
                "sweep": sweep_label(values),
                "count": g["count"],
                "timeouts": g["timeouts"],
                P50: g[P50],
                P99: g[P99],
                "repetitions": len(reps),
            }
            for key in (P50, P99):
                xs = [per_rep[r][g["group"]][key] for r in reps if g["group"] in per_rep[r]]
                ci = quantile_ci(np.array([x for x in xs if np.isfinite(x)]), 0.5, LEVEL)
                row[f"rep_{key}_median"] = ci.estimate
                row[f"rep_{key}_lower"] = ci.lower
                row[f"rep_{key}_upper"] = ci.upper
            out.append(row)
    order = {g.value: i for i, g in enumerate(GROUP_ORDER)}
    out.sort(key=lambda r: order.get(r["group"], len(order)))
    return out


def swept_fields(rows: list[dict[str, Any]]) -> list[str]:
    """The parameters a sweep table varies (``payload``, ``rate``)."""
    return [f for f in ("payload", "rate") if rows and f in rows[0]]
