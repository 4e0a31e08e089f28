"""Connection modes of echo workloads: handshake times, and hot, warm and cold side by side.

A workload's mode is its ``connection`` (``persistent`` or ``per_round``) and how
often each peer hears from a host (every ``1/rate``, or every ``idle``). The
blog's "hot" connection is ``persistent`` at a short interval, "warm" is
``persistent`` with ``idle: 10s``, "cold" is ``per_round``. When a spec runs
several echo workloads in different modes, the first one's report section
carries a table of them all, latency group by latency group.
"""

from __future__ import annotations

from typing import Any

from cloudbench.analysis.quantiles import P50, P90, P99, P99_9
from cloudbench.core.topology import GROUP_ORDER
from cloudbench.core.units import fmt_duration
from cloudbench.store.manifest import Manifest
from cloudbench.workloads.echo.aggregates import EchoAggregates

TABLES = ("connect", "connection_modes")
COLUMNS = (P50, P90, P99, P99_9, "max")


def mode_label(params: dict[str, Any]) -> str:
    """``persistent, every 10ms`` / ``persistent, idle 10s`` / ``per_round, every 200ms``."""
    connection = params.get("connection", "persistent")
    if params.get("idle"):
        return f"{connection}, idle {fmt_duration(float(params['idle']))}"
    rate = params.get("rate", 100.0)
    if isinstance(rate, list):
        return f"{connection}, rate {'/'.join(f'{r:g}' for r in rate)}/s"
    return f"{connection}, every {fmt_duration(1.0 / float(rate))}"


def echo_workloads(manifest: Manifest) -> list[dict[str, Any]]:
    """The spec's echo workloads, in spec order."""
    return [w for w in manifest.spec.get("workloads", []) if w.get("kind") == "echo"]


def compares(manifest: Manifest, params: dict[str, Any]) -> bool:
    """Whether this workload's section carries the side-by-side table: it is the first echo
    workload of a spec whose echo workloads run in more than one mode."""
    echoes = echo_workloads(manifest)
    return (
        len({mode_label(w) for w in echoes}) > 1
        and bool(echoes)
        and echoes[0].get("name", "echo") == params.get("name", "echo")
    )


def mode_rows(name: str, params: dict[str, Any], agg: EchoAggregates) -> list[dict[str, Any]]:
    """One workload's rows of the side-by-side table: per latency group, RTT percentiles (µs),
    timeouts and the handshake's p50 and p99 (per-round connections only)."""
    label = mode_label(params)
    handshakes = {r["group"]: r for r in agg.connect}
    out = []
    for g in agg.groups:
        row: dict[str, Any] = {
            "group": g["group"],
            "workload": name,
            "mode": label,
            "count": g["count"],
            "timeouts": g["timeouts"],
            **{c: g[c] for c in COLUMNS},
        }
        h = handshakes.get(g["group"])
        row["connect_p50"] = h[P50] if h else None
        row["connect_p99"] = h[P99] if h else None
        out.append(row)
    return out


def sort_modes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Group by group (in GROUP_ORDER), then the workloads in spec order."""
    order = {g.value: i for i, g in enumerate(GROUP_ORDER)}
    return sorted(rows, key=lambda r: order.get(r["group"], len(order)))
