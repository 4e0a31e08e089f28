"""The plan of a netns testbed: names, addresses and ``ip`` batches, computed before anything
is created. The provider makes it (:func:`cloudbench.providers.netns.provider.plan_testbed`),
the WAN emulation adds its part to it (:func:`cloudbench.providers.netns.wan.plan_wan`);
both import the types from here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from cloudbench.spec.wan import WanLink


@dataclass
class WanLinkPlan:
    """Namespaces and addresses of one emulated link."""

    link: WanLink
    ns: str  # the delay router W
    branch_ns: list[list[str]]  # [branch][hop]
    a_side: str  # W's address toward region a (what W answers traceroute with)
    forward_hops: list[list[str]] = field(default_factory=list)  # a→b: per branch, hop addresses
    reverse_hops: list[list[str]] = field(default_factory=list)  # b→a
    home: dict[str, str] = field(default_factory=dict)  # region -> its router's answering address

    def to_facts(self) -> dict[str, Any]:
        d = asdict(self.link)
        d.update({"ns": self.ns, "branch_ns": self.branch_ns, "w_addr": self.a_side,
                  "forward_hops": self.forward_hops, "reverse_hops": self.reverse_hops,
                  "home": self.home})
        return d


@dataclass
class WanPlan:
    """The emulated WAN of a testbed: its links, which forwarder runs them, the IP→AS table."""

    links: list[WanLinkPlan]
    forwarder: Literal["auto", "c", "python"]
    realtime: bool
    asn_rows: list[tuple[str, int, str]]


@dataclass
class TestbedPlan:
    """Names and addresses of one testbed, computed before anything is created."""

    __test__ = False  # not a pytest test class, whatever its name

    stack: str
    host_ns: dict[str, str] = field(default_factory=dict)
    host_addr: dict[str, str] = field(default_factory=dict)
    host_peer: dict[str, tuple[str, str]] = field(default_factory=dict)  # (zone router, veth peer)
    routers: list[str] = field(default_factory=list)
    root_batch: list[str] = field(default_factory=list)
    ns_batches: dict[str, list[str]] = field(default_factory=dict)
    wan: WanPlan | None = None  # when the spec has a `wan:` section
    # Per router, the key of its per-flow multipath hash (net.ipv4.fib_multipath_hash_seed),
    # drawn afresh for every testbed: with the kernel's default (0) every namespace of one boot
    # hashes a flow alike, so two testbeds would split the same probes the same way.
    hash_seeds: dict[str, int] = field(default_factory=dict)
