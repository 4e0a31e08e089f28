"""The ``providers:`` section: regions, zones, subnets and hosts of the testbed, the clouds and static hosts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    ValidationError,
)
from pydantic_core import InitErrorDetails

from cloudbench.spec.fields import BitRate, Duration, Model, Name

MAX_SUBNET_HOSTS = 240  # a /24 less the gateway and reserved addresses
DESTROY_TIMEOUT_S = 1800.0  # default destroy_timeout: clouds may take many minutes to settle


def _hosts_shape(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int | list):
        raise ValueError(f"`hosts` is a number of hosts or a list of host names, not {v!r}")
    if isinstance(v, int) and not 1 <= v <= MAX_SUBNET_HOSTS:
        raise ValueError(f"a subnet holds 1 to {MAX_SUBNET_HOSTS} hosts, not {v}")
    if isinstance(v, list) and len(v) > MAX_SUBNET_HOSTS:
        raise ValueError(f"a subnet holds at most {MAX_SUBNET_HOSTS} hosts, not {len(v)}")
    return v


class HostEntryModel(Model):
    """One host of a subnet's ``hosts`` list written as a mapping, to place it on a physical host."""

    name: Name
    physical_host: Name | None = Field(
        None, description="netns testbed: the `physical_hosts` entry whose NIC this host's egress "
        "shares (default: the subnet's)")


# A host list item is a name or a mapping; told apart by shape, so an error names one of them.
HostItem = Annotated[
    Annotated[Name, Tag("host name")] | Annotated[HostEntryModel, Tag("host mapping")],
    Discriminator(lambda v: "host name" if isinstance(v, str) else "host mapping"),
]


class SubnetModel(Model):
    """A subnet and its hosts: a count (named ``<subnet>-1`` …) or explicit names."""

    hosts: Annotated[
        Annotated[int, Tag("host count")] | Annotated[list[HostItem], Tag("host list")],
        Discriminator(lambda v: "host count" if isinstance(v, int) else "host list"),
        BeforeValidator(_hosts_shape),
    ] = Field(
        description=f"number of hosts (1 to {MAX_SUBNET_HOSTS}), or their names (a name, or "
        "{name: db1, physical_host: ph1})")
    vm_type: str = Field("local", description="VM type (a cloud instance type, or a local profile)")
    cidr: str | None = Field(None, description="subnet CIDR (clouds; the testbed assigns its own)")
    physical_host: Name | None = Field(
        None, description="netns testbed: every host of the subnet shares the NIC of this "
        "`physical_hosts` entry (colocation); default: each host has its own NIC")

    def host_names(self, subnet: str) -> list[str]:
        return [name for name, _ in self.host_entries(subnet)]

    def host_entries(self, subnet: str) -> list[tuple[str, str | None]]:
        """(name, physical host) of each host, in order; a host's own entry overrides the subnet's."""
        if isinstance(self.hosts, int):
            return [(f"{subnet}-{i + 1}", self.physical_host) for i in range(self.hosts)]
        return [(h, self.physical_host) if isinstance(h, str) else
                (h.name, h.physical_host or self.physical_host) for h in self.hosts]


class PhysicalHostModel(Model):
    """A physical machine of the netns testbed: the hosts placed on it share its NIC's egress."""

    nic: BitRate = Field(gt=0, description="egress capacity of the NIC every host placed here "
                         "shares (e.g. 2gbit), on top of each host's own vm_type shaping")


class ZoneModel(Model):
    """A zone of a provider in a spec: its subnets."""
    subnets: dict[Name, SubnetModel] = Field(min_length=1)


class RegionModel(Model):
    """A region of a provider in a spec: its zones and, optionally, its location."""
    zones: dict[str, ZoneModel] = Field(min_length=1)
    location: tuple[float, float] | None = Field(
        None, description="latitude, longitude in degrees (for propagation bounds)"
    )


class ProviderModel(Model):
    """A provider in a spec: its regions."""
    regions: dict[str, RegionModel] = Field(min_length=1)


