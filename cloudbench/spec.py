"""The campaign spec: YAML into typed, validated models.

Every error names the file, the line and the field (``SpecError``). Structural
checks are pydantic's; checks across the document (host names, zones, groups,
quorums) are :func:`_check_references`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    ValidationError,
    WithJsonSchema,
)
from pydantic_core import InitErrorDetails

from cloudbench.errors import SpecError, SpecErrors
from cloudbench.pairs import PairSelector, check_pair_list
from cloudbench.topology import HostSpec, SubnetSpec, Topology
from cloudbench.units import parse_duration, parse_size
from cloudbench.vmtypes import VM_TYPE_RE, BitRate, VmTypeModel, check_vm_types
from cloudbench.wan import WanModel, check_wan
from cloudbench.yamlloc import Loc, LocatedYaml, format_loc, load_yaml

MAX_PAYLOAD = 64 * 1024
NAME_RE = r"^[A-Za-z][A-Za-z0-9_-]{0,31}$"
_NAME = re.compile(NAME_RE)

Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(lambda v: v, return_type=float),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(us|µs|ms|s|m|min|h)?\s*$"},
            ],
            "description": "seconds, or a number with a unit: 500ms, 20s, 10m, 1h",
        }
    ),
]
Size = Annotated[
    int,
    BeforeValidator(parse_size),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}],
            "description": "bytes, or a number with a unit: 64KiB, 1MiB",
        }
    ),
]
Name = Annotated[str, Field(pattern=NAME_RE)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


MAX_SUBNET_HOSTS = 240  # a /24 less the gateway and reserved addresses


def _hosts_shape(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int | list):
        raise ValueError(f"`hosts` is a number of hosts or a list of host names, not {v!r}")
    if isinstance(v, int) and not 1 <= v <= MAX_SUBNET_HOSTS:
        raise ValueError(f"a subnet holds 1 to {MAX_SUBNET_HOSTS} hosts, not {v}")
    if isinstance(v, list) and len(v) > MAX_SUBNET_HOSTS:
        raise ValueError(f"a subnet holds at most {MAX_SUBNET_HOSTS} hosts, not {len(v)}")
    return v


class SubnetModel(_Model):
    """A subnet and its hosts: a count (named ``<subnet>-1`` …) or explicit names."""

    hosts: Annotated[int | list[Name], BeforeValidator(_hosts_shape)] = Field(
        description=f"number of hosts (1 to {MAX_SUBNET_HOSTS}), or their names")
    vm_type: str = Field("local", description="VM type (a cloud instance type, or a local profile)")
    cidr: str | None = Field(None, description="subnet CIDR (clouds; the testbed assigns its own)")

    def host_names(self, subnet: str) -> list[str]:
        if isinstance(self.hosts, int):
            return [f"{subnet}-{i + 1}" for i in range(self.hosts)]
        return list(self.hosts)


class ZoneModel(_Model):
    subnets: dict[Name, SubnetModel] = Field(min_length=1)


class RegionModel(_Model):
    zones: dict[str, ZoneModel] = Field(min_length=1)
    location: tuple[float, float] | None = Field(
        None, description="latitude, longitude in degrees (for propagation bounds)"
    )


class ProviderModel(_Model):
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
    placement_group: bool = Field(
        False, description="pack each zone's hosts together (AWS cluster placement group, "
        "GCP compact placement policy, Azure proximity placement group)"
    )
    image: str | None = Field(
        None, description="instead of the latest Ubuntu 24.04 LTS: an AMI id, a GCE image, "
        "or publisher:offer:sku:version on Azure"
    )
    project: str | None = Field(None, description="GCP project (default: gcp:project config)")


class StaticHostModel(_Model):
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


class StaticProviderModel(_Model):
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
                    s: SubnetModel(hosts=[h.name for h in hs], vm_type=hs[0].vm_type, cidr=None)
                    for s, hs in subnets.items()
                })
                for z, subnets in zones.items()
            })
            for r, zones in tree.items()
        }


ProviderName = Literal["netns", "aws", "gcp", "azure", "static"]
AnyProvider = ProviderModel | CloudProviderModel | StaticProviderModel
# Which model validates `providers.<name>`: the name is the dict key, not a field, so
# pydantic cannot discriminate by itself (see Spec._dispatch_providers).
PROVIDER_MODELS: dict[str, type[BaseModel]] = {
    "netns": ProviderModel,
    "aws": CloudProviderModel,
    "gcp": CloudProviderModel,
    "azure": CloudProviderModel,
    "static": StaticProviderModel,
}


def _dispatch_providers(value: Any) -> Any:
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


class QuorumModel(_Model):
    """Quorum latency: the k-th fastest reply among a group's hosts, per round."""

    group: str | None = Field(None, description="a name from `groups`")
    hosts: list[str] | None = Field(None, description="host names, instead of a group")
    k: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, description="k of the Qk/n to report")


