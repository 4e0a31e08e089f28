"""VM types of the netns testbed: a shaping profile per name.

A cloud VM type comes with a network allowance: a plain cap, or (EC2) a token
bucket that lets a fresh VM send at a high rate while a budget lasts, then at a
low rate, refilled at the low rate (Uta et al., NSDI'20, §3.3). On the testbed a
``vm_type`` names such a profile and :mod:`cloudbench.providers.netns.shaping` turns it into tc
rules on the host's egress.

Built-in types are listed in :data:`BUILTIN_VM_TYPES`; a spec adds its own under
a top-level ``vm_types:`` mapping::

    vm_types:
      tb-test: {shaping: token_bucket, high_rate: 200mbit, low_rate: 50mbit, budget: 75MiB}
      capped:  {shaping: cap, rate: 300mbit}

Rates are bits per second with decimal units (``mbit`` = 10⁶ bit/s); sizes are
bytes (``MB`` = 10⁶, ``MiB`` = 2²⁰) — unlike tc, whose ``mb`` means MiB. The tc
commands are written with plain bits and bytes so that there is nothing to
misread. :func:`expected_goodput` is what a profile lets a TCP or UDP sender
deliver (the configured truth the throughput and drain reports compare with).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, model_validator

from cloudbench.spec.fields import BitRate, Duration, Model, Size

VM_TYPE_RE = r"^[A-Za-z][A-Za-z0-9_.-]{0,47}$"
# Header bytes a shaper counts on the wire (goodput_fraction)
ETH_HEADER = 14
IP_HEADER = 20
TCP_HEADER_TS = 32  # 20 + 12 bytes of timestamp option (Linux default)
UDP_HEADER = 8


class VmTypeModel(Model):
    """One shaping profile: ``none``, a plain ``cap``, or a ``token_bucket``."""

    shaping: Literal["none", "cap", "token_bucket"] = Field(
        description="none; cap (a plain rate limit); token_bucket (high rate while a budget lasts)"
    )
    rate: BitRate | None = Field(None, gt=0, description="cap: the rate limit")
    high_rate: BitRate | None = Field(None, gt=0, description="token_bucket: rate while budget lasts")
    low_rate: BitRate | None = Field(None, gt=0, description="token_bucket: rate once it is empty "
                                     "(also the refill rate)")
    budget: Size | None = Field(None, gt=0, description="token_bucket: bucket size in bytes")
    qdisc: Literal["tbf", "htb"] = Field("tbf", description="tc qdisc that implements it")
    peak_burst: Size = Field(
        64 * 1024, ge=2048,
        description="bucket of the high rate; must hold a GSO packet (64 KiB) or the high rate "
        "is not reached",
    )
    latency: Duration = Field(0.05, gt=0, description="queue bound of the shaper, as tc computes it "
                              "for TBF's `latency` (this long at the rate plus the bucket; for a "
                              "token bucket at most this long at the peak rate plus the peak "
                              "bucket), for tbf and htb alike")
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
    """The VM type names a spec may use: the built-in ones and the spec's own."""
    return sorted({*BUILTIN_VM_TYPES, *(user or {})})


def goodput_fraction(protocol: str = "tcp", mtu: int = 1500, payload: int | None = None) -> float:
    """Payload bytes per wire byte counted by the shaper (Ethernet frame, no FCS).

    TCP: full-sized segments with the timestamp option. UDP: datagrams of
    ``payload`` bytes, IP-fragmented when larger than the MTU allows.
    """
    if protocol == "tcp":
        mss = mtu - IP_HEADER - TCP_HEADER_TS
        return mss / (mtu + ETH_HEADER)
    size = payload if payload is not None else mtu - IP_HEADER - UDP_HEADER
    per_frag = (mtu - IP_HEADER) // 8 * 8
    frags = max(1, math.ceil((size + UDP_HEADER) / per_frag))
    wire = size + UDP_HEADER + frags * (IP_HEADER + ETH_HEADER)
    return size / wire


def expected_goodput(profile: VmTypeModel, protocol: str = "tcp", mtu: int = 1500,
                     payload: int | None = None) -> dict[str, float]:
    """What a receiver should measure behind ``profile`` (bit/s, bits, seconds)."""
    f = goodput_fraction(protocol, mtu, payload)
    if profile.shaping == "cap":
        assert profile.rate is not None
        return {"rate": profile.rate * f}
    if profile.shaping == "token_bucket":
        assert profile.high_rate and profile.low_rate and profile.budget
        return {
            "high_rate": profile.high_rate * f,
            "low_rate": profile.low_rate * f,
            "budget_bits": profile.budget * 8 * f,
            "time_to_empty": profile.budget * 8 / (profile.high_rate - profile.low_rate),
            "refill_rate": profile.low_rate * f,
        }
    return {}
