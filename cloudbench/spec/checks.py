"""Checks across the document, run after pydantic has validated every section.

Host names, zones, groups, the providers' entries (:mod:`.clouds`), the testbed's
``vm_types`` and ``wan``, and each workload's own :meth:`~.workload.WorkloadModel.check`.
Every error names the file, the line and the field.
"""

from __future__ import annotations

from cloudbench.errors import SpecError
from cloudbench.spec.clouds import check_providers
from cloudbench.spec.fields import NAME
from cloudbench.spec.located import Loc, LocatedYaml
from cloudbench.spec.model import Spec
from cloudbench.spec.vmtypes import BUILTIN_VM_TYPES, known_vm_types
from cloudbench.spec.workload import CheckContext


def check_spec(spec: Spec, doc: LocatedYaml) -> tuple[list[SpecError], list[str]]:
    """Every error of a validated spec, and its warnings (valid but suspicious input)."""
    errors, hosts = check_hosts(spec, doc)
    errors += check_groups(spec, doc, hosts)
    errors += check_workloads(spec, CheckContext(doc, hosts, spec.groups))
    errors += check_wan(spec, doc)
    errors += check_vm_types(spec, doc)
    phys_errors, phys_warnings = check_physical_hosts(spec, doc)
    provider_errors, warnings = check_providers(spec, doc)
    return errors + phys_errors + provider_errors, warnings + phys_warnings


def check_hosts(spec: Spec, doc: LocatedYaml) -> tuple[list[SpecError], dict[str, Loc]]:
    """Zones declared once and under their region, host names valid and unique, one provider."""
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
                        if not NAME.match(h):
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
    return errors, seen_hosts


def check_groups(spec: Spec, doc: LocatedYaml, hosts: dict[str, Loc]) -> list[SpecError]:
    """Groups name known hosts; `all` is reserved."""
    errors: list[SpecError] = []
    for gname, members in spec.groups.items():
        if gname == "all":
            errors.append(doc.error(("groups", gname), "`all` is reserved (it means every host); "
                                    "give the group another name"))
        for i, m in enumerate(members):
            if m not in hosts:
                errors.append(doc.error(("groups", gname, i), f"group {gname!r} names unknown host {m!r}"))
    return errors


def check_workloads(spec: Spec, ctx: CheckContext) -> list[SpecError]:
    """Unique workload names, then each workload's own checks."""
    errors: list[SpecError] = []
    names: set[str] = set()
    for wi, w in enumerate(spec.workloads):
        wloc: Loc = ("workloads", wi)
        if w.name in names:
            errors.append(ctx.error((*wloc, "name"), f"workload name {w.name!r} is used twice; "
                                    "give each workload its own `name`"))
        names.add(w.name)
        errors += w.check(ctx, wloc)
    return errors


def _region_by_prefix(zone: str, regions: list[str]) -> str | None:
    """The region whose name the zone's name extends (us-east-1a → us-east-1), if any."""
    best = None
    for r in regions:
        if zone.startswith(r) and zone != r and (best is None or len(r) > len(best)):
            best = r
    return best


def check_vm_types(spec: Spec, doc: LocatedYaml) -> list[SpecError]:
    """Spec errors: a user type shadowing a built-in; a netns host of an unknown type."""
    errors: list[SpecError] = []
    for name in getattr(spec, "vm_types", {}):
        if name in BUILTIN_VM_TYPES:
            errors.append(doc.error(("vm_types", name), f"{name!r} is a built-in vm_type; give "
                                    "yours another name"))
    netns = spec.providers.get("netns")
    if netns is None:
        return errors
    known = known_vm_types(getattr(spec, "vm_types", {}))
    for rname, region in netns.regions.items():
        for zname, zone in region.zones.items():
            for sname, subnet in zone.subnets.items():
                if subnet.vm_type in known:
                    continue
                loc = ("providers", "netns", "regions", rname, "zones", zname, "subnets", sname,
                       "vm_type")
                errors.append(doc.error(loc, f"unknown vm_type {subnet.vm_type!r} on the netns "
                                        f"testbed; known: {', '.join(known)} (or define it under "
                                        "`vm_types:`)"))
    return errors


