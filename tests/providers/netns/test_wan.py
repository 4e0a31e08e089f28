"""WAN section of the spec, delay resolution, schedule semantics, the netns plan."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from geographiclib.geodesic import Geodesic

from cloudbench.errors import SpecError
from cloudbench.providers.netns.provider import HASH_SEED_SYSCTL, ROUTER_SYSCTLS, plan_testbed, router_sysctls
from cloudbench.providers.netns.wan import TRANSIT_ASN, WAN_BASE
from cloudbench.spec.wan import WanLink, delay_at, resolve_links
from cloudbench.workloads import parse_spec

SPEC = """
name: w
providers:
  netns:
    regions:
      fra:
        location: [50.11, 8.68]
        zones: {fra-1: {subnets: {a: {hosts: 2}}}}
      par:
        location: [48.86, 2.35]
        zones: {par-1: {subnets: {b: {hosts: 1}}}, par-2: {subnets: {c: {hosts: 1}}}}
      lon:
        zones: {lon-1: {subnets: {d: {hosts: 1}}}}
wan:
  overhead: 1ms
  ecmp: 2
  links:
    - between: [fra, lon]
      delay: 7ms
      ecmp: 3
      hops: 2
    - between: [par, lon]
      delay: 4ms
      steps: [{at: 10s, delay: 6ms}]