class EchoWorkload(_Model):
    """All-pairs TCP echo RTT (StormCloud's design, done better)."""

    kind: Literal["echo"]
    name: Name = "echo"
    hosts: str | list[str] = Field("all", description="`all`, a group name or host names")
    # Bounds are the worker's: it refuses anything outside them.
    rate: float = Field(100.0, gt=0, le=1e6, allow_inf_nan=False, description="rounds per second")
    payload: Size = Field(1024, ge=16, le=MAX_PAYLOAD, description="bytes per message (<= 64 KiB)")
    duration: Duration = Field(20.0, gt=0, le=1e7, allow_inf_nan=False, description="measured time per trial")
    warmup: Duration = Field(1.0, ge=0, le=3600, allow_inf_nan=False,
                             description="extra time before, kept but flagged")
    timeout: Duration = Field(1.0, gt=0, le=3600, allow_inf_nan=False,
                              description="a reply later than this is a timeout")
    self_loop: bool = True
    rx_timestamp: Literal["kernel", "user"] = Field(
        "kernel", description="an echo's receive time: `kernel` (when its bytes arrived, "
        "SO_TIMESTAMPNS, as ping does) or `user` (when the worker read it)")
    window: Duration = Field(30.0, gt=0, description="window of the windowed means")
    port: int = Field(7100, ge=1024, le=65535)
    quorums: list[QuorumModel] = Field(default_factory=list)


class TracerouteWorkload(_Model):
    """MDA traceroute (scamper tracelb) from every source to every destination."""

    kind: Literal["traceroute"]
    name: Name = "traceroute"
    sources: str | list[str] = Field("all", description="`all`, a group name or host names")
    destinations: str | list[str] = Field("all", description="`all`, a group name or host names")
    method: Literal["udp-dport", "udp-sport", "icmp-echo", "tcp-sport"] = "udp-dport"
    confidence: Literal[95, 99] = Field(95, description="MDA confidence that no branch was missed")
    gap_limit: int = Field(3, ge=1, le=16, description="unresponsive hops in a row before a branch stops")
    attempts: int = Field(2, ge=1, le=5, description="probes per attempt before a hop is a `*`")
    wait_probe: Duration = Field(0.25, ge=0.01, description="pause between probes of one trace")
    wait_timeout: Duration = Field(5.0, gt=0, description="how long to wait for a reply")
    pps: int = Field(100, ge=1, le=10000, description="probes per second of each source")
    limit: Duration = Field(300.0, gt=0, description="a source's traces are stopped after this")
    asn_table: str | None = Field(None, description="CSV prefix,asn,name (default: the testbed's)")


class OnOffModel(_Model):
    """An on/off access pattern: send for `send`, pause for `pause` (Uta et al.: 10-30, 5-30)."""

    send: Duration = Field(gt=0, description="sending time of each burst")
    pause: Duration = Field(ge=0, description="pause after each burst")


