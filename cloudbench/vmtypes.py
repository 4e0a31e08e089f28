"""VM types of the netns testbed: a shaping profile per name.

A cloud VM type comes with a network allowance: a plain cap, or (EC2) a token
bucket that lets a fresh VM send at a high rate while a budget lasts, then at a
low rate, refilled at the low rate (Uta et al., NSDI'20, §3.3). On the testbed a
``vm_type`` names such a profile and :mod:`cloudbench.shaping` turns it into tc
rules on the host's egress.

Built-in types are listed in :data:`BUILTIN_VM_TYPES`; a spec adds its own under
a top-level ``vm_types:`` mapping::

    vm_types:
      tb-test: {shaping: token_bucket, high_rate: 200mbit, low_rate: 50mbit, budget: 75MiB}
      capped:  {shaping: cap, rate: 300mbit}

Rates are bits per second with decimal units (``mbit`` = 10⁶ bit/s); sizes are
bytes (``MB`` = 10⁶, ``MiB`` = 2²⁰) — unlike tc, whose ``mb`` means MiB. The tc
commands are written with plain bits and bytes so that there is nothing to
misread.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from cloudbench.units import parse_bitrate, parse_duration, parse_size

if TYPE_CHECKING:
    from cloudbench.errors import SpecError
    from cloudbench.spec import Spec
    from cloudbench.yamlloc import LocatedYaml

VM_TYPE_RE = r"^[A-Za-z][A-Za-z0-9_.-]{0,47}$"
_VM_TYPE = re.compile(VM_TYPE_RE)

BitRate = Annotated[
    float,
    BeforeValidator(parse_bitrate),
    WithJsonSchema(
        {
            "anyOf": [{"type": "number", "minimum": 0}, {"type": "string"}],
            "description": "bits per second, or a number with a unit: 50mbit, 1gbit",
        }
    ),
]
_Bytes = Annotated[
    int,
    BeforeValidator(parse_size),
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string"}],
                    "description": "bytes, or a number with a unit: 64KiB, 75MiB"}),
]
_Seconds = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}],
                    "description": "seconds, or a number with a unit: 50ms"}),
]


class VmTypeModel(BaseModel):
    """One shaping profile: ``none``, a plain ``cap``, or a ``token_bucket``."""

    model_config = ConfigDict(extra="forbid")

    shaping: Literal["none", "cap", "token_bucket"] = Field(
        description="none; cap (a plain rate limit); token_bucket (high rate while a budget lasts)"
    )
    rate: BitRate | None = Field(None, gt=0, description="cap: the rate limit")
    high_rate: BitRate | None = Field(None, gt=0, description="token_bucket: rate while budget lasts")
    low_rate: BitRate | None = Field(None, gt=0, description="token_bucket: rate once it is empty "
                                     "(also the refill rate)")
    budget: _Bytes | None = Field(None, gt=0, description="token_bucket: bucket size in bytes")
    qdisc: Literal["tbf", "htb"] = Field("tbf", description="tc qdisc that implements it")
    peak_burst: _Bytes = Field(
        64 * 1024, ge=2048,
        description="bucket of the high rate; must hold a GSO packet (64 KiB) or the high rate "
        "is not reached",
    )
    latency: _Seconds = Field(0.05, gt=0, description="queue bound of the shaper (tc `latency`)")
    description: str = ""

    @model_validator(mode="after")
    def _fields_match_shaping(self) -> VmTypeModel:
        tb = ("high_rate", "low_rate", "budget")
        given = {f for f in ("rate", *tb) if getattr(self, f) is not None}
        want = {"none": set(), "cap": {"rate"}, "token_bucket": set(tb)}[self.shaping]
        if missing := sorted(want - given):
            raise ValueError(f"shaping {self.shaping!r} needs {', '.join(missing)}")
        if extra := sorted(given - want):
            raise ValueError(f"shaping {self.shaping!r} takes no {', '.join(extra)}")
        if self.shaping == "token_bucket":
            assert self.high_rate is not None and self.low_rate is not None
            if self.high_rate <= self.low_rate:
                raise ValueError("high_rate must be above low_rate")
        return self

    def time_to_empty(self) -> float | None:
        """Seconds of sending at ``high_rate`` that empty a full bucket (wire bytes)."""
        if self.shaping != "token_bucket":
            return None
        assert self.high_rate is not None and self.low_rate is not None and self.budget is not None
        return self.budget * 8 / (self.high_rate - self.low_rate)

    def summary(self) -> str:
        if self.shaping == "cap":
            return f"cap {_mbit(self.rate)}"
        if self.shaping == "token_bucket":
            return (f"token bucket {_mbit(self.high_rate)} → {_mbit(self.low_rate)}, "
                    f"budget {(self.budget or 0) / 2**20:g} MiB")
        return "unshaped"


def _mbit(v: float | None) -> str:
    return f"{(v or 0) / 1e6:g} Mbit/s"


def _builtin(**kw: Any) -> VmTypeModel:
    return VmTypeModel.model_validate(kw)


BUILTIN_VM_TYPES: dict[str, VmTypeModel] = {
    "local": _builtin(shaping="none", description="no shaping: as fast as the CPU allows"),
    "local.100m": _builtin(shaping="cap", rate=100e6, description="plain 100 Mbit/s cap"),
    "local.1g": _builtin(shaping="cap", rate=1e9, description="plain 1 Gbit/s cap"),
    "local.tb-small": _builtin(
        shaping="token_bucket", high_rate=200e6, low_rate=50e6, budget=75 * 2**20,
        description="token bucket: 200 Mbit/s for ≈4.2 s, then 50 Mbit/s",
    ),
    "local.tb-medium": _builtin(
        shaping="token_bucket", high_rate=1e9, low_rate=250e6, budget=512 * 2**20,
        description="token bucket: 1 Gbit/s for ≈5.7 s, then 250 Mbit/s",
    ),
}


def parse_vm_types(raw: dict[str, Any]) -> dict[str, VmTypeModel]:
    """User-defined types as stored in a Topology (plain dicts) → models."""
    return {k: VmTypeModel.model_validate(v) for k, v in raw.items()}


def resolve_vm_type(name: str, user: dict[str, VmTypeModel] | None = None) -> VmTypeModel | None:
    """The profile called ``name``: the spec's own first, then the built-ins."""
    if user and name in user:
        return user[name]
    return BUILTIN_VM_TYPES.get(name)


def known_vm_types(user: dict[str, Any] | None = None) -> list[str]:
    return sorted({*BUILTIN_VM_TYPES, *(user or {})})


def valid_vm_type_name(name: str) -> bool:
    return _VM_TYPE.match(name) is not None


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
