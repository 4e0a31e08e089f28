"""The contract every provider passes (one Protocol, one contract test): fake here, netns and static as root."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from cloudbench.providers.base import Finding, Provider
from cloudbench.testing.fakes import FakeProvider
from cloudbench.workloads import load_spec
from tests.paths import QUICKSTART


def check_contract(provider: Provider, tmp_path: Path) -> None:
    assert isinstance(provider, Provider)
    topo = load_spec(QUICKSTART).topology()
    findings = provider.preflight(topo)  # read-only, before anything exists
    assert isinstance(findings, list) and all(isinstance(f, Finding) for f in findings)
    assert not any(f.blocks for f in findings), findings
    cluster = provider.provision(topo, tmp_path)
    try:
        assert [h.spec for h in cluster.hosts] == topo.hosts
        assert len({h.address for h in cluster.hosts}) == len(topo)
        for h in cluster.hosts:
            ipaddress.ip_address(h.address)
            assert h.host_key.startswith("ssh-ed25519 "), "host keys are pinned from the start"
            assert h.to_dict()["labels"] == h.spec.labels()
        assert cluster.client_key.exists() and cluster.client_key.stat().st_mode & 0o077 == 0
    finally:
        provider.destroy(cluster)
    provider.destroy(cluster)  # a second destroy is harmless
    assert isinstance(provider.gc(dry_run=True), list)


def test_fake_provider(tmp_path: Path) -> None:
    check_contract(FakeProvider(), tmp_path)


@pytest.mark.integration
def test_netns_provider(tmp_path: Path) -> None:
    from cloudbench.providers.netns import NetnsProvider

    check_contract(NetnsProvider(), tmp_path)