class CloudProviderModel(ProviderModel):
    """A cloud (aws, gcp, azure): fresh VMs made by Pulumi, checked against data/catalog.json."""

    controller_cidr: str | None = Field(
        None, description="the only source allowed to SSH in (your public address, /32); "
        "default $CLOUDBENCH_CONTROLLER_CIDR"
    )
    owner: str | None = Field(None, description="tag on every resource; default: your login name")
    expiry: Duration = Field(
        6 * 3600.0, gt=0, description="lease of each stack; `cloudbench gc` destroys stacks past it"
    )
    destroy_timeout: Duration = Field(
        DESTROY_TIMEOUT_S, gt=0, description="how long an interrupted `pulumi up` is given to save its state, "
        "and a destroy waits for the stack's lock (clouds take minutes to finish what they started)"
    )
    placement_group: bool = Field(
        False, description="pack each zone's hosts together (AWS cluster placement group, "
        "GCP compact placement policy, Azure proximity placement group)"
    )
    image: str | None = Field(
        None, description="instead of the latest Ubuntu 24.04 LTS: an AMI id, a GCE image, "
        "or publisher:offer:sku:version on Azure"
    )
    project: str | None = Field(None, description="GCP project (default: as gcloud finds it: "
                                "$CLOUDSDK_CORE_PROJECT, $GOOGLE_CLOUD_PROJECT, the active gcloud configuration, "
                                "the application default credentials)")
    host_keys: Literal["injected", "generated"] = Field(
        "injected", description="injected: cloudbench makes each VM's ed25519 host key, so it is pinned "
        "before the first connection, but its private half passes through the cloud's user data "
        "and the (encrypted) stack state; generated: the VM makes its own and publishes the public "
        "half (console output; GCP: serial port 1), which cloudbench reads before connecting")


class StaticHostModel(Model):
    """An existing host: how to reach it, its pinned host key, and its labels."""

    name: Name
    address: str = Field(description="experiment address: workers listen and measure here")
    ssh_host: str | None = Field(None, description="where SSH connects (default: address)")
    port: int = Field(22, ge=1, le=65535, description="SSH port")
    user: str | None = Field(None, description="SSH user (default: the provider's `user`)")
    host_key: str | None = Field(
        None, description="the host's public key, pinned (`ssh-keyscan -t ed25519 HOST`)"
    )
    region: Name = "site"
    zone: Name = "site-a"
    subnet: Name = "lan"
    vm_type: str = "static"
    python: str = "python3"
    workdir: str | None = Field(None, description="base directory (default: ~/.cloudbench)")
    netns: str | None = Field(
        None, description="open the SSH connection inside this local network namespace "
        "(hosts that are namespaces on the controller)"
    )


class StaticProviderModel(Model):
    """Bring your own hosts: nothing is created; destroy removes only the work directory."""

    hosts: list[StaticHostModel] = Field(min_length=1)
    user: str | None = Field(None, description="SSH user of every host without its own `user`")
    key: str = Field(description="path of the SSH private key (unencrypted, mode 0600)")

    @property
    def regions(self) -> dict[str, RegionModel]:
        """The hosts grouped by their labels, so the topology treats them like any provider."""
        tree: dict[str, dict[str, dict[str, list[StaticHostModel]]]] = {}
        seen: set[str] = set()
        for h in self.hosts:
            if h.name not in seen:  # duplicates are reported by the static checks, with lines
                seen.add(h.name)
                tree.setdefault(h.region, {}).setdefault(h.zone, {}).setdefault(h.subnet, []).append(h)
        return {
            r: RegionModel(location=None, zones={
                z: ZoneModel(subnets={
                    s: SubnetModel(hosts=[h.name for h in hs], vm_type=hs[0].vm_type, cidr=None,
                                    physical_host=None)
                    for s, hs in subnets.items()
                })
                for z, subnets in zones.items()
            })
            for r, zones in tree.items()
        }


ProviderName = Literal["netns", "aws", "gcp", "azure", "static"]
AnyProvider = ProviderModel | CloudProviderModel | StaticProviderModel


# Which model validates `providers.<name>`: the name is the dict key, not a field, so
# pydantic cannot discriminate by itself (see dispatch_providers).
PROVIDER_MODELS: dict[str, type[BaseModel]] = {
    "netns": ProviderModel,
    "aws": CloudProviderModel,
    "gcp": CloudProviderModel,
    "azure": CloudProviderModel,
    "static": StaticProviderModel,
}


def dispatch_providers(value: Any) -> Any:
    """Validate each provider entry with its own model; errors keep ``providers.<name>`` locs."""
    if not isinstance(value, dict):
        return value
    out: dict[Any, Any] = {}
    details: list[InitErrorDetails] = []
    for key, raw in value.items():
        model = PROVIDER_MODELS.get(key) if isinstance(key, str) else None
        if model is None or isinstance(raw, BaseModel):
            out[key] = raw  # unknown names fail the Literal key check with the known list
            continue
        try:
            out[key] = model.model_validate(raw)
        except ValidationError as e:
            for d in e.errors():
                det = InitErrorDetails(type=d["type"], loc=(key, *d["loc"]), input=d["input"])
                if "ctx" in d:
                    det["ctx"] = d["ctx"]
                details.append(det)
    if details:
        raise ValidationError.from_exception_data("providers", details)
    return out
