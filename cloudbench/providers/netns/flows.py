"""Which router a flow's probe reaches on the namespace testbed: the ECMP branch it was hashed to.

A UDP probe from a host namespace with a small TTL expires at a router, which answers with
an ICMP time exceeded quoting the probe's header; the quoted ports tell which flow it was.
At the TTL of an ECMP diamond's first branch hop, the answering address is the branch the
multipath hash chose for that flow (the routers answer from one fixed address each, see
:mod:`.wan`). ``bench/bench_mda.py`` and the WAN tests use it to see how testbeds split flows.

Needs root (a raw ICMP socket) and sends only to the given testbed address.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from cloudbench.core.netns import in_netns
from cloudbench.providers.netns.wan import link_facts

if TYPE_CHECKING:
    from cloudbench.core.cluster import Cluster

PAYLOAD = b"cloudbench-flow!"  # 16 bytes


def probe_flows(ns: str, dst: str, flows: Sequence[tuple[int, int]], ttl: int,
                timeout_s: float = 0.5, batch: int = 16, pps: float = 500.0) -> list[str | None]:
    """For each flow ``(sport, dport)`` to ``dst``, the address that answered its probe sent
    with ``ttl`` from namespace ``ns`` (None: no answer within ``timeout_s``).

    Probes go out ``batch`` at a time, the next batch once the previous one is answered (or
    timed out) and no sooner than ``pps`` allows: a router sends at most 1,000 ICMP messages
    a second in bursts of 50 (``net.ipv4.icmp_msgs_per_sec``, ``icmp_msgs_burst``) and drops
    the rest, which would read as unanswered probes (measured: 998 dropped at ~1,600/s).
    """
    icmp: socket.socket = in_netns(ns, lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW,
                                                             socket.IPPROTO_ICMP))
    socks: dict[int, socket.socket] = {}
    out: dict[tuple[int, int], str | None] = {}
    try:
        for sport in dict.fromkeys(s for s, _ in flows):
            socks[sport] = in_netns(ns, partial(_udp, sport, ttl))
        for i in range(0, len(flows), batch):
            chunk = list(flows[i:i + batch])
            t0 = time.monotonic()
            for sport, dport in chunk:
                socks[sport].sendto(PAYLOAD, (dst, dport))
            out.update(_collect(icmp, dst, set(chunk), timeout_s))
            time.sleep(max(0.0, t0 + len(chunk) / pps - time.monotonic()))  # pacing, see above
    finally:
        icmp.close()
        for s in socks.values():
            s.close()
    return [out.get(f) for f in flows]


def _udp(sport: int, ttl: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", sport))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
    except OSError:
        s.close()
        raise
    return s


def _collect(icmp: socket.socket, dst: str, want: set[tuple[int, int]],
             timeout_s: float) -> dict[tuple[int, int], str]:
    """Read ICMP time exceeded messages quoting a UDP probe to ``dst`` of one of ``want``."""
    got: dict[tuple[int, int], str] = {}
    deadline = time.monotonic() + timeout_s
    dst_raw = socket.inet_aton(dst)
    while len(got) < len(want):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([icmp], [], [], left)[0]:
            break
        pkt, (who, _) = icmp.recvfrom(2048)
        ihl = (pkt[0] & 0x0F) * 4
        if len(pkt) < ihl + 8 + 20 or pkt[ihl] != 11:  # time exceeded, quoting an IP header
            continue
        inner = pkt[ihl + 8:]
        iihl = (inner[0] & 0x0F) * 4
        if inner[9] != socket.IPPROTO_UDP or inner[16:20] != dst_raw or len(inner) < iihl + 4:
            continue
        flow = struct.unpack("!HH", inner[iihl:iihl + 4])
        if flow in want:
            got.setdefault(flow, who)
    return got


def branch_ttl(ns: str, dst: str, branch_addrs: set[str], max_ttl: int = 16) -> int:
    """The probe TTL that expires at the first hop of a diamond's branches (one of
    ``branch_addrs`` answers); raises LookupError when none does up to ``max_ttl``."""
    for ttl in range(1, max_ttl + 1):
        who = probe_flows(ns, dst, [(40000, 33435), (40001, 33436)], ttl)
        if any(w in branch_addrs for w in who):
            return ttl
    raise LookupError(f"no probe toward {dst} expired at {sorted(branch_addrs)} up to TTL {max_ttl}")


def flow_branches(c: Cluster, src: str, dst: str, link: tuple[str, str], flows: Sequence[tuple[int, int]],
                  timeout_s: float = 0.5) -> list[int | None]:
    """For each flow ``(sport, dport)`` from host ``src`` to host ``dst``, the branch of the ECMP
    diamond on the WAN link between regions ``link`` it was hashed to: its index in the link's
    ``forward_hops`` (None: the probe went unanswered, or not through a branch).

    Raises KeyError (no such link), LookupError (no probe TTL reaches the branches) or OSError.
    """
    branch = {hop[1]: j for j, hop in enumerate(link_facts(c.facts, *link)["forward_hops"])}
    ns, addr = c.host(src).netns, c.host(dst).address
    if ns is None:
        raise LookupError(f"{src} is not a namespace host")
    ttl = branch_ttl(ns, addr, set(branch))
    return [branch.get(a or "") for a in probe_flows(ns, addr, flows, ttl, timeout_s=timeout_s)]
