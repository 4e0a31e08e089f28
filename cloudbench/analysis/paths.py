"""Path analysis of MDA traces: hops, diamonds, anonymous hops, changes, AS paths, inflation.

Pure functions over :class:`PathGraph` (the MDA graph of one trace: nodes are
addresses, or ``*…`` labels for hops that never answered).

* Hops: a node's hop is the TTL of the probes that reached it (scamper's
  ``ttl``); the hop count of a path is the destination's hop.
* Diamonds (Augustin et al., "Measured load balancing in the wild", IMC'06):
  a *divergence point* is a node with more than one successor; its
  *convergence point* the first hop at which every branch out of it meets one
  node again. Width = most nodes at one hop in between; length = hops from
  divergence to convergence (1 + the hops in between).
* Changes between repetitions: the sets of MDA links of one (src, dst) pair,
  compared repetition to repetition (Jaccard distance of the link sets).
* IP→AS: longest-prefix match in a user table (CSV ``prefix,asn,name``) with
  :mod:`ipaddress`; the AS path collapses consecutive repeats, skips anonymous
  and unmapped hops.
* Path inflation: minimum RTT over the propagation bound 2·d/v, with d the
  geodesic distance of the regions (:mod:`cloudbench.core.geo`); v = c gives
  Persico et al.'s lower bound, v = 2/3 c the bound of light in fibre.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cloudbench.core.geo import FIBRE_FRACTION, geodesic_m, propagation_s

ANON = "*"


def is_anonymous(node: str) -> bool:
    """Whether a path node is a hop that did not answer (its name starts with ``ANON``)."""
    return node.startswith(ANON)


@dataclass
class PathGraph:
    """The MDA graph of one trace."""

    src: str
    dst: str
    edges: set[tuple[str, str]] = field(default_factory=set)
    hop: dict[str, int] = field(default_factory=dict)  # node -> hop (TTL)
    rtt_min_us: dict[str, float] = field(default_factory=dict)  # node -> fastest reply

    @classmethod
    def from_rows(cls, src: str, dst: str, rows: Iterable[tuple[str, str, int, float | None]]) -> PathGraph:
        """From (from_node, to_node, ttl, rtt_min_us) rows of the links table."""
        g = cls(src, dst)
        g.hop[src] = 0
        for a, b, ttl, rtt in rows:
            g.edges.add((a, b))
            if ttl > 0:
                g.hop[b] = min(g.hop.get(b, ttl), ttl)
            if rtt is not None and rtt == rtt:
                g.rtt_min_us[b] = min(g.rtt_min_us.get(b, rtt), rtt)
        # hops that never answered carry no TTL: one more than their predecessor
        for _ in range(len(g.edges)):
            missing = [(a, b) for a, b in g.edges if b not in g.hop and a in g.hop]
            if not missing:
                break
            for a, b in missing:
                g.hop[b] = min(g.hop.get(b, g.hop[a] + 1), g.hop[a] + 1)
        return g

    def successors(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for a, b in sorted(self.edges):
            out[a].append(b)
        return out

    @property
    def nodes(self) -> set[str]:
        return {n for e in self.edges for n in e} | {self.src}

    @property
    def reached(self) -> bool:
        return self.dst in self.nodes and self.dst != self.src

    def hops(self) -> list[list[str]]:
        """Nodes per hop, hop 1 first (the source, hop 0, is left out)."""
        by: dict[int, list[str]] = defaultdict(list)
        for n, h in self.hop.items():
            if n != self.src:
                by[h].append(n)
        return [sorted(by[h]) for h in range(1, max(by, default=0) + 1)]

    def hop_count(self) -> int:
        """Hops to the destination (to the farthest node when it was not reached)."""
        if self.dst in self.hop:
            return self.hop[self.dst]
        return max((h for n, h in self.hop.items() if n != self.src), default=0)


@dataclass(frozen=True)
class Diamond:
    """Where a pair's paths diverge and meet again: the two nodes, the first hop, and its width and length."""
    divergence: str
    convergence: str | None  # None: the branches never met again (trace ended)
    start_hop: int
    width: int
    length: int


def diamonds(g: PathGraph) -> list[Diamond]:
    """Every diamond of the graph, by divergence point (see the module docstring)."""
    succ = g.successors()
    out: list[Diamond] = []
    for d in sorted(succ, key=lambda n: (g.hop.get(n, 0), n)):
        if len(succ[d]) < 2:
            continue
        frontier = set(succ[d])
        width, length = len(frontier), 1
        conv: str | None = None
        for _ in range(64):  # a path longer than 64 hops is not a path
            if len(frontier) == 1:
                conv = next(iter(frontier))
                break
            nxt = {s for n in frontier for s in succ.get(n, [])}
            # a branch that stops early (its next hop never answered) ends the diamond open
            if not nxt or any(n not in succ for n in frontier):
                break
            frontier = nxt
            width = max(width, len(frontier))
            length += 1
        out.append(Diamond(d, conv, g.hop.get(d, 0), width, length))
    return out


