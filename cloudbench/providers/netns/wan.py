"""WAN emulation on the namespace testbed: the routers, links and delay lines of ``wan:``.

The section and its delay semantics are :mod:`cloudbench.spec.wan`. Here it
replaces the testbed's core router by one emulated link per pair of regions::

    region router A ── W ══ branch 1 ══ region router B
                          ╲═ branch 2 ═╱            (ecmp: 2, hops: 1)

``W`` is a router namespace whose policy routing sends every transit packet
into a TUN device per direction; a delay-line process (:mod:`.forwarder`)
holds each packet for the link's one-way delay at that moment and writes it
back. Past ``W`` (and at B on the way back) traffic is split per flow over
``ecmp`` parallel branches of ``hops`` routers each, so MDA traceroute has
diamonds to find. Every router answers traceroute from one fixed address (routes
carry ``src``), so a router is one node of the MDA graph, not one per interface.

Addresses: the WAN links take /30s from 198.19.128.0/17. The testbed ships an
IP→AS table (:func:`asn_table`): one private AS per region (its subnets, routers
and links) and one transit AS (64512) for the WAN routers.
"""

from __future__ import annotations

import ipaddress
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cloudbench.core.files import utc_stamp
from cloudbench.errors import ProvisionError
from cloudbench.providers.netns.plan import TestbedPlan, WanLinkPlan, WanPlan
from cloudbench.spec.wan import WanLink, WanModel, resolve_links

if TYPE_CHECKING:
    from cloudbench.core.topology import Topology

WAN_BASE = ipaddress.IPv4Network("198.19.128.0/17")
TRANSIT_ASN = 64512
FIRST_REGION_ASN = 64513
READY_TIMEOUT_S = 10.0
TABLE_FWD = 100
TABLE_REV = 101


class _Alloc:
    """/30 links out of the WAN range, in order."""

    def __init__(self) -> None:
        self._nets: Iterator[ipaddress.IPv4Network] = WAN_BASE.subnets(new_prefix=30)

    def next(self) -> tuple[str, str]:
        net = next(self._nets)
        a, b = list(net.hosts())[:2]
        return str(a), str(b)


def _addrs(lines: list[str], dev_prefix: str) -> list[tuple[str, str]]:
    """(address/len, device) of the ``addr add`` lines of one namespace's batch."""
    out = []
    for line in lines:
        parts = line.split()
        if parts[:2] == ["addr", "add"] and parts[4].startswith(dev_prefix):
            out.append((parts[2], parts[4]))
    return out


class _Wiring:
    """Adds namespaces and /30 veth links to a plan's batches."""

    def __init__(self, p: TestbedPlan) -> None:
        self.p = p
        self.alloc = _Alloc()

    def veth(self, a_ns: str, a_if: str, b_ns: str, b_if: str) -> tuple[str, str]:
        """A veth pair from ``a_ns`` to ``b_ns`` with the next /30; returns the two addresses."""
        p = self.p
        a, b = self.alloc.next()
        p.root_batch.append(f"link add {a_if} netns {a_ns} type veth peer name {b_if} netns {b_ns}")
        p.ns_batches[a_ns] += [f"addr add {a}/30 dev {a_if}", f"link set {a_if} up"]
        p.ns_batches[b_ns] += [f"addr add {b}/30 dev {b_if}", f"link set {b_if} up"]
        return a, b

    def new_ns(self, name: str) -> str:
        """A new router namespace with its loopback up; returns its name."""
        p = self.p
        p.root_batch.append(f"netns add {name}")
        p.ns_batches[name] = ["link set lo up"]
        p.routers.append(name)
        return name


def _multipath(net: str, vias: list[str], src: str) -> str:
    """The route to ``net`` over one next hop, or split per flow over several."""
    if len(vias) == 1:
        return f"route add {net} via {vias[0]} src {src}"
    return f"route add {net} src {src} " + " ".join(f"nexthop via {v}" for v in vias)


def _region_subnets(p: TestbedPlan, topology: Topology, region_ns: dict[str, str]) -> dict[str, list[str]]:
    """The host subnets (/24) of each region, in host order."""
    region_of_host = {h.name: h.region for h in topology.hosts}
    subnets: dict[str, list[str]] = {r: [] for r in region_ns}
    for host, addr in p.host_addr.items():
        net = str(ipaddress.ip_network(f"{addr}/24", strict=False))
        if net not in subnets[region_of_host[host]]:
            subnets[region_of_host[host]].append(net)
    return subnets


def _home_addresses(p: TestbedPlan, region_ns: dict[str, str]) -> dict[str, str]:
    """The address each region router answers from: that of its first zone link."""
    home = {}
    for r, rns in region_ns.items():
        zone_links = _addrs(p.ns_batches[rns], "z")
        if not zone_links:
            raise ProvisionError("netns", p.stack, f"region router of {r} has no zone link")
        home[r] = zone_links[0][0].split("/")[0]
    return home