class ThroughputWorkload(_Model):
    """Bulk throughput between host pairs (nuttcp or iperf3); one trial per pair."""

    kind: Literal["throughput"]
    name: Name = "throughput"
    tool: Literal["nuttcp", "iperf3"] = "nuttcp"
    protocol: Literal["tcp", "udp"] = "tcp"
    hosts: str | list[str] = Field("all", description="`all`, a group name or host names")
    pairs: PairSelector = Field("all", description="`all`, a pair group (cross_zone, "
                                "cross_region, …) or a list of [sender, receiver]")
    direction: Literal["forward", "reverse", "both"] = Field(
        "forward", description="forward: first host sends; reverse: second host sends; both: one "
        "after the other")
    duration: Duration = Field(10.0, gt=0, description="measured time per direction (with an on/off "
                               "pattern: bursts and pauses together)")
    interval: Duration = Field(1.0, ge=0.1, description="report interval")
    udp_rate: BitRate = Field(500e6, gt=0, description="UDP: target rate (e.g. 500mbit)")
    length: Size | None = Field(None, ge=16, le=16 * 2**20, description="write/buffer size "
                                "(tool default when unset)")
    streams: int = Field(1, ge=1, le=64, description="parallel streams")
    socket_buffer: Size | None = Field(
        None, ge=4096, le=256 * 2**20, description="socket buffer (nuttcp/iperf3 -w); unset: "
        "kernel autotuning for TCP, 4 MiB for UDP so that a shaper drops what exceeds its rate "
        "instead of blocking the sender")
    pattern: Literal["full"] | OnOffModel = Field(
        "full", description="`full` speed, or {send: 10s, pause: 30s}")
    port: int = Field(5000, ge=1024, le=65000, description="server port (nuttcp: control port; "
                      "data from port+1)")


class TbDrainWorkload(_Model):
    """Token-bucket drain (Uta et al.): send flat out until the rate drops and stays down."""

    kind: Literal["tbdrain"]
    name: Name = "tbdrain"
    tool: Literal["nuttcp", "iperf3"] = "nuttcp"
    hosts: str | list[str] = Field("all", description="`all`, a group name or host names")
    pairs: PairSelector = Field("all", description="`all`, a pair group or [sender, receiver] list")
    direction: Literal["forward", "reverse", "both"] = "forward"
    max_duration: Duration = Field(600.0, gt=0, description="give up a drain after this long")
    interval: Duration = Field(1.0, ge=0.1, description="report interval")
    window: Duration = Field(10.0, gt=0, description="drained when min(first window) × factor > "
                             "max(last window)")
    factor: float = Field(0.75, gt=0, lt=1)
    rest: Duration | None = Field(None, ge=0, description="rest after the drain, then drain again "
                                  "to measure the refill (none: one drain)")
    streams: int = Field(1, ge=1, le=64)
    length: Size | None = Field(None, ge=16, le=16 * 2**20)
    port: int = Field(5000, ge=1024, le=65000)


AnyWorkload = EchoWorkload | TracerouteWorkload | ThroughputWorkload | TbDrainWorkload
Workload = Annotated[AnyWorkload, Field(discriminator="kind")]


