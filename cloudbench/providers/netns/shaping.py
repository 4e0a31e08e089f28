"""tc shaping of testbed hosts from their ``vm_type`` (see :mod:`cloudbench.spec.vmtypes`).

The shaper sits on the egress of the host's ``eth0`` inside the host namespace,
like a cloud's per-VM allowance: it limits what the host sends, and nothing
else. Two implementations are known to work on these kernels (TESTBED-NOTES):

* TBF: ``rate`` = low rate (the refill), ``burst`` = budget, ``peakrate`` = high
  rate with ``mtu`` = the peak bucket. The peak bucket must hold a 64 KiB GSO
  packet, or one timer per MTU-sized packet keeps the rate below ``peakrate``.
* HTB: one root class, ``rate``/``burst`` the bucket, ``ceil``/``cburst`` the peak.

Behind either one, the host's queue serves pure TCP ACKs first
(:func:`acks_first_commands`): an inner HTB whose classes only order packets,
one for pure ACKs (:data:`PURE_ACK`: IPv4 without options, TCP, under 128
bytes, flags exactly ACK) and a byte FIFO for the rest, as long as the queue
tc gives TBF for ``latency`` (:func:`queue_limit`: ``latency`` at the rate plus
the bucket; for a token bucket at most ``latency`` at the peak rate plus the
peak bucket: 102 ms at a 20 Mbit/s cap, 63 ms at 80). ACKs are guaranteed
ACK_SHARE of the sustained rate and data the rest, and beyond that both borrow,
ACKs first (like the shared NIC's classes below): a flood of ACKs cannot starve
the host's own data.

Why: a host that saturates its own egress otherwise holds the ACKs of every
flow it *receives* behind its whole queue. Those senders (BBR sizes its window
from the minimum RTT) fell 10-17 % under their cap when every host sent and
received at once (the colocation audit's full-load probe). A guest's fq or
fq_codel qdisc, which these kernels lack, would have sent those ACKs early as a
sparse flow. The emulation is narrower than fq: only pure ACKs go first (not
echo messages, SYNs or small UDP), and they may overtake their own
connection's data, which TCP ignores. An ACK still waits for the packet the
shaper holds at its head (up to a 64 KiB GSO packet: 26 ms at 20 Mbit/s, 6.5 ms
at 80). The FIFO bounds HTB's queue too, which before was the device's 1000
packets (up to 64 MiB of GSO packets).

Colocation (``physical_host:``): the hosts placed on one physical host share its
NIC's egress (:func:`physical_host_commands`). Each member's veth peer in the
zone router redirects what the host sends (its ingress there) to one IFB device
per physical host, and an HTB on that IFB caps the sum at the NIC's rate: a
parent class of ``nic``, one child per member guaranteed ``nic / k`` (less 2 %
kept for pure ACKs (:data:`PURE_ACK`), those of what the members receive, served
first) and allowed to borrow up to ``nic``. A member sending alone gets min(its vm_type, nic); k
members at full speed get nic / k each (the VM-fair share). Traffic between
two members counts too (it leaves through the same NIC on the testbed). This
sits behind each host's own vm_type shaper, so both limits hold.

What the shaper counts is bytes on the wire (Ethernet frames), so what a TCP
receiver sees is less: with MTU 1500 and timestamps each 1514-byte frame carries
1448 bytes of payload (:func:`goodput_fraction`; 200 Mbit/s shaped → 191 Mbit/s).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
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
# A shared NIC's queue per member (physical_host_commands)
NIC_QUEUE_SECONDS = 0.05
NIC_QUEUE_MIN = 4 * 64 * 1024
ACK_SHARE = 0.02  # of a shaper's rate guaranteed to pure ACKs, served first
# The inner queue that serves pure ACKs first (acks_first_commands)
ACKS_FIRST_RATE = 100e9
ACKS_FIRST_QUANTUM = 65536
ACKS_QUEUE_PACKETS = 1000
PURE_ACK = (  # (size, value, mask, offset) in the IP header
    (1, 0x45, 0xFF, 0),    # IPv4, a 20-byte header
    (1, 6, 0xFF, 9),       # TCP
    (2, 0, 0xFF80, 2),     # total length under 128 bytes
    (1, 0x10, 0xFF, 33),   # TCP flags (byte 13 of the TCP header): ACK and nothing else
)


def _bit(v: float) -> str:
    return f"{round(v)}bit"


def _whole_ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _ms(seconds: float) -> str:
    return f"{_whole_ms(seconds)}ms"


def cap_burst(rate: float) -> int:
    """The bucket (bytes) of a plain cap at ``rate`` bit/s: 2 ms worth, at least 128 KiB, small
    enough not to act as a token bucket yet holding a GSO packet and a few timer ticks."""
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
        cmd = ["qdisc", "replace", "dev", dev, "root", "handle", "1:", "tbf", "rate", _bit(rate),
               "burst", str(burst)]
        if profile.shaping == "token_bucket":
            cmd += ["peakrate", _bit(ceil), "mtu", str(cburst)]
        shaper = [[*cmd, "latency", _ms(profile.latency)]]
    else:
        shaper = [
            ["qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
            ["class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
             "rate", _bit(rate), "ceil", _bit(ceil), "burst", str(burst), "cburst", str(cburst)],
        ]
    return shaper + acks_first_commands(dev, "1:1", queue_limit(profile), rate, ceil)


def queue_limit(profile: VmTypeModel) -> int:
    """Bytes the shaper queues: what tc computes for TBF's ``latency`` (the bucket plus
    ``latency`` at the rate, at most ``latency`` at the peak rate plus the peak bucket)."""
    latency = _whole_ms(profile.latency) / 1000
    if profile.shaping == "cap":
        assert profile.rate is not None
        return math.ceil(profile.rate / 8 * latency + cap_burst(profile.rate))
    assert profile.low_rate and profile.high_rate and profile.budget
    return math.ceil(min(profile.low_rate / 8 * latency + profile.budget,
                         profile.high_rate / 8 * latency + profile.peak_burst))


def _u32(matches: tuple[tuple[int, int, int, int], ...]) -> list[str]:
    """tc u32 ``match`` arguments of (size in bytes, value, mask, offset in the IP header)."""
    words = {1: "u8", 2: "u16", 4: "u32"}
    return [a for size, value, mask, at in matches
            for a in ("match", words[size], f"0x{value:0{2 * size}x}", f"0x{mask:0{2 * size}x}",
                      "at", str(at))]


def acks_first_commands(dev: str, parent: str, limit: int, rate: float, peak: float) -> list[list[str]]:
    """The queue behind a host's shaper (class ``parent``, sustained ``rate``, at most ``peak``):
    pure ACKs first, the rest in a FIFO of ``limit`` bytes (see the module doc).

    Under an inner class that never limits (ACKS_FIRST_RATE, or 10 x ``peak`` if that is
    more), ACKs are guaranteed ACK_SHARE of ``rate`` and the data the rest; beyond their
    guarantee both borrow, ACKs first.
    """
    top = _bit(max(ACKS_FIRST_RATE, 10 * peak))
    quantum = str(ACKS_FIRST_QUANTUM)
    burst = str(cap_burst(peak))  # a guarantee holds a GSO packet
    return [
        ["qdisc", "replace", "dev", dev, "parent", parent, "handle", "10:", "htb", "default", "20"],
        ["class", "replace", "dev", dev, "parent", "10:", "classid", "10:1", "htb", "rate", top,
         "quantum", quantum],
        ["class", "replace", "dev", dev, "parent", "10:1", "classid", "10:10", "htb",
         "rate", _bit(rate * ACK_SHARE), "ceil", top, "burst", burst, "cburst", burst,
         "quantum", quantum, "prio", "0"],
        ["class", "replace", "dev", dev, "parent", "10:1", "classid", "10:20", "htb",
         "rate", _bit(rate * (1 - ACK_SHARE)), "ceil", top, "burst", burst, "cburst", burst,
         "quantum", quantum, "prio", "1"],
        ["qdisc", "replace", "dev", dev, "parent", "10:10", "pfifo", "limit", str(ACKS_QUEUE_PACKETS)],
        ["qdisc", "replace", "dev", dev, "parent", "10:20", "bfifo", "limit", str(limit)],
        ["filter", "add", "dev", dev, "parent", "10:", "protocol", "ip", "prio", "1", "u32",
         *_u32(PURE_ACK), "flowid", "10:10"],
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




@dataclass(frozen=True)
class NicMember:
    """A host placed on a physical host: its name, address, and where its veth peer lives."""

    host: str
    address: str
    router_ns: str  # the zone router holding the host's veth peer (and the IFB)
    peer: str  # the veth peer's name in router_ns


def nic_device(index: int) -> str:
    """The IFB device of the ``index``-th physical host (inside its zone router)."""
    return f"nic{index}"


def nic_queue_bytes(nic_bps: float) -> int:
    """Each member's queue on a shared NIC: NIC_QUEUE_SECONDS at the NIC's rate, at least
    a few GSO packets."""
    return max(NIC_QUEUE_MIN, math.ceil(nic_bps / 8 * NIC_QUEUE_SECONDS))


def physical_host_commands(nic_bps: float, members: list[NicMember], ifb: str) -> list[list[str]]:
    """``ip``/``tc`` argument lists (run with ``-n`` the members' router) for one physical host.

    Pure: the provider runs them and records them in the facts (see the module doc).
    """
    if not members:
        return []
    k = len(members)
    burst = str(cap_burst(nic_bps))
    share = nic_bps / k
    queue = str(nic_queue_bytes(nic_bps))
    cmds: list[list[str]] = [
        ["ip", "link", "add", ifb, "type", "ifb"],
        # ifb's default queue (32 packets) drops bursts of several TCP senders
        ["ip", "link", "set", ifb, "txqueuelen", "1000", "up"],
        ["tc", "qdisc", "replace", "dev", ifb, "root", "handle", "1:", "htb"],
        ["tc", "class", "replace", "dev", ifb, "parent", "1:", "classid", "1:1", "htb",
         "rate", _bit(nic_bps), "ceil", _bit(nic_bps), "burst", burst, "cburst", burst],
        # Pure ACKs first, within the NIC's cap: a NIC of tens of
        # Gbit/s queues for microseconds, this emulated one for milliseconds, and ACKs that
        # wait behind a member's data throttle the flows it receives
        ["tc", "class", "replace", "dev", ifb, "parent", "1:1", "classid", "1:2", "htb",
         "rate", _bit(nic_bps * ACK_SHARE), "ceil", _bit(nic_bps), "burst", burst,
         "cburst", burst, "prio", "0"],
        ["tc", "filter", "add", "dev", ifb, "parent", "1:", "protocol", "ip", "prio", "1",
         "u32", *_u32(PURE_ACK), "flowid", "1:2"],
    ]
    for i, m in enumerate(members):
        cls = f"1:{10 + i:x}"
        cmds += [
            ["tc", "class", "replace", "dev", ifb, "parent", "1:1", "classid", cls, "htb",
             "rate", _bit(share * (1 - ACK_SHARE)), "ceil", _bit(nic_bps), "burst", burst,
             "cburst", burst, "prio", "1"],
            # a bounded byte queue per member (50 ms at the NIC's rate): the default, 1000
            # GSO packets, is seconds long; shorter than this, TCP's losses leave a
            # member under its share while the others borrow it
            ["tc", "qdisc", "replace", "dev", ifb, "parent", cls, "bfifo", "limit", queue],
            ["tc", "filter", "add", "dev", ifb, "parent", "1:", "protocol", "ip", "prio", "2",
             "u32", "match", "ip", "src", f"{m.address}/32", "flowid", cls],
            ["tc", "qdisc", "replace", "dev", m.peer, "clsact"],
            # u32 matching everything: these kernels have no matchall classifier
            ["tc", "filter", "add", "dev", m.peer, "ingress", "protocol", "all", "prio", "1",
             "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect",
             "dev", ifb],
        ]
    return cmds


def apply_physical_hosts(cluster: Cluster, topology: Topology,
                         peers: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """Make every physical host's shared NIC; record it in the cluster's and hosts' facts.

    ``peers``: host name -> (router namespace, veth peer name). Returns the facts
    (physical host -> nic, members, device, commands); empty when no host is placed.
    """
    placed: dict[str, list[NicMember]] = {}
    for h in topology.hosts:
        if h.physical_host is not None:
            ns, peer = peers[h.name]
            placed.setdefault(h.physical_host, []).append(
                NicMember(h.name, cluster.host(h.name).address, ns, peer))
    facts: dict[str, Any] = {}
    for index, (name, members) in enumerate(placed.items()):
        routers = {m.router_ns for m in members}
        if len(routers) != 1:  # the spec checks refuse this; a topology built by hand may not
            raise ProvisionError("netns", cluster.stack, f"physical host {name!r} spans zones "
                                 f"({', '.join(sorted(routers))}); a machine sits in one zone")
        (ns,) = routers
        nic = float(topology.physical_hosts[name]["nic"])
        ifb = nic_device(index)
        done = []
        for args in physical_host_commands(nic, members, ifb):
            cmd = [args[0], "-n", ns, *args[1:]]
            run(cmd, cluster.stack)
            done.append(shlex.join(cmd))
        facts[name] = {"nic_bps": nic, "hosts": [m.host for m in members], "router": ns,
                       "device": ifb, "fair_share_bps": nic / len(members), "commands": done}
        for m in members:
            cluster.host(m.host).facts["physical_host"] = {"name": name, "nic_bps": nic,
                                                           "members": len(members)}
    return facts