def plan_wan(p: TestbedPlan, topology: Topology, region_ns: dict[str, str]) -> WanPlan:
    """Add the WAN's namespaces, links, routes and rules to a netns provider plan.

    ``p`` is the provider's plan (``providers.netns.provider._Plan``): ``root_batch``,
    ``ns_batches``, ``routers``, ``host_addr``, ``stack``.
    """
    assert topology.wan is not None
    wan = WanModel.model_validate(topology.wan)
    links = resolve_links(wan, list(region_ns), topology.region_coords)
    pre = f"cb{p.stack}-"
    wiring = _Wiring(p)
    subnets = _region_subnets(p, topology, region_ns)
    home = _home_addresses(p, region_ns)
    plans = [_plan_link(wiring, i, link, pre, region_ns, subnets, home) for i, link in enumerate(links)]
    return WanPlan(plans, wan.forwarder, wan.realtime, asn_table(p, topology, region_ns))


def _plan_link(wiring: _Wiring, i: int, link: WanLink, pre: str, region_ns: dict[str, str],
               subnets: dict[str, list[str]], home: dict[str, str]) -> WanLinkPlan:
    """One WAN link: its router W (attached to region A), ``ecmp`` branches of ``hops`` routers
    on to region B, the routes both ways, and W's TUN devices and policy rules."""
    p = wiring.p
    ra, rb = region_ns[link.a], region_ns[link.b]
    w = wiring.new_ns(f"{pre}_w{i}")
    ra_addr, w_addr = wiring.veth(ra, f"w{i}", w, "a0")
    branch_ns: list[list[str]] = []
    ups: list[list[str]] = []  # per branch, per hop: address toward W
    downs: list[list[str]] = []  # per branch, per hop: address toward B
    first_hop: list[str] = []  # W's next hops
    last_hop: list[str] = []  # B's next hops
    for j in range(link.ecmp):
        chain, up_addrs, down_addrs = _plan_branch(wiring, i, j, link, pre, w, rb, subnets)
        branch_ns.append(chain)
        first_hop.append(up_addrs[0])
        last_hop.append(down_addrs[-1])
        ups.append(up_addrs)
        downs.append(down_addrs)
    for net in subnets[link.b]:
        p.ns_batches[ra].append(f"route add {net} via {w_addr} src {home[link.a]}")
        p.ns_batches[w].append(_multipath(net, first_hop, w_addr))
    for net in subnets[link.a]:
        p.ns_batches[w].append(f"route add {net} via {ra_addr} src {w_addr}")
        p.ns_batches[rb].append(_multipath(net, last_hop, home[link.b]))
    p.ns_batches[w] += [
        "tuntap add dev tf mode tun", "tuntap add dev tr mode tun",
        "link set tf txqueuelen 10000", "link set tr txqueuelen 10000",
        "link set tf up", "link set tr up",
        f"rule add iif a0 lookup {TABLE_FWD} pref {TABLE_FWD}",
        f"route add default dev tf table {TABLE_FWD}",
        *[f"rule add iif b{j} lookup {TABLE_REV} pref {TABLE_REV}" for j in range(link.ecmp)],
        f"route add default dev tr table {TABLE_REV}",
    ]
    return WanLinkPlan(
        link, w, branch_ns, w_addr,
        forward_hops=[[w_addr, *u, home[link.b]] for u in ups],
        reverse_hops=[[*reversed(d), w_addr, home[link.a]] for d in downs],
        home={link.a: home[link.a], link.b: home[link.b]},
    )


def _plan_branch(wiring: _Wiring, i: int, j: int, link: WanLink, pre: str, w: str, rb: str,
                 subnets: dict[str, list[str]]) -> tuple[list[str], list[str], list[str]]:
    """Branch ``j`` of link ``i``: a chain of ``hops`` routers from W to region B's router, each
    routing A's subnets back toward W and B's on toward B. Returns the chain's namespaces and,
    per hop, its address toward W (up) and toward B (down)."""
    p = wiring.p
    chain = [wiring.new_ns(f"{pre}_w{i}b{j}h{h}") for h in range(link.hops)]
    up_addrs: list[str] = []
    down_addrs: list[str] = []
    w_side, up = wiring.veth(w, f"b{j}", chain[0], "up0")
    up_addrs.append(up)
    for h in range(1, link.hops):
        down, nxt_up = wiring.veth(chain[h - 1], "dn0", chain[h], "up0")
        down_addrs.append(down)
        up_addrs.append(nxt_up)
    down, b_side = wiring.veth(chain[-1], "dn0", rb, f"w{i}j{j}")
    down_addrs.append(down)
    for h, ns in enumerate(chain):
        toward_w = w_side if h == 0 else down_addrs[h - 1]
        toward_b = b_side if h == link.hops - 1 else up_addrs[h + 1]
        for net in subnets[link.a]:
            p.ns_batches[ns].append(f"route add {net} via {toward_w}")
        for net in subnets[link.b]:
            p.ns_batches[ns].append(f"route add {net} via {toward_b}")
    return chain, up_addrs, down_addrs


