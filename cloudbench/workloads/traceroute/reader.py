"""Parse scamper's ``tracelb`` (MDA) JSON output into traces of nodes and links.

scamper ``-O json`` writes one JSON object per line: ``cycle-start``, one
``tracelb`` object per destination, ``cycle-stop``. A ``tracelb`` object has
``src``, ``dst``, ``method``, ``confidence``, ``probec`` and ``nodes[]``. A node
has ``addr`` (``"*"`` if unknown), ``q_ttl``, ``linkc`` and ``links``, in one of
two shapes (scamper's ``scamper_tracelb_json.c``):

* ``linkc > 1`` (the node balances load): ``links = [[link, link, …]]``, one
  ``{"addr": next, "probes": […]}`` per next node, each one hop away;
* ``linkc == 1``: ``links = [[hop], [hop], …, [last]]``, the hops between the
  node and the next known node: ``[{"addr": "*"}]`` for a hop that never
  answered, then ``[{"addr": next, "probes": […]}]`` (or ``"*"`` when the
  trace ended in silence).

Probes carry ``ttl`` and ``replies[]`` with ``rtt`` in milliseconds. Checked
against scamper 20211212 (Debian 12); ``tests/data/scamper_*.json`` are real
outputs. Anonymous hops get a label ``*<from>#<i>`` unique within the trace, so
a trace is a graph whose nodes are strings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ANON = "*"


@dataclass(frozen=True)
class Edge:
    """From one node to the next, with the probes that crossed it."""

    src: str
    dst: str
    ttl: int  # probe TTL that reached ``dst`` (``dst``'s hop number)
    probes: int
    replies: int
    rtt_min_ms: float | None


@dataclass
class Trace:
    """One MDA trace from ``src`` to ``dst``."""

    src: str
    dst: str
    method: str
    confidence: int
    start_s: float  # Unix time of the first probe (scamper's wall clock)
    probes: int
    edges: list[Edge] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        seen: dict[str, None] = {}
        for e in self.edges:
            seen.setdefault(e.src, None)
            seen.setdefault(e.dst, None)
        return list(seen)

    @property
    def reached(self) -> bool:
        return any(e.dst == self.dst for e in self.edges)

    @property
    def dst_rtt_min_ms(self) -> float | None:
        rtts = [e.rtt_min_ms for e in self.edges if e.dst == self.dst and e.rtt_min_ms is not None]
        return min(rtts) if rtts else None


def is_anonymous(node: str) -> bool:
    """Whether a path node is a hop that did not answer (its name starts with ``ANON``)."""
    return node.startswith(ANON)


def parse_tracelb(obj: dict[str, Any]) -> Trace:
    """One ``tracelb`` JSON object as a :class:`Trace`."""
    start = obj.get("start", {})
    tr = Trace(
        src=str(obj["src"]), dst=str(obj["dst"]), method=str(obj.get("method", "")),
        confidence=int(obj.get("confidence", 0)),
        start_s=float(start.get("sec", 0)) + float(start.get("usec", 0)) / 1e6,
        probes=int(obj.get("probec", 0)),
    )
    nodes = obj.get("nodes", [])
    names = [str(n["addr"]) if n["addr"] != ANON else f"{ANON}n{i}" for i, n in enumerate(nodes)]
    targets: set[str] = set()
    for i, n in enumerate(nodes):
        links = n.get("links", [])
        if int(n.get("linkc", len(links))) > 1:
            for link in links[0] if links else []:
                tr.edges.append(_edge(names[i], str(link["addr"]), link))
        else:
            prev = names[i]
            for j, hop in enumerate(links):
                known = [h for h in hop if h.get("addr", ANON) != ANON]
                last = j == len(links) - 1
                addr = str(known[0]["addr"]) if known and last else f"{ANON}{names[i]}#{j}"
                tr.edges.append(_edge(prev, addr, known[0] if known else {}))
                prev = addr
        targets.update(e.dst for e in tr.edges)
    first_ttl = int(obj.get("firsthop", 1))
    for name in names:
        if name not in targets:
            # a first-hop node: scamper links nothing to it, and its probes are
            # counted on the links out of it, so this edge carries none
            tr.edges.insert(0, Edge(tr.src, name, first_ttl, 0, 0, None))
    return tr


def _edge(src: str, dst: str, hop: dict[str, Any]) -> Edge:
    probes = hop.get("probes", [])
    ttl = max((int(p.get("ttl", 0)) for p in probes), default=0)
    rtts = [float(r["rtt"]) for p in probes for r in p.get("replies", []) if "rtt" in r]
    return Edge(src, dst, ttl, len(probes), len(rtts), min(rtts) if rtts else None)


def parse_output(lines: Iterable[str]) -> list[Trace]:
    """Every ``tracelb`` object of a scamper JSON output (other records are skipped)."""
    out: list[Trace] = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        obj = json.loads(line)
        if obj.get("type") == "tracelb":
            out.append(parse_tracelb(obj))
    return out