def check_wan(spec: Spec, doc: LocatedYaml) -> list[SpecError]:
    """Checks of ``wan:`` against the rest of the spec (regions, locations)."""
    wan = spec.wan
    if wan is None:
        return []
    errors: list[SpecError] = []
    if "netns" not in spec.providers:
        errors.append(doc.error(("wan",), "`wan:` emulates links on the netns testbed; real clouds "
                                "bring their own WAN (remove the section or use provider netns)"))
    regions: dict[str, tuple[float, float] | None] = {
        r: m.location for p in spec.providers.values() for r, m in p.regions.items()}
    seen: dict[frozenset[str], int] = {}
    for i, lm in enumerate(wan.links):
        loc = ("wan", "links", i, "between")
        a, b = lm.between
        for j, r in enumerate((a, b)):
            if r not in regions:
                errors.append(doc.error((*loc, j), f"unknown region {r!r} (regions: "
                                        f"{', '.join(regions)})"))
        if a == b:
            errors.append(doc.error(loc, "a WAN link joins two different regions"))
        key = frozenset((a, b))
        if key in seen:
            errors.append(doc.error(loc, f"the link {a} ↔ {b} is configured twice (also "
                                    f"wan.links[{seen[key]}])"))
        seen[key] = i
    names = list(regions)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            found = next((x for x in wan.links if frozenset(x.between) == frozenset((a, b))), None)
            if (found is None or found.delay is None) and (regions[a] is None or regions[b] is None):
                errors.append(doc.error(("wan",), f"no delay for the link {a} ↔ {b}: add "
                                        f"`location: [lat, lon]` to both regions or a link with "
                                        f"`between: [{a}, {b}]` and a `delay`"))
    return errors


def check_physical_hosts(spec: Spec, doc: LocatedYaml) -> tuple[list[SpecError], list[str]]:
    """``physical_host:`` names a declared ``physical_hosts`` entry, on the netns testbed only,
    and the hosts of one physical host sit in one zone (a machine is in one place)."""
    errors: list[SpecError] = []
    declared = getattr(spec, "physical_hosts", {}) or {}
    known = ", ".join(declared) or "none"
    zone_of: dict[str, tuple[str, Loc]] = {}
    for pname, prov in spec.providers.items():
        for rname, region in prov.regions.items():
            for zname, zone in region.zones.items():
                for sname, subnet in zone.subnets.items():
                    sloc: Loc = ("providers", pname, "regions", rname, "zones", zname, "subnets",
                                 sname)
                    places: list[tuple[str, Loc]] = []
                    if subnet.physical_host is not None:
                        places.append((subnet.physical_host, (*sloc, "physical_host")))
                    if isinstance(subnet.hosts, list):
                        places += [(h.physical_host, (*sloc, "hosts", i, "physical_host"))
                                   for i, h in enumerate(subnet.hosts)
                                   if not isinstance(h, str) and h.physical_host is not None]
                    for phys, loc in places:
                        if pname != "netns":
                            errors.append(doc.error(loc, "`physical_host` places hosts on the "
                                                    f"netns testbed; {pname} chooses where VMs "
                                                    "run (see `placement_group`)"))
                        elif phys not in declared:
                            errors.append(doc.error(loc, f"unknown physical host {phys!r} "
                                                    f"(declared under `physical_hosts:`: {known})"))
                        elif phys in zone_of and zone_of[phys][0] != zname:
                            first_zone, first_loc = zone_of[phys]
                            errors.append(doc.error(loc, f"physical host {phys!r} is already in "
                                                    f"zone {first_zone!r} (line "
                                                    f"{doc.line_of(first_loc)}); a machine sits "
                                                    "in one zone"))
                        else:
                            zone_of.setdefault(phys, (zname, loc))
    warnings: list[str] = []
    if declared and "netns" not in spec.providers:
        errors.append(doc.error(("physical_hosts",), "`physical_hosts:` shapes hosts of the netns "
                                "testbed; this spec has no netns provider"))
    elif declared:
        warnings += [f"{doc.path}:{doc.line_of(('physical_hosts', p))}: physical host {p!r} holds "
                     "no host" for p in declared if p not in zone_of]
    return errors, warnings