def asn_table(p: TestbedPlan, topology: Topology, region_ns: dict[str, str]) -> list[tuple[str, int, str]]:
    """The testbed's IP→AS table: an AS per region, the transit AS for the WAN range."""
    asn = {r: FIRST_REGION_ASN + i for i, r in enumerate(region_ns)}
    rows: list[tuple[str, int, str]] = [(str(WAN_BASE), TRANSIT_ASN, "cb-transit")]
    region_of_host = {h.name: h.region for h in topology.hosts}
    seen: set[str] = set()
    for host, addr in p.host_addr.items():
        net = str(ipaddress.ip_network(f"{addr}/24", strict=False))
        if net not in seen:
            seen.add(net)
            r = region_of_host[host]
            rows.append((net, asn[r], f"cb-{r}"))
    for r, rns in region_ns.items():
        for cidr, _dev in _addrs(p.ns_batches[rns], "z"):
            rows.append((str(ipaddress.ip_network(cidr, strict=False)), asn[r], f"cb-{r}"))
    return rows


def _config_text(lp: WanLinkPlan, epoch: int, ready: Path, stats: Path, realtime: bool,
                 epoch_utc: float = 0.0) -> str:
    def ns(x: float) -> int:
        return round(x * 1e9)

    link = lp.link.relative_to(epoch_utc)  # UTC-anchored items as times after the epoch
    lines = [f"epoch {epoch}", f"ready {ready}", f"stats {stats}", "capacity 8192",
             f"rt {10 if realtime else 0}"]
    for tun in ("tf", "tr"):
        lines += [f"dir {tun}", f"base {ns(link.delay_s)}"]
        lines += [f"step {ns(at)} {ns(d)}" for at, d in link.steps]
        lines += [f"periodic {ns(a)} {ns(per)} {ns(ph)}" for a, per, ph in link.periodic]
        lines += [f"spike {ns(at)} {ns(dur)} {ns(x)}" for at, dur, x in link.spikes]
    return "\n".join(lines) + "\n"


def start_wan(plan: WanPlan, base: Path, state: dict[str, Any], stack: str,
              save: Callable[[], None], bin_dir: Path) -> dict[str, Any]:
    """Start one delay line per link (recorded in the state file); returns the WAN facts."""
    from cloudbench.providers.netns.forwarder import forwarder_argv

    argv, kind = forwarder_argv(plan.forwarder, bin_dir)
    d = base / "wan"
    d.mkdir(mode=0o700, exist_ok=True)
    wall_s = time.time()
    epoch = time.monotonic_ns()
    wall = datetime.fromtimestamp(wall_s, UTC)
    procs: list[tuple[WanLinkPlan, subprocess.Popen[bytes], Path, Path]] = []
    for i, lp in enumerate(plan.links):
        conf, ready, log = d / f"link{i}.conf", d / f"link{i}.ready", d / f"link{i}.log"
        conf.write_text(_config_text(lp, epoch, ready, d / f"link{i}.stats.json", plan.realtime, wall_s))
        for tun in ("tf", "tr"):  # the TUNs appeared after the netns-wide rp_filter=0
            subprocess.run(["ip", "netns", "exec", lp.ns, "sysctl", "-qw",
                            f"net.ipv4.conf.{tun}.rp_filter=0"], check=False, capture_output=True)
        with log.open("wb") as logf:
            proc = subprocess.Popen(["ip", "netns", "exec", lp.ns, *argv, str(conf)],
                                    stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                    start_new_session=True)
        state["pids"].append({"pid": proc.pid, "ns": lp.ns, "match": str(conf)})
        save()
        procs.append((lp, proc, ready, log))
    deadline = time.monotonic() + READY_TIMEOUT_S
    for lp, proc, ready, log in procs:
        while not ready.exists():
            if proc.poll() is not None:
                raise ProvisionError("netns", stack, f"WAN delay line of {lp.link.a} ↔ {lp.link.b} "
                                     f"exited ({proc.returncode}): {log.read_text()[-800:]}")
            if time.monotonic() > deadline:
                raise ProvisionError("netns", stack, f"WAN delay line of {lp.link.a} ↔ {lp.link.b} "
                                     f"did not attach its TUN devices in {READY_TIMEOUT_S:g}s")
            time.sleep(0.005)
    return {
        "forwarder": kind,
        "realtime": plan.realtime,
        "epoch_monotonic_ns": epoch,
        "epoch_utc": utc_stamp(wall, micro=True),
        "epoch_utc_s": wall_s,  # items with anchor: utc count from 1970-01-01 (spec.wan.delay_at)
        "links": [lp.to_facts() for lp in plan.links],
        "asn_table": [list(r) for r in plan.asn_rows],
    }


def link_facts(cluster_facts: dict[str, Any], a: str, b: str) -> dict[str, Any]:
    """The facts of the link joining regions ``a`` and ``b`` (either order)."""
    for lf in cluster_facts.get("wan", {}).get("links", []):
        if {lf["a"], lf["b"]} == {a, b}:
            return dict(lf)
    raise KeyError(f"no WAN link between {a} and {b}")
