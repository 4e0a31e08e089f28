"""Provider-neutral topology: hosts labelled with provider, region, zone, subnet, vm_type.

Every provider (netns testbed, Pulumi clouds, static hosts) receives a
:class:`Topology` and returns a :class:`~cloudbench.core.cluster.Cluster`; the
analysis only ever sees the labels defined here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class PairGroup(StrEnum):
    """Latency groups of StormCloud (Table 1), from nearest to farthest."""

    SELF = "self"
    SAME_SUBNET = "same_subnet"
    CROSS_SUBNET = "cross_subnet"
    CROSS_ZONE = "cross_zone"
    CROSS_REGION = "cross_region"
    CROSS_PROVIDER = "cross_provider"


GROUP_ORDER: tuple[PairGroup, ...] = tuple(PairGroup)


@dataclass(frozen=True)
class HostSpec:
    """One host as the spec asks for it; no address yet."""

    name: str
    provider: str
    region: str
    zone: str
    subnet: str
    vm_type: str
    index: int = 0  # position in the topology, stable for a given spec
    # netns testbed: the physical machine whose NIC this host shares (None: a NIC of its own);
    # configured ground truth, not a label the analysis groups by
    physical_host: str | None = None

    def labels(self) -> dict[str, str]:
        return {
            "provider": self.provider,
            "region": self.region,
            "zone": self.zone,
            "subnet": self.subnet,
            "vm_type": self.vm_type,
        }


def classify_pair(a: HostSpec, b: HostSpec) -> PairGroup:
    """Latency group of the path from ``a`` to ``b``."""
    if a.name == b.name:
        return PairGroup.SELF
    if a.provider != b.provider:
        return PairGroup.CROSS_PROVIDER
    if a.region != b.region:
        return PairGroup.CROSS_REGION
    if a.zone != b.zone:
        return PairGroup.CROSS_ZONE
    if a.subnet != b.subnet:
        return PairGroup.CROSS_SUBNET
    return PairGroup.SAME_SUBNET


@dataclass(frozen=True)
class PortRange:
    """Ports a workload listens on (the clouds open them only between the campaign's hosts)."""

    name: str
    first: int
    last: int
    protocols: tuple[str, ...] = ("tcp", "udp")

    def text(self) -> str:
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"


@dataclass(frozen=True)
class SubnetSpec:
    """A subnet of the topology: its provider, region, zone and optional CIDR."""
    name: str
    provider: str
    region: str
    zone: str
    cidr: str | None = None


@dataclass
class Topology:
    """The hosts of one provider's part of a campaign, in spec order."""

    hosts: list[HostSpec]
    subnets: list[SubnetSpec] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    region_coords: dict[str, tuple[float, float]] = field(default_factory=dict)
    # provider-specific sections as plain data, read by the provider that uses them:
    wan: dict[str, Any] | None = None  # the spec's `wan:` (emulated links, netns testbed)
    # the spec's own vm_types (shaping profiles, cloudbench.spec.vmtypes) as plain dicts
    vm_types: dict[str, dict[str, Any]] = field(default_factory=dict)
    # ports the spec's workloads listen on (WorkloadModel.listen_ports), for cloud firewalls
    ports: list[PortRange] = field(default_factory=list)
    # the spec's `physical_hosts:` (netns testbed): name -> {"nic": bit/s}
    physical_hosts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __iter__(self) -> Iterator[HostSpec]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def host(self, name: str) -> HostSpec:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    @property
    def providers(self) -> list[str]:
        return _unique(h.provider for h in self.hosts)

    @property
    def regions(self) -> list[str]:
        return _unique(h.region for h in self.hosts)

    def zones(self, region: str | None = None) -> list[str]:
        return _unique(h.zone for h in self.hosts if region is None or h.region == region)

    def subnets_in(self, zone: str) -> list[str]:
        return _unique(h.subnet for h in self.hosts if h.zone == zone)

    def for_provider(self, provider: str) -> Topology:
        return Topology(
            hosts=[h for h in self.hosts if h.provider == provider],
            subnets=[s for s in self.subnets if s.provider == provider],
            groups=self.groups,
            region_coords=self.region_coords,
            wan=self.wan,
            vm_types=self.vm_types,
            ports=self.ports,
            physical_hosts=self.physical_hosts,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": [asdict(h) for h in self.hosts],
            "subnets": [asdict(s) for s in self.subnets],
            "groups": self.groups,
            "region_coords": {k: list(v) for k, v in self.region_coords.items()},
            "wan": self.wan,
            "vm_types": self.vm_types,
            "ports": [{**asdict(p), "protocols": list(p.protocols)} for p in self.ports],
            "physical_hosts": self.physical_hosts,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Topology:
        return cls(
            hosts=[HostSpec(**h) for h in d["hosts"]],
            subnets=[SubnetSpec(**s) for s in d.get("subnets", [])],
            groups={k: list(v) for k, v in d.get("groups", {}).items()},
            region_coords={k: (float(v[0]), float(v[1])) for k, v in d.get("region_coords", {}).items()},
            wan=d.get("wan"),
            vm_types={k: dict(v) for k, v in d.get("vm_types", {}).items()},
            ports=[PortRange(str(p["name"]), int(p["first"]), int(p["last"]), tuple(p["protocols"]))
                   for p in d.get("ports", [])],
            physical_hosts={k: dict(v) for k, v in d.get("physical_hosts", {}).items()},
        )


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for i in items:
        seen.setdefault(i, None)
    return list(seen)
