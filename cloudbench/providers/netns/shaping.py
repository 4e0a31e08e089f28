"""tc shaping of testbed hosts from their ``vm_type`` (see :mod:`cloudbench.spec.vmtypes`).

The shaper sits on the egress of the host's ``eth0`` inside the host namespace,
like a cloud's per-VM allowance: it limits what the host sends, and nothing
else. Two implementations are known to work on these kernels (TESTBED-NOTES):

* TBF: ``rate`` = low rate (the refill), ``burst`` = budget, ``peakrate`` = high
  rate with ``mtu`` = the peak bucket. The peak bucket must hold a 64 KiB GSO
  packet, or one timer per MTU-sized packet keeps the rate below ``peakrate``.
* HTB: one root class, ``rate``/``burst`` the bucket, ``ceil``/``cburst`` the peak.

What the shaper counts is bytes on the wire (Ethernet frames), so what a TCP
receiver sees is less: with MTU 1500 and timestamps each 1514-byte frame carries
1448 bytes of payload (:func:`goodput_fraction`; 200 Mbit/s shaped → 191 Mbit/s).
"""

from __future__ import annotations

import math
import shlex
from typing import Any

from cloudbench.core.cluster import Cluster
from cloudbench.core.netns import run
from cloudbench.core.topology import Topology
from cloudbench.errors import ProvisionError
from cloudbench.spec.vmtypes import VmTypeModel, parse_vm_types, resolve_vm_type

DEVICE = "eth0"
# A plain cap needs a small bucket (else it would look like a token bucket) that
# still holds a 64 KiB GSO packet and a couple of timer ticks at high rates.
CAP_MIN_BURST = 128 * 1024
CAP_BURST_SECONDS = 0.002


def _bit(v: float) -> str:
    return f"{round(v)}bit"


def _ms(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def cap_burst(rate: float) -> int:
    return max(CAP_MIN_BURST, math.ceil(rate / 8 * CAP_BURST_SECONDS))


def tc_commands(profile: VmTypeModel, dev: str = DEVICE) -> list[list[str]]:
    """``tc`` argument lists (without ``tc`` and ``-n NS``) that set up ``profile``."""
    if profile.shaping == "none":
        return []
    if profile.shaping == "cap":
        assert profile.rate is not None
        rate, ceil = profile.rate, profile.rate
        burst = cburst = cap_burst(profile.rate)
    else:
        assert profile.low_rate and profile.high_rate and profile.budget
        rate, ceil = profile.low_rate, profile.high_rate
        burst, cburst = profile.budget, profile.peak_burst
    if profile.qdisc == "tbf":
        cmd = ["qdisc", "replace", "dev", dev, "root", "tbf", "rate", _bit(rate), "burst", str(burst)]
        if profile.shaping == "token_bucket":
            cmd += ["peakrate", _bit(ceil), "mtu", str(cburst)]
        return [[*cmd, "latency", _ms(profile.latency)]]
    return [
        ["qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
        ["class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", _bit(rate),
         "ceil", _bit(ceil), "burst", str(burst), "cburst", str(cburst)],
    ]


def shaping_fact(vm_type: str, profile: VmTypeModel, commands: list[list[str]]) -> dict[str, Any]:
    """What the manifest records about a host's shaping."""
    return {
        "vm_type": vm_type,
        "shaping": profile.shaping,
        "summary": profile.summary(),
        "profile": profile.model_dump(mode="json", exclude={"description"}),
        "device": DEVICE,
        "direction": "egress",
        "commands": [shlex.join(c) for c in commands],
    }


def apply_shaping(cluster: Cluster, topology: Topology) -> None:
    """Shape every host's egress by its vm_type; record the commands in its facts.

    Called by the netns provider once the hosts exist; a failure raises
    ProvisionError and the provider tears the testbed down.
    """
    user = parse_vm_types(getattr(topology, "vm_types", {}) or {})
    for host in cluster.hosts:
        vm_type = host.spec.vm_type
        profile = resolve_vm_type(vm_type, user)
        if profile is None:
            raise ProvisionError("netns", cluster.stack, f"host {host.name}: unknown vm_type "
                                 f"{vm_type!r}; define it under `vm_types:` in the spec")
        commands = []
        for args in tc_commands(profile):
            cmd = ["tc", *(["-n", host.netns] if host.netns else []), *args]
            run(cmd, cluster.stack)
            commands.append(cmd)
        host.facts["shaping"] = shaping_fact(vm_type, profile, commands)