workloads: [{kind: echo}]
"""


def test_delays_from_locations_configured_and_defaults() -> None:
    spec = parse_spec(SPEC)
    topo = spec.topology()
    assert topo.wan is not None
    links = {(lk.a, lk.b): lk for lk in resolve_links(spec.wan, topo.regions, topo.region_coords)}
    assert set(links) == {("fra", "par"), ("fra", "lon"), ("par", "lon")}
    d = Geodesic.WGS84.Inverse(50.11, 8.68, 48.86, 2.35)["s12"]
    expect = d / (299_792_458.0 * 2 / 3) + 0.001
    fp = links[("fra", "par")]
    assert fp.origin == "geodesic" and fp.delay_s == pytest.approx(expect, rel=1e-9)
    assert (fp.ecmp, fp.hops) == (2, 1)
    fl = links[("fra", "lon")]
    assert (fl.delay_s, fl.origin, fl.ecmp, fl.hops) == (0.007, "configured", 3, 2)
    assert links[("par", "lon")].steps == ((10.0, 0.006),)


def test_topology_round_trips_the_wan() -> None:
    from cloudbench.core.topology import Topology

    topo = parse_spec(SPEC).topology()
    again = Topology.from_dict(topo.to_dict())
    assert again.wan == topo.wan


@pytest.mark.parametrize(("patch", "needle", "message"), [
    ("between: [par, lon]", "between: [par, mars]", "unknown region 'mars'"),
    ("between: [par, lon]", "between: [fra, lon]", "configured twice"),
    ("      delay: 4ms\n", "", "no delay for the link par ↔ lon"),
])
def test_wan_errors_name_the_line(patch: str, needle: str, message: str) -> None:
    text = SPEC.replace(patch, needle, 1)
    with pytest.raises(SpecError) as info:
        parse_spec(text, "bad.yaml")
    assert message in str(info.value)
    assert "bad.yaml:" in str(info.value)


def test_delay_schedule_semantics() -> None:
    link = WanLink("a", "b", 0.010, "configured", 1, 1,
                   steps=((5.0, 0.020), (8.0, 0.004)),
                   periodic=((0.001, 4.0, 0.0),),
                   spikes=((6.0, 0.5, 0.050),))
    def sine(t: float) -> float:
        return 0.001 * math.sin(2 * math.pi * t / 4.0)
    assert delay_at(link, 1.0) == pytest.approx(0.010 + sine(1.0))
    assert delay_at(link, 5.0) == pytest.approx(0.020 + sine(5.0))
    assert delay_at(link, 6.2) == pytest.approx(0.020 + sine(6.2) + 0.050)
    assert delay_at(link, 6.5) == pytest.approx(0.020 + sine(6.5))  # spike over at at + duration
    assert delay_at(link, 9.0) == pytest.approx(0.004 + sine(9.0))
    neg = WanLink("a", "b", 0.0005, "configured", 1, 1, periodic=((0.001, 4.0, 0.0),))
    assert delay_at(neg, 3.0) == 0.0  # never negative


def test_netns_plan_replaces_core_with_wan_links() -> None:
    topo = parse_spec(SPEC).topology()
    p = plan_testbed(topo, "abc123")
    assert "cbabc123-_core" not in p.routers
    assert p.wan is not None
    # one W router per pair + ecmp × hops branch routers
    wan_ns = [r for r in p.routers if "-_w" in r]
    assert len(wan_ns) == 3 + (2 * 1 + 3 * 2 + 2 * 1)
    for lp in p.wan.links:
        assert len(lp.forward_hops) == lp.link.ecmp
        assert all(len(h) == lp.link.hops + 2 for h in lp.forward_hops)
        branch_addrs = {a for h in lp.forward_hops for a in h[1:-1]}
        assert len(branch_addrs) == lp.link.ecmp * lp.link.hops
        lines = p.ns_batches[lp.ns]
        assert any(line.startswith("rule add iif a0 lookup") for line in lines)
        assert sum(line.startswith("rule add iif b") for line in lines) == lp.link.ecmp
        multipath = [ln for ln in lines if "nexthop" in ln]
        # every multipath route names the one address the router answers with
        assert multipath and all(f" src {lp.a_side} " in ln for ln in multipath)
    rows = p.wan.asn_rows
    assert (str(WAN_BASE), TRANSIT_ASN, "cb-transit") in rows
    assert {name for _, _, name in rows} == {"cb-transit", "cb-fra", "cb-par", "cb-lon"}


def test_every_testbed_draws_its_own_multipath_hash_keys() -> None:
    """With the kernel's default key (0) every namespace of a boot hashes a flow alike, so two
    testbeds send the same probes down the same ECMP branches (bench/bench_mda.py measured it:
    60 of 60 flows on the same branch). Each router of each plan gets its own nonzero key."""
    topo = parse_spec(SPEC).topology()
    a, b = plan_testbed(topo, "abc123"), plan_testbed(topo, "abc123")
    for p in (a, b):
        assert set(p.hash_seeds) == set(p.routers)
        assert all(0 < s < 2**32 for s in p.hash_seeds.values())
        assert len(set(p.hash_seeds.values())) == len(p.routers)  # 13 draws of 32 bits
    assert a.routers == b.routers and all(a.hash_seeds[r] != b.hash_seeds[r] for r in a.routers)
    assert plan_testbed(topo, "abc123", hash_seeds=a.hash_seeds).hash_seeds == a.hash_seeds  # rebuilt as recorded
    w = next(r for r in a.routers if r.endswith("_w0"))  # a router that splits flows
    assert router_sysctls(a, w, seeded=True) == [*ROUTER_SYSCTLS, f"{HASH_SEED_SYSCTL}={a.hash_seeds[w]}"]
    assert "net.ipv4.fib_multipath_hash_policy=1" in ROUTER_SYSCTLS  # L4: ports pick the branch
    assert router_sysctls(a, w, seeded=False) == list(ROUTER_SYSCTLS)  # a kernel before 6.11


def test_no_wan_keeps_the_core_router() -> None:
    text = SPEC[:SPEC.index("wan:")] + "workloads: [{kind: echo}]\n"
    p = plan_testbed(parse_spec(text).topology(), "abc123")
    assert "cbabc123-_core" in p.routers and p.wan is None


def _checksum(header: bytes) -> int:
    s = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, len(header), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


@pytest.mark.parametrize("ttl", [1, 63, 64, 200, 254])
def test_forwarder_gives_back_one_ttl_with_a_valid_checksum(ttl: int) -> None:
    from cloudbench.providers.netns.forwarder.pyfwd import restore_ttl

    hdr = bytearray(bytes.fromhex("450000541c4640000001000 0c6120a0ac6120b0a".replace(" ", "")))
    hdr[8] = ttl
    hdr[10:12] = b"\0\0"
    hdr[10:12] = _checksum(bytes(hdr)).to_bytes(2, "big")
    out = restore_ttl(bytes(hdr) + b"payload")
    assert out[8] == ttl + 1 and out[20:] == b"payload"
    assert _checksum(out[:20]) == 0  # a valid header sums to 0xFFFF
    assert restore_ttl(bytes([0x45]) + bytes(7) + bytes([255]) + bytes(11))[8] == 255


def test_items_anchored_to_utc_see_one_continuous_day_across_testbeds() -> None:
    """Two testbeds brought up at different UTC times see the same delay at the same UTC moment."""
    text = SPEC.replace("      steps: [{at: 10s, delay: 6ms}]",
                        "      steps: [{at: 1000s, delay: 6ms, anchor: utc}, {at: 5000s, delay: 8ms, anchor: utc}]\n"
                        "      periodic: [{amplitude: 2ms, period: 60s, phase: 7s, anchor: utc}]\n"
                        "      spikes: [{at: 4000s, duration: 100s, extra: 20ms, anchor: utc}]")
    spec = parse_spec(text)
    assert spec.wan is not None
    topo = spec.topology()
    (link,) = [lk for lk in resolve_links(spec.wan, topo.regions, topo.region_coords) if lk.b == "lon"
               and lk.a == "par"]
    assert link.steps == () and link.utc_steps == ((1000.0, 0.006), (5000.0, 0.008))
    with pytest.raises(ValueError, match="anchored to UTC"):
        delay_at(link, 1.0)

    def truth(u: float) -> float:  # the delay at UTC second u, from the spec's words
        base = 0.004 if u < 1000 else 0.006 if u < 5000 else 0.008
        spike = 0.020 if 4000 <= u < 4100 else 0.0
        return base + 0.002 * math.sin(2 * math.pi * (u - 7) / 60) + spike

    for epoch in (900.0, 3999.5, 4050.0, 4123.25):  # when each testbed came up (UTC seconds)
        rel = link.relative_to(epoch)
        assert not rel.utc_steps and not rel.utc_spikes and not rel.utc_periodic
        for t in (0.0, 0.3, 17.0, 99.9, 150.0, 1200.0):
            assert delay_at(link, t, epoch) == pytest.approx(truth(epoch + t), abs=1e-9), (epoch, t)
            assert delay_at(rel, t) == pytest.approx(truth(epoch + t), abs=1e-9)
        assert all(at >= 0 for at, _ in rel.steps) and all(at >= 0 for at, _, _ in rel.spikes)
        assert all(0 <= ph < per for _, per, ph in rel.periodic)


def test_the_forwarder_is_built_once_per_source_and_says_why_it_cannot_be(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from cloudbench.core import ckernels
    from cloudbench.errors import ProvisionError
    from cloudbench.providers.netns import forwarder

    if ckernels.compiler() is not None:
        exe = forwarder.build_c(tmp_path / "cache")
        assert exe.parent == tmp_path / "cache" and os.access(exe, os.X_OK)
        assert [p.name for p in exe.parent.iterdir()] == [exe.name]  # no temporary file left
        assert forwarder.forwarder_argv("auto", tmp_path / "cache") == ([str(exe)], "c")
        monkeypatch.setattr(ckernels, "compile_c", lambda *a: pytest.fail("rebuilt a cached forwarder"))
        assert forwarder.build_c(tmp_path / "cache") == exe
        monkeypatch.undo()
        broken = tmp_path / "cbfwd.c"
        broken.write_text("int main(void) { return }\n")
        monkeypatch.setattr(forwarder, "C_SOURCE", broken)
        with pytest.raises(ProvisionError, match=r"(?s)building the WAN forwarder failed: .*error"):
            forwarder.build_c(tmp_path / "cache")
        monkeypatch.undo()
    monkeypatch.setattr(ckernels.shutil, "which", lambda name: None)
    with pytest.raises(ProvisionError, match="no C compiler"):
        forwarder.build_c(tmp_path / "empty")
    assert forwarder.forwarder_argv("auto", tmp_path / "empty")[1] == "python"
    assert not (tmp_path / "empty").exists()
