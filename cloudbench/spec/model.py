"""The campaign spec as one typed model (:class:`Spec`).

The workloads are typed by their base (:class:`~cloudbench.spec.workload.WorkloadModel`)
here; the registry (:mod:`cloudbench.workloads`) binds the concrete kinds into a
subclass that pydantic validates against, so the spec layer imports no workload.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PrivateAttr

from cloudbench.core.topology import HostSpec, SubnetSpec, Topology
from cloudbench.spec.fields import Duration, Model, Name
from cloudbench.spec.providers import (
    AnyProvider,
    PhysicalHostModel,
    ProviderName,
    dispatch_providers,
)
from cloudbench.spec.schedule import ScheduleModel
from cloudbench.spec.vmtypes import VM_TYPE_RE, VmTypeModel
from cloudbench.spec.wan import WanModel
from cloudbench.spec.workload import HostSelector, WorkloadModel, resolve_selector


class Spec(Model):
    """A measurement campaign.

    This class is the type; specs are validated by :func:`cloudbench.load_spec` and
    :func:`cloudbench.parse_spec` against its subclass that knows every workload kind
    (``cloudbench.workloads.SPEC_MODEL``).
    """

    name: Name
    description: str = ""
    seed: int = Field(0, description="seeds the trial order; recorded in the manifest")
    repetitions: int = Field(1, ge=1)
    fresh_hosts: Literal["repetition", "campaign"] = Field(
        "repetition", description="new hosts for every repetition, or one set for the campaign"
    )
    order: Literal["random", "fixed"] = "random"
    rest: Duration = Field(0.0, ge=0, description="pause between trials")
    providers: Annotated[dict[ProviderName, AnyProvider], BeforeValidator(dispatch_providers)] = Field(
        min_length=1
    )
    budget: float | None = Field(
        None, gt=0, description="USD; the campaign refuses to start if its estimated cost is higher"
    )
    prices: str | dict[str, Any] | None = Field(
        None, description="price table: a JSON file (relative to the spec) or a mapping merged "
        "over the bundled data/prices.json"
    )
    _warnings: list[str] = PrivateAttr(default_factory=list)
    groups: dict[Name, list[str]] = Field(default_factory=dict)
    workloads: list[WorkloadModel] = Field(min_length=1)
    vm_types: dict[Annotated[str, Field(pattern=VM_TYPE_RE)], VmTypeModel] = Field(
        default_factory=dict, description="shaping profiles for the netns testbed, by name "
        "(cloudbench.spec.vmtypes; built-ins: local, local.1g, local.tb-small, …)")
    wan: WanModel | None = Field(None, description="emulated links between regions (netns testbed)")
    schedule: ScheduleModel | None = Field(
        None, description="when the runs of a scheduled campaign start (`cloudbench campaign`)")
    physical_hosts: dict[Name, PhysicalHostModel] = Field(
        default_factory=dict, description="netns testbed: physical machines whose NIC the hosts "
        "placed on them (`physical_host:` on a subnet or host) share, by name")

    def topology(self) -> Topology:
        hosts: list[HostSpec] = []
        subnets: list[SubnetSpec] = []
        coords: dict[str, tuple[float, float]] = {}
        for pname, prov in self.providers.items():
            for rname, region in prov.regions.items():
                if region.location is not None:
                    coords[rname] = region.location
                for zname, zone in region.zones.items():
                    for sname, subnet in zone.subnets.items():
                        subnets.append(SubnetSpec(sname, pname, rname, zname, subnet.cidr))
                        for h, phys in subnet.host_entries(sname):
                            hosts.append(HostSpec(h, pname, rname, zname, sname, subnet.vm_type,
                                                  len(hosts), physical_host=phys))
        return Topology(hosts=hosts, subnets=subnets, groups=dict(self.groups), region_coords=coords,
                        wan=None if self.wan is None else self.wan.model_dump(mode="json"),
                        vm_types={k: v.model_dump(mode="json") for k, v in self.vm_types.items()},
                        ports=[p for w in self.workloads for p in w.listen_ports()],
                        physical_hosts={k: v.model_dump(mode="json")
                                        for k, v in self.physical_hosts.items()})

    @property
    def warnings(self) -> list[str]:
        """Suspicious but valid input (a VM type the catalogue does not know), for the CLI."""
        return self._warnings

    def resolve_hosts(self, selector: HostSelector) -> list[str]:
        """Host names for a workload's ``hosts``: `all`, a group, or a list."""
        return resolve_selector(selector, [h.name for h in self.topology().hosts], self.groups)

    def workload(self, name: str) -> WorkloadModel:
        for w in self.workloads:
            if w.name == name:
                return w
        raise KeyError(name)