def anonymous_hops(g: PathGraph) -> int:
    """How many nodes of the path graph are hops that did not answer."""
    return sum(1 for n in g.nodes if is_anonymous(n))


def path_change(a: PathGraph, b: PathGraph) -> dict[str, Any]:
    """How the MDA graph of one pair changed from ``a`` to ``b`` (Jaccard over links)."""
    union = a.edges | b.edges
    inter = a.edges & b.edges
    return {
        "changed": a.edges != b.edges,
        "jaccard_distance": 0.0 if not union else 1.0 - len(inter) / len(union),
        "nodes_added": sorted(b.nodes - a.nodes),
        "nodes_removed": sorted(a.nodes - b.nodes),
        "hops_before": a.hop_count(),
        "hops_after": b.hop_count(),
    }


# -- IP to AS -------------------------------------------------------------------------


@dataclass
class PrefixTable:
    """IP prefixes to (ASN, name), looked up by longest-prefix match."""

    _by_len: dict[int, dict[int, tuple[int, str]]] = field(default_factory=dict)

    def add(self, prefix: str, asn: int, name: str = "") -> None:
        net = ipaddress.ip_network(prefix, strict=False)
        key = net.prefixlen + (0 if net.version == 4 else 1000)
        self._by_len.setdefault(key, {})[int(net.network_address)] = (int(asn), name)

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]]) -> PrefixTable:
        t = cls()
        for r in rows:
            t.add(str(r[0]), int(r[1]), str(r[2]) if len(r) > 2 else "")
        return t

    def lookup(self, addr: str) -> tuple[int, str] | None:
        """(ASN, name) of the longest prefix holding ``addr``; None if no prefix does."""
        try:
            ip = ipaddress.ip_address(addr)
        except ValueError:
            return None
        base = 0 if ip.version == 4 else 1000
        bits = 32 if ip.version == 4 else 128
        value = int(ip)
        for key in sorted((k for k in self._by_len if base <= k <= base + bits), reverse=True):
            plen = key - base
            masked = value & (((1 << plen) - 1) << (bits - plen)) if plen else 0
            hit = self._by_len[key].get(masked)
            if hit is not None:
                return hit
        return None


def as_path(g: PathGraph, table: PrefixTable) -> list[int]:
    """ASNs along the path, hop by hop, consecutive repeats collapsed.

    Anonymous and unmapped hops are skipped (Persico et al. count them apart);
    a hop whose nodes map to several ASes contributes them in ascending order.
    """
    path: list[int] = []
    for nodes in [[g.src], *g.hops()]:
        asns = sorted({hit[0] for n in nodes if not is_anonymous(n)
                       for hit in [table.lookup(n)] if hit is not None})
        for a in asns:
            if not path or path[-1] != a:
                path.append(a)
    return path


def graph_drawing(g: PathGraph, table: PrefixTable | None = None) -> dict[str, Any]:
    """What a figure of the MDA graph needs, as JSON values: ``hops`` (nodes per hop, the
    source as hop 0), ``edges`` ([from, to], sorted), ``rtt_min_us`` (node -> fastest
    reply) and ``asn`` (node -> its AS from ``table``, mapped nodes only)."""
    asn: dict[str, int] = {}
    if table is not None:
        for n in g.nodes:
            hit = None if is_anonymous(n) else table.lookup(n)
            if hit is not None:
                asn[n] = hit[0]
    return {"hops": [[g.src], *g.hops()], "edges": [list(e) for e in sorted(g.edges)],
            "rtt_min_us": dict(sorted(g.rtt_min_us.items())), "asn": dict(sorted(asn.items()))}


# -- propagation bound ------------------------------------------------------------------


def inflation(min_rtt_us: float, a: tuple[float, float], b: tuple[float, float]) -> dict[str, float]:
    """Minimum RTT against the propagation bound between two locations (lat, lon)."""
    d = geodesic_m(a, b)
    bound_c = 2 * propagation_s(d, 1.0) * 1e6
    bound_f = 2 * propagation_s(d, FIBRE_FRACTION) * 1e6
    return {
        "distance_km": d / 1000.0,
        "bound_c_us": bound_c,
        "bound_fibre_us": bound_f,
        "min_rtt_us": min_rtt_us,
        "inflation_c": min_rtt_us / bound_c if bound_c > 0 else float("nan"),
        "inflation_fibre": min_rtt_us / bound_f if bound_f > 0 else float("nan"),
    }
