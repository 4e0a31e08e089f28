"""The campaign spec: YAML into typed, validated models.

Every error names the file, the line and the field (``SpecError``). Structural
checks are pydantic's; checks across the document (host names, zones, groups,
quorums) are :func:`_check_references`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    WithJsonSchema,
)

from cloudbench.errors import SpecError, SpecErrors
from cloudbench.topology import HostSpec, SubnetSpec, Topology
from cloudbench.units import parse_duration, parse_size
from cloudbench.yamlloc import Loc, LocatedYaml, load_yaml

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


class SubnetModel(_Model):
    """A subnet and its hosts: a count (named ``<subnet>-1`` …) or explicit names."""

    hosts: int | list[Name] = Field(description="number of hosts, or their names")
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
    rate: float = Field(100.0, gt=0, description="rounds per second")
    payload: Size = Field(1024, ge=16, le=MAX_PAYLOAD, description="bytes per message (<= 64 KiB)")
    duration: Duration = Field(20.0, gt=0, description="measured time per trial")
    warmup: Duration = Field(1.0, ge=0, description="extra time before, kept but flagged")
    timeout: Duration = Field(1.0, gt=0, description="a reply later than this is a timeout")
    self_loop: bool = True
    window: Duration = Field(30.0, gt=0, description="window of the windowed means")
    port: int = Field(7100, ge=1024, le=65535)
    quorums: list[QuorumModel] = Field(default_factory=list)


Workload = Annotated[EchoWorkload, Field(discriminator="kind")]


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
    providers: dict[Literal["netns"], ProviderModel] = Field(min_length=1)
    groups: dict[Name, list[str]] = Field(default_factory=dict)
    workloads: list[Workload] = Field(min_length=1)

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
        return Topology(hosts=hosts, subnets=subnets, groups=dict(self.groups), region_coords=coords)

    def resolve_hosts(self, selector: str | list[str]) -> list[str]:
        """Host names for a workload's ``hosts``: `all`, a group, or a list."""
        names = [h.name for h in self.topology().hosts]
        if isinstance(selector, list):
            return list(selector)
        if selector == "all":
            return names
        return list(self.groups[selector])

    def workload(self, name: str) -> EchoWorkload:
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
    if errors:
        raise SpecErrors(errors)
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
    clean = tuple(x for x in loc if not (isinstance(x, str) and ("[" in x or x in _UNION_TAGS)))
    return SpecError(doc.path, doc.line_of(loc), _fmt(clean), msg)


_UNION_TAGS = {"int", "list[str]", "list[constrained-str]", "str", "echo"}


def _fmt(loc: Loc) -> str:
    from cloudbench.yamlloc import format_loc

    return format_loc(loc)


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
    (RegionModel, "zones"): ZoneModel,
    (ZoneModel, "subnets"): SubnetModel,
    (EchoWorkload, "quorums"): QuorumModel,
}
# kind -> model, for hints; every workload model of the `Workload` union is listed here.
_WORKLOAD_MODELS: dict[str, type[BaseModel]] = {"echo": EchoWorkload}


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
                    if isinstance(subnet.hosts, int) and subnet.hosts < 1:
                        errors.append(doc.error(sloc, "a subnet needs at least one host"))
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
    for gname, members in spec.groups.items():
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
            for ki, k in enumerate(q.k):
                if k > len(members):
                    errors.append(doc.error((*qloc, "k", ki), f"k={k} but the quorum has only "
                                            f"{len(members)} hosts"))
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
