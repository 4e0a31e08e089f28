"""Which host pairs a pairwise workload measures (throughput, token-bucket drain).

A selector is ``all`` (every pair), a latency group of the pair (``cross_zone``,
``cross_region``, … as in :class:`~cloudbench.core.topology.PairGroup`), or an
explicit list of ``[sender, receiver]``. Each selected pair becomes one trial;
the planner shuffles the trials.
"""

from __future__ import annotations

from typing import Literal

from cloudbench.core.topology import PairGroup, Topology, classify_pair

PairGroupName = Literal["all", "same_subnet", "cross_subnet", "cross_zone", "cross_region",
                        "cross_provider"]
PairSelector = PairGroupName | list[tuple[str, str]]


def select_pairs(topology: Topology, hosts: list[str], selector: PairSelector,
                 unordered: bool = False) -> list[tuple[str, str]]:
    """Pairs (sender, receiver) among ``hosts``, in topology order.

    ``unordered`` keeps one of (a, b) and (b, a): when each trial measures both
    directions, listing both orders would measure every pair twice.
    """
    if not isinstance(selector, str):
        out: list[tuple[str, str]] = []
        for x, y in selector:
            if (x, y) not in out and not (unordered and (y, x) in out):
                out.append((x, y))
        return out
    chosen = [topology.host(h) for h in hosts]
    pairs: list[tuple[str, str]] = []
    for i, a in enumerate(chosen):
        for j, b in enumerate(chosen):
            if i == j or (unordered and j < i):
                continue
            if selector == "all" or classify_pair(a, b) == PairGroup(selector):
                pairs.append((a.name, b.name))
    return pairs


