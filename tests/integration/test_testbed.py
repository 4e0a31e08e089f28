"""The netns provider for real: addresses, hops, sshd, pinning, teardown."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import re
from pathlib import Path

import pytest

from cloudbench.core.cluster import Cluster
from cloudbench.core.topology import HostSpec, PairGroup, Topology, classify_pair
from cloudbench.errors import ProvisionError, RemoteError
from cloudbench.providers.base import Provider
from cloudbench.providers.netns import NetnsProvider
from cloudbench.remote import Remote

from .conftest import assert_gone, in_ns, ours, sshd_pids

pytestmark = pytest.mark.integration

# Routers between two hosts of each group (see providers/netns.py).
HOPS = {PairGroup.SAME_SUBNET: 0, PairGroup.CROSS_SUBNET: 1, PairGroup.CROSS_ZONE: 3,
        PairGroup.CROSS_REGION: 5}


def test_provider_satisfies_protocol(provider: NetnsProvider) -> None:
    assert isinstance(provider, Provider)


def test_addresses_hops_and_labels(quickstart_cluster: Cluster) -> None:
    c = quickstart_cluster
    testbed = ipaddress.ip_network("198.18.0.0/15")
    assert len(c.hosts) == 8 and len({h.address for h in c.hosts}) == 8
    for h in c.hosts:
        assert ipaddress.ip_address(h.address) in testbed
        assert h.netns is not None and h.netns.startswith(f"cb{c.stack}-")
        addrs = in_ns(h.netns, "ip", "-o", "-4", "addr").stdout
        for a in re.findall(r"inet (\S+)/", addrs):
            assert a == "127.0.0.1" or ipaddress.ip_address(a) in testbed
    src = c.hosts[0]
    seen = set()
    for dst in c.hosts[1:]:
        group = classify_pair(src.spec, dst.spec)
        r = in_ns(src.netns or "", "ping", "-c", "1", "-W", "2", dst.address)
        assert r.returncode == 0, r.stdout + r.stderr
        ttl = int(re.search(r"ttl=(\d+)", r.stdout).group(1))  # type: ignore[union-attr]
        assert 64 - ttl == HOPS[group], (dst.name, group, ttl)
        seen.add(group)
    assert seen == set(HOPS)


def test_routers_forward_and_hosts_are_isolated(quickstart_cluster: Cluster) -> None:
    routers = quickstart_cluster.facts["routers"]
    assert len(routers) == 1 + 3 + 5  # core, 3 regions, 5 zones
    for ns in routers:
        assert in_ns(ns, "sysctl", "-n", "net.ipv4.ip_forward").stdout.strip() == "1"
    for h in quickstart_cluster.hosts:
        assert h.netns is not None
        assert in_ns(h.netns, "sysctl", "-n", "net.ipv4.ip_forward").stdout.strip() == "0"


def test_ssh_runs_in_the_host_namespace_and_pins_keys(quickstart_cluster: Cluster) -> None:
    c = quickstart_cluster

    async def go() -> None:
        async with Remote(c) as remote:
            results = await remote.run_all({h.name: "ip -o -4 addr show dev eth0; echo $SHLVL" for h in c.hosts})
            for r, h in zip(results, c.hosts, strict=True):
                assert r.ok, r.failure
                assert h.address in r.value.stdout
            wrong = dataclasses.replace(c.hosts[0], host_key=c.hosts[1].host_key)
            with pytest.raises(RemoteError, match="does not match the pinned key"):
                await Remote(c).connect(wrong)
            blank = dataclasses.replace(c.hosts[0], host_key="")
            with pytest.raises(RemoteError, match="no pinned host key"):
                await Remote(c).connect(blank)
            bad = await remote.run_all({c.hosts[0].name: "echo oops >&2; exit 3",
                                        c.hosts[1].name: "echo fine"})
            assert not bad[0].ok and bad[1].ok
            assert bad[0].failure is not None
            assert bad[0].failure.exit_code == 3 and "oops" in bad[0].failure.stderr_tail

    asyncio.run(go())


def test_sshd_config_is_key_only(quickstart_cluster: Cluster) -> None:
    conf = (Path(quickstart_cluster.hosts[0].workdir).parent / "sshd_config").read_text()
    assert "PasswordAuthentication no" in conf and "UsePAM no" in conf
    assert f"ListenAddress {quickstart_cluster.hosts[0].address}" in conf
    key = Path(quickstart_cluster.client_key)
    assert key.stat().st_mode & 0o777 == 0o600


def test_teardown_after_an_exception(provider: NetnsProvider, tmp_path: Path) -> None:
    topo = Topology([HostSpec("a", "netns", "r1", "r1-a", "s1", "local", 0),
                     HostSpec("b", "netns", "r2", "r2-a", "s2", "local", 1)])
    stack = ""
    pids: list[int] = []
    with pytest.raises(RuntimeError):
        cluster = provider.provision(topo, tmp_path)
        try:
            stack = cluster.stack
            pids = sshd_pids(cluster)
            assert len(ours(stack)) == 2 + 1 + 2 + 2
            raise RuntimeError("a trial blew up")
        finally:
            provider.destroy(cluster)
    assert stack
    assert_gone(stack, pids)
    provider.destroy(cluster)  # twice is harmless


def test_failed_provision_leaves_nothing(provider: NetnsProvider, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import cloudbench.providers.netns.provider as netns

    claimed: list[str] = []
    claim = provider._claim_stack
    monkeypatch.setattr(provider, "_claim_stack", lambda: claimed.append(claim()) or claimed[-1])
    monkeypatch.setattr(netns, "SSHD", "/bin/false")  # every sshd "exits" at once
    topo = Topology([HostSpec("a", "netns", "r1", "r1-a", "s1", "local", 0)])
    with pytest.raises(ProvisionError, match="sshd of a exited"):
        provider.provision(topo, tmp_path)
    (stack,) = claimed
    assert ours(stack) == []
    assert not (provider.state_root / f"{stack}.json").exists()
    assert not (provider.state_root / stack).exists()
