"""Checks of the cloud, static and cost parts of a spec, run by :func:`cloudbench.spec.checks.check_spec`.

Everything here is decided from the spec and the bundled catalogues alone, so a
wrong region, zone, address or key is reported with its file and line before any
provider is asked to create anything.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from cloudbench.core import catalog
from cloudbench.core.prices import load_prices
from cloudbench.errors import CloudbenchError, SpecError
from cloudbench.spec.located import Loc, LocatedYaml
from cloudbench.spec.model import Spec
from cloudbench.spec.providers import CloudProviderModel, StaticProviderModel

# A controller address wider than this is not "the controller's address".
MIN_CONTROLLER_PREFIX = 16
KEYSCAN_HINT = ("pin it: run `ssh-keyscan -t ed25519 -p {port} {host}` on a network you trust, "
                "check the fingerprint with the host's owner, and paste the `ssh-ed25519 AAAA…` part")


def check_providers(spec: Spec, doc: LocatedYaml) -> tuple[list[SpecError], list[str]]:
    """Errors and warnings of the provider entries (clouds, static hosts) and of ``prices``."""
    errors: list[SpecError] = []
    warnings: list[str] = []
    for pname, prov in spec.providers.items():
        if isinstance(prov, CloudProviderModel):
            errors += _check_cloud(pname, prov, doc, warnings)
        elif isinstance(prov, StaticProviderModel):
            errors += _check_static(prov, doc)
    if spec.prices is not None:
        try:
            load_prices(spec.prices, base=Path(doc.path).parent)
        except CloudbenchError as e:
            errors.append(doc.error(("prices",), str(e)))
    return errors, warnings


def _check_cloud(
    cloud: str, prov: CloudProviderModel, doc: LocatedYaml, warnings: list[str]
) -> list[SpecError]:
    errors: list[SpecError] = []
    base: Loc = ("providers", cloud)
    if prov.controller_cidr is not None:
        msg = controller_cidr_error(prov.controller_cidr)
        if msg:
            errors.append(doc.error((*base, "controller_cidr"), msg))
    nets: list[tuple[ipaddress.IPv4Network, Loc]] = []
    for rname, region in prov.regions.items():
        rloc: Loc = (*base, "regions", rname)
        msg = catalog.region_error(cloud, rname)
        if msg:
            errors.append(doc.error(rloc, msg))
            continue
        for zname, zone in region.zones.items():
            zloc: Loc = (*rloc, "zones", zname)
            msg = catalog.zone_error(cloud, rname, zname)
            if msg:
                errors.append(doc.error(zloc, msg))
            for sname, subnet in zone.subnets.items():
                sloc: Loc = (*zloc, "subnets", sname)
                if subnet.vm_type == "local":
                    example = next(iter(catalog.vm_types(cloud)))
                    errors.append(doc.error((*sloc, "vm_type"), f"a {cloud} subnet needs a `vm_type` "
                                            f"(an instance type such as {example})"))
                else:
                    warn = catalog.vm_type_warning(cloud, subnet.vm_type)
                    if warn:
                        w = doc.error((*sloc, "vm_type"), warn)
                        warnings.append(f"warning: {w}")
                    packing = catalog.placement_error(cloud, subnet.vm_type) if prov.placement_group else None
                    if packing:
                        errors.append(doc.error((*sloc, "vm_type"), packing))
                if subnet.cidr is not None:
                    net, msg = _subnet_cidr(subnet.cidr)
                    if msg:
                        errors.append(doc.error((*sloc, "cidr"), msg))
                    elif net is not None:
                        for other, oloc in nets:
                            if net.overlaps(other):
                                errors.append(doc.error((*sloc, "cidr"), f"{net} overlaps {other} "
                                                        f"(line {doc.line_of(oloc)})"))
                        nets.append((net, (*sloc, "cidr")))
    return errors


def normalize_controller_cidr(value: str) -> str:
    """The controller's address as the clouds' firewall rules want it: a network in CIDR form
    (``203.0.113.7`` → ``203.0.113.7/32``; host bits cleared). ``value`` passed
    :func:`controller_cidr_error`."""
    return str(ipaddress.ip_network(value.strip(), strict=False))


def controller_cidr_error(value: str) -> str | None:
    """Why ``value`` is not an acceptable controller CIDR (an IPv4 network narrow enough), or None."""
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError:
        return f"{value!r} is not an address or CIDR (write your public address, e.g. 203.0.113.7/32)"
    if not isinstance(net, ipaddress.IPv4Network):
        return f"{value} is IPv6; the VMs get public IPv4 addresses, so give the controller's IPv4 address"
    if net.prefixlen < MIN_CONTROLLER_PREFIX:
        return (f"{value} would open SSH to {net.num_addresses} addresses; give the controller's "
                f"own public address (a /32) or a network of at most /{MIN_CONTROLLER_PREFIX}")
    return None


def _subnet_cidr(value: str) -> tuple[ipaddress.IPv4Network | None, str | None]:
    try:
        net = ipaddress.ip_network(value)
    except ValueError as e:
        return None, f"{value!r} is not a network CIDR ({e})"
    if not isinstance(net, ipaddress.IPv4Network) or not net.is_private:
        return None, f"{value} is not a private IPv4 network (use 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16)"
    if not 16 <= net.prefixlen <= 28:
        return None, f"{value}: cloud subnets are /16 to /28"
    return net, None


def _check_static(prov: StaticProviderModel, doc: LocatedYaml) -> list[SpecError]:
    import asyncssh  # noqa: PLC0415 - heavy library; only specs with static hosts pay for importing it

    errors: list[SpecError] = []
    base: Loc = ("providers", "static")
    seen: dict[str, Loc] = {}
    vm_types: dict[tuple[str, str, str], str] = {}
    for i, h in enumerate(prov.hosts):
        hloc: Loc = (*base, "hosts", i)
        if h.name in seen:
            errors.append(doc.error((*hloc, "name"), f"duplicate host name {h.name!r} (first at "
                                    f"line {doc.line_of(seen[h.name])})"))
        seen.setdefault(h.name, (*hloc, "name"))
        if h.user is None and prov.user is None:
            errors.append(doc.error(hloc, f"host {h.name!r} has no SSH `user` (set it here or "
                                    "once for all hosts under providers.static)"))
        where = h.ssh_host or h.address
        if h.host_key is None:
            errors.append(doc.error(hloc, f"host {h.name!r} has no `host_key`; cloudbench never "
                                    "trusts a host key on first use; "
                                    + KEYSCAN_HINT.format(port=h.port, host=where)))
        else:
            try:
                asyncssh.import_public_key(h.host_key)
            except (asyncssh.KeyImportError, ValueError) as e:
                errors.append(doc.error((*hloc, "host_key"), f"not an OpenSSH public key ({e}); "
                                        + KEYSCAN_HINT.format(port=h.port, host=where)))
        key = (h.region, h.zone, h.subnet)
        if vm_types.setdefault(key, h.vm_type) != h.vm_type:
            errors.append(doc.error((*hloc, "vm_type"), f"hosts of subnet {h.subnet!r} have "
                                    f"different vm_type labels ({vm_types[key]!r}, {h.vm_type!r})"))
    return errors
