"""The bundled catalogue of cloud regions, zones and VM types (``data/catalog.json``).

Specs are checked against it before anything is created: an unknown region or a
zone outside its region is an error (a typo there would fail minutes into
``pulumi up``, after other resources were made); a VM type missing from the
catalogue is only a warning naming the closest known types, because providers
add types faster than any bundled list.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

CLOUDS = ("aws", "gcp", "azure")
_ARM_AWS = re.compile(r"^[a-z]+\d+g[a-z]*\.")  # m6g.large, c7gn.large, t4g.micro


@dataclass(frozen=True)
class RegionInfo:
    """A region of the bundled catalogue: its zones (as specs write them), location and continent."""
    name: str
    zones: tuple[str, ...]  # as written in specs (Azure: eastus-1)
    location: tuple[float, float]
    continent: str


@functools.cache
def load_catalog() -> dict[str, Any]:
    """The bundled cloud catalogue (``data/catalog.json``), read once."""
    text = resources.files("cloudbench").joinpath("data/catalog.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def catalog_date() -> str:
    """The date the bundled catalogue was made."""
    return str(load_catalog()["date"])


def regions(cloud: str) -> dict[str, RegionInfo]:
    """The regions of a cloud in the bundled catalogue, by name."""
    out: dict[str, RegionInfo] = {}
    for name, r in load_catalog()["clouds"][cloud]["regions"].items():
        zones = tuple(f"{name}-{z}" for z in r["zones"]) if cloud == "azure" else tuple(r["zones"])
        out[name] = RegionInfo(name, zones, (float(r["location"][0]), float(r["location"][1])),
                               str(r["continent"]))
    return out


def vm_types(cloud: str) -> dict[str, dict[str, Any]]:
    """The VM types of a cloud in the bundled catalogue, by name."""
    types: dict[str, dict[str, Any]] = load_catalog()["clouds"][cloud]["vm_types"]
    return types


def closest(name: str, choices: list[str], n: int = 3) -> list[str]:
    """Up to ``n`` names from ``choices`` that look most like ``name``."""
    found = difflib.get_close_matches(name, choices, n=n, cutoff=0.5)
    if not found:  # keep the hint useful for short or very wrong names
        found = difflib.get_close_matches(name, choices, n=n, cutoff=0.0)
    return found


def region_error(cloud: str, region: str) -> str | None:
    """Why ``region`` is not a region of ``cloud`` (with the closest names), or None if it is."""
    known = regions(cloud)
    if region in known:
        return None
    near = closest(region, list(known))
    return (f"unknown {cloud} region {region!r}" + (f"; did you mean {_alts(near)}?" if near else "")
            + f" (the bundled catalogue of {catalog_date()} knows {len(known)} {cloud} regions)")


def zone_error(cloud: str, region: str, zone: str) -> str | None:
    """Why ``zone`` is not a zone of ``region``, or None if it is (or the region is unknown)."""
    info = regions(cloud).get(region)
    if info is None or zone in info.zones:
        return None
    hint = " (Azure zones are written <region>-<n>, e.g. eastus-1)" if cloud == "azure" else ""
    return f"zone {zone!r} is not in {cloud} region {region!r}; its zones are {', '.join(info.zones)}{hint}"


def vm_type_warning(cloud: str, vm_type: str) -> str | None:
    """A warning when ``vm_type`` is not in the catalogue (it is still passed to the cloud), or None."""
    known = vm_types(cloud)
    if vm_type in known:
        return None
    near = closest(vm_type, list(known))
    return (f"vm_type {vm_type!r} is not in the bundled {cloud} catalogue (closest: "
            f"{', '.join(near)}); it is passed to {cloud} as written and priced as unknown")


def zone_id(cloud: str, zone: str) -> str:
    """The provider's own name for a spec zone (Azure wants just the number)."""
    if cloud == "azure":
        return zone.rsplit("-", 1)[-1]
    return zone


def vm_arch(cloud: str, vm_type: str) -> str:
    """``x86_64`` or ``arm64``: picks the Ubuntu image that boots on ``vm_type``."""
    info = vm_types(cloud).get(vm_type)
    if info is not None:
        return str(info["arch"])
    t = vm_type.lower()
    arm = (
        (cloud == "aws" and _ARM_AWS.match(t) is not None)
        or (cloud == "gcp" and (t.startswith(("t2a-", "c4a-", "a4x-"))))
        or (cloud == "azure" and re.search(r"_[a-z]+\d+p[a-z]*_v\d", t) is not None)
    )
    return "arm64" if arm else "x86_64"


# Machine series the clouds refuse in a packed placement (documented limits): cloud ->
# (series, why, a type that fits). AWS cluster placement groups take no burstable (T)
# instances; GCP compact placement policies take no shared-core or E2 machines.
_NO_PACKING = {
    "aws": (re.compile(r"^t\d+[a-z]*\."), "a cluster placement group takes no burstable (T) instances", "m5.large"),
    "gcp": (re.compile(r"^e2-"), "a compact placement policy takes no E2 machines", "n2-standard-2"),
}
# GCP series whose boot disk must be Hyperdisk (they have no Persistent Disk).
_GCP_HYPERDISK = ("c4-", "c4a-", "c4d-", "n4-")


def placement_error(cloud: str, vm_type: str) -> str | None:
    """Why ``vm_type`` cannot join the spec's ``placement_group`` on ``cloud`` (None: it can)."""
    rule = _NO_PACKING.get(cloud)
    if rule is None or not rule[0].match(vm_type.lower()):
        return None
    return f"{vm_type}: {rule[1]}; pick another vm_type (e.g. {rule[2]}) or set placement_group: false"


def gcp_boot_disk(vm_type: str) -> str:
    """The boot disk type a GCE machine of ``vm_type`` accepts (C4, C4A, C4D, N4: Hyperdisk only)."""
    return "hyperdisk-balanced" if vm_type.lower().startswith(_GCP_HYPERDISK) else "pd-balanced"


def continent(cloud: str, region: str) -> str | None:
    """The continent of a catalogued region, or None for a region the catalogue lacks."""
    info = regions(cloud).get(region)
    return info.continent if info else None


def _alts(names: list[str]) -> str:
    return " or ".join(repr(n) for n in names)
