"""Controller side of each workload: expand, run, convert, summarise, report."""

from __future__ import annotations

from cloudbench.workloads.base import WorkloadKind


def workload_kind(kind: str) -> WorkloadKind:
    if kind == "echo":
        from cloudbench.workloads.echo import EchoKind

        return EchoKind()
    if kind == "traceroute":
        from cloudbench.workloads.traceroute import TracerouteKind

        return TracerouteKind()
    if kind in ("throughput", "tbdrain"):
        from cloudbench.workloads.throughput import TbDrainKind, ThroughputKind

        return ThroughputKind() if kind == "throughput" else TbDrainKind()
    raise KeyError(f"no workload kind {kind!r}")


__all__ = ["WorkloadKind", "workload_kind"]