class Spec(_Model):
    """A measurement campaign."""

    name: Name
    description: str = ""
    seed: int = Field(0, description="seeds the trial order; recorded in the manifest")
    repetitions: int = Field(1, ge=1)
    fresh_hosts: Literal["repetition", "campaign"] = Field(
        "repetition", description="new hosts for every repetition, or one set for the campaign"
    )
    order: Literal["random", "fixed"] = "random"
    rest: Duration = Field(0.0, ge=0, description="pause between trials")
    providers: Annotated[dict[ProviderName, AnyProvider], BeforeValidator(_dispatch_providers)] = Field(
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
    workloads: list[Workload] = Field(min_length=1)
    vm_types: dict[Annotated[str, Field(pattern=VM_TYPE_RE)], VmTypeModel] = Field(
        default_factory=dict, description="shaping profiles for the netns testbed, by name "
        "(cloudbench.vmtypes; built-ins: local, local.1g, local.tb-small, …)")
    wan: WanModel | None = Field(None, description="emulated links between regions (netns testbed)")

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
                        for h in subnet.host_names(sname):
                            hosts.append(
                                HostSpec(h, pname, rname, zname, sname, subnet.vm_type, len(hosts))
                            )
        return Topology(hosts=hosts, subnets=subnets, groups=dict(self.groups), region_coords=coords,
                        wan=self.wan,
                        vm_types={k: v.model_dump(mode="json") for k, v in self.vm_types.items()})

    @property
    def warnings(self) -> list[str]:
        """Suspicious but valid input (a VM type the catalogue does not know), for the CLI."""
        return self._warnings

    def resolve_hosts(self, selector: str | list[str]) -> list[str]:
        """Host names for a workload's ``hosts``: `all`, a group, or a list."""
        names = [h.name for h in self.topology().hosts]
        if isinstance(selector, list):
            return list(selector)
        if selector == "all":
            return names
        return list(self.groups[selector])

    def workload(self, name: str) -> AnyWorkload:
        for w in self.workloads:
            if w.name == name:
                return w
        raise KeyError(name)


def json_schema() -> dict[str, Any]:
    schema = Spec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cloudbench campaign spec"
    return schema


def load_spec(path: str | Path) -> Spec:
    """Read and validate a spec file; raises SpecError(s) naming file, line and field."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError as e:
        raise SpecError(str(p), None, "", "no such file") from e
    except OSError as e:
        raise SpecError(str(p), None, "", f"cannot read: {e.strerror}") from e
    return parse_spec(text, str(p))


def parse_spec(text: str, path: str = "<spec>") -> Spec:
    doc = load_yaml(text, path)
    if not isinstance(doc.data, dict):
        raise SpecError(path, 1, "", "a spec is a mapping (name:, providers:, workloads:, …)")
    try:
        spec = Spec.model_validate(doc.data)
    except ValidationError as e:
        raise SpecErrors([_from_pydantic(doc, err) for err in e.errors()]) from None
    errors = _check_references(spec, doc)
    from cloudbench.spec_clouds import check_providers

    provider_errors, warnings = check_providers(spec, doc)
    errors += provider_errors
    if errors:
        raise SpecErrors(errors)
    spec._warnings = warnings
    return spec


def _from_pydantic(doc: LocatedYaml, err: Any) -> SpecError:
    loc: Loc = tuple(err["loc"])
    typ = err["type"]
    msg = err["msg"]
    if typ == "extra_forbidden":
        parent = loc[:-1]
        msg = f"unknown key {loc[-1]!r}" + _known_keys_hint(parent, doc)
    elif typ == "missing":
        msg = f"required key {loc[-1]!r} is missing"
    elif typ == "value_error":
        msg = msg.removeprefix("Value error, ")
    elif "input" in err and typ not in ("union_tag_invalid",):
        shown = json.dumps(err["input"], default=str)
        if len(shown) < 60:
            msg = f"{msg} (got {shown})"
    # A literal/union tag mismatch reports the tag in loc; keep the real field only.
    tags = _UNION_TAGS | set(_WORKLOAD_MODELS)
    clean = tuple(x for x in loc if not (isinstance(x, str) and ("[" in x or x in tags)))
    return SpecError(doc.path, doc.line_of(loc), format_loc(clean), msg)


# pydantic puts the member it tried into an error's loc; these are not spec fields.
_UNION_TAGS = {"int", "list[str]", "list[constrained-str]", "str"}


def _known_keys_hint(parent: Loc, doc: LocatedYaml) -> str:
    model = _model_at(parent, doc)
    if model is None:
        return ""
    return "; known keys: " + ", ".join(sorted(model.model_fields))


def _model_at(loc: Loc, doc: LocatedYaml) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` (for hints)."""
    model: type[BaseModel] = Spec
    data: Any = doc.data
    i = 0
    while i < len(loc):
        key = loc[i]
        if model is Spec and key == "workloads" and i + 1 < len(loc):
            item = _get(data, ("workloads", loc[i + 1]))
            kind = item.get("kind") if isinstance(item, dict) else None
            found = _WORKLOAD_MODELS.get(str(kind))
            if found is None:
                return None
            model, data, i = found, item, i + 2
            continue
        if model is Spec and key == "providers" and i + 1 < len(loc):
            provider = PROVIDER_MODELS.get(str(loc[i + 1]))
            if provider is None:
                return None
            model, data, i = provider, _get(data, ("providers", loc[i + 1])), i + 2
            continue
        nested = _NESTED.get((model, str(key)))
        if nested is None:
            return None
        model, data, i = nested, _get(data, (key, loc[i + 1] if i + 1 < len(loc) else "")), i + 2
    return model


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        try:
            data = data[p]
        except (KeyError, IndexError, TypeError):
            return None
    return data


_NESTED: dict[tuple[type[BaseModel], str], type[BaseModel]] = {
    (Spec, "providers"): ProviderModel,
    (ProviderModel, "regions"): RegionModel,
    (CloudProviderModel, "regions"): RegionModel,
    (StaticProviderModel, "hosts"): StaticHostModel,
    (RegionModel, "zones"): ZoneModel,
    (ZoneModel, "subnets"): SubnetModel,
    (EchoWorkload, "quorums"): QuorumModel,
    (Spec, "vm_types"): VmTypeModel,
}
# kind -> model (for hints and to tell union tags from fields), from the `Workload` union itself.
_WORKLOAD_MODELS: dict[str, type[BaseModel]] = {
    get_args(m.model_fields["kind"].annotation)[0]: m for m in get_args(AnyWorkload)
}


def _check_references(spec: Spec, doc: LocatedYaml) -> list[SpecError]:
    errors: list[SpecError] = []
    seen_hosts: dict[str, Loc] = {}
    region_names = [r for p in spec.providers.values() for r in p.regions]
    zone_owner: dict[str, Loc] = {}
    for pname, prov in spec.providers.items():
        for rname, region in prov.regions.items():
            for zname, zone in region.zones.items():
                zloc: Loc = ("providers", pname, "regions", rname, "zones", zname)
                if zname in zone_owner:
                    errors.append(
                        doc.error(zloc, f"zone {zname!r} is declared twice (also at "
                                  f"line {doc.line_of(zone_owner[zname])})")
                    )
                zone_owner[zname] = zloc
                owner = _region_by_prefix(zname, region_names)
                if owner is not None and owner != rname:
                    errors.append(
                        doc.error(zloc, f"zone {zname!r} is under region {rname!r} but its name "
                                  f"belongs to region {owner!r}; move it there")
                    )
                for sname, subnet in zone.subnets.items():
                    sloc: Loc = (*zloc, "subnets", sname, "hosts")
                    for i, h in enumerate(subnet.host_names(sname)):
                        hloc = (*sloc, i) if isinstance(subnet.hosts, list) else sloc
                        if not _NAME.match(h):
                            errors.append(doc.error(hloc, f"host name {h!r} is not a valid name"))
                        if h in seen_hosts:
                            errors.append(
                                doc.error(hloc, f"duplicate host name {h!r} (first at line "
                                          f"{doc.line_of(seen_hosts[h])})")
                            )
                        else:
                            seen_hosts[h] = hloc
    if len(spec.providers) > 1:
        errors.append(doc.error(("providers",), "a campaign uses one provider for now ("
                                f"{', '.join(spec.providers)}); split the spec per provider"))
    for gname, members in spec.groups.items():
        if gname == "all":
            errors.append(doc.error(("groups", gname), "`all` is reserved (it means every host); "
                                    "give the group another name"))
        for i, m in enumerate(members):
            if m not in seen_hosts:
                errors.append(doc.error(("groups", gname, i), f"group {gname!r} names unknown host {m!r}"))
    names: dict[str, int] = {}
    for wi, w in enumerate(spec.workloads):
        wloc: Loc = ("workloads", wi)
        if w.name in names:
            errors.append(doc.error((*wloc, "name"), f"workload name {w.name!r} is used twice; "
                                    "give each workload its own `name`"))
        names[w.name] = wi
        if isinstance(w, TracerouteWorkload):
            for key in ("sources", "destinations"):
                errors += _check_selector(getattr(w, key), (*wloc, key), spec, seen_hosts, doc)
            continue
        if isinstance(w, ThroughputWorkload | TbDrainWorkload):
            errors += _check_selector(w.hosts, (*wloc, "hosts"), spec, seen_hosts, doc)
            errors += check_pair_list(w.pairs, (*wloc, "pairs"), seen_hosts, doc)
            continue
        errors += _check_selector(w.hosts, (*wloc, "hosts"), spec, seen_hosts, doc)
        for qi, q in enumerate(w.quorums):
            qloc: Loc = (*wloc, "quorums", qi)
            if (q.group is None) == (q.hosts is None):
                errors.append(doc.error(qloc, "a quorum names either `group` or `hosts`"))
                continue
            if q.group is not None and q.group not in spec.groups:
                errors.append(doc.error((*qloc, "group"), f"quorum names unknown group {q.group!r}"
                                        + _choices(spec.groups)))
                continue
            members = q.hosts if q.hosts is not None else spec.groups[q.group or ""]
            for hi, h in enumerate(q.hosts or []):
                if h not in seen_hosts:
                    errors.append(doc.error((*qloc, "hosts", hi), f"quorum names unknown host {h!r}"))
            if len(set(members)) != len(members):
                dup = sorted({m for m in members if members.count(m) > 1})
                errors.append(doc.error(qloc, f"the quorum lists {', '.join(dup)} more than once"))
            if w.hosts != "all" and all(m in seen_hosts for m in members):
                outside = [m for m in members if m not in spec.resolve_hosts(w.hosts)]
                if outside:
                    errors.append(doc.error(qloc, f"quorum members {', '.join(outside)} are not among "
                                            f"the workload's hosts, so they are never measured"))
            # Without a self-loop a member hears only the others: k-of-(n-1) replies at most.
            replies = len(members) if w.self_loop else len(members) - 1
            for ki, k in enumerate(q.k):
                if k > replies:
                    why = "" if w.self_loop else " (self_loop is off, so a member hears only the others)"
                    errors.append(doc.error((*qloc, "k", ki), f"k={k} but each member gets at most "
                                            f"{replies} replies from the {len(members)} hosts{why}"))
    errors += check_wan(spec, doc)
    errors += check_vm_types(spec, doc)
    return errors


def _check_selector(
    sel: str | list[str], loc: Loc, spec: Spec, hosts: dict[str, Loc], doc: LocatedYaml
) -> list[SpecError]:
    if isinstance(sel, str):
        if sel != "all" and sel not in spec.groups:
            return [doc.error(loc, f"{sel!r} is neither `all` nor a group" + _choices(spec.groups))]
        return []
    return [doc.error((*loc, i), f"unknown host {h!r}") for i, h in enumerate(sel) if h not in hosts]


def _choices(groups: dict[str, Any]) -> str:
    return f" (groups: {', '.join(groups)})" if groups else " (the spec defines no `groups`)"


def _region_by_prefix(zone: str, regions: list[str]) -> str | None:
    """The region whose name the zone's name extends (us-east-1a → us-east-1), if any."""
    best = None
    for r in regions:
        if zone.startswith(r) and zone != r and (best is None or len(r) > len(best)):
            best = r
    return best
