"""Bring-your-own hosts: the static provider against real sshd hosts of a netns testbed.

A small testbed is provisioned with the netns provider; a static spec then names
those hosts (address, pinned host key, the testbed's client key, and ``netns:``
so SSH is opened inside their namespaces — nothing changes on the machine) and
cloudbench deploys and runs on them exactly as on hosts it made itself.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudbench.core.cluster import Cluster
from cloudbench.errors import ProvisionError, SpecError
from cloudbench.providers import get_provider
from cloudbench.spec.model import Spec
from cloudbench.spec.providers import StaticProviderModel
from cloudbench.workloads import parse_spec

TESTBED = textwrap.dedent("""\
    name: tb
    providers:
      netns:
        regions:
          r1:
            zones:
              r1-a: {subnets: {s1: {hosts: 2}}}
              r1-b: {subnets: {s2: {hosts: 1}}}
    workloads: [{kind: echo}]
    """)
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxNuYiqJl+xS4zuiqQsvY3x2QJPUNg2ldAIXB8mzhG9"


def static_yaml(cluster: Cluster, workdirs: Path, key: Path | None = None,
                host_key: dict[str, str] | None = None, workload: str = "") -> str:
    hosts = []
    for h in cluster.hosts:
        lab = h.spec
        hosts.append(
            f"      - {{name: {h.name}, address: {h.address}, port: {h.ssh_port}, "
            f"host_key: '{(host_key or {}).get(h.name, h.host_key)}', netns: {h.netns}, "
            f"region: {lab.region}, zone: {lab.zone}, subnet: {lab.subnet}, "
            f"workdir: {workdirs / h.name}}}")
    return "\n".join([
        "name: byo",
        "providers:",
        "  static:",
        "    user: root",
        f"    key: {key or cluster.client_key}",
        "    hosts:",
        *hosts,
        "workloads:",
        workload or "  - {kind: echo, rate: 20, duration: 1s, warmup: 0.2s, timeout: 0.5s}",
    ]) + "\n"


@pytest.fixture
def testbed(tmp_path: Path) -> Iterator[Cluster]:
    from cloudbench.providers.netns import NetnsProvider

    netns = NetnsProvider()
    cluster = netns.provision(parse_spec(TESTBED, "tb.yaml").topology(), tmp_path / "tb")
    try:
        yield cluster
    finally:
        netns.destroy(cluster)


def _static(spec: Spec) -> StaticProviderModel:
    prov = spec.providers["static"]
    assert isinstance(prov, StaticProviderModel)
    return prov


@pytest.mark.integration
def test_static_hosts_deploy_run_pull_and_destroy(testbed: Cluster, tmp_path: Path) -> None:
    import asyncio

    from cloudbench.remote import Remote

    spec = parse_spec(static_yaml(testbed, tmp_path / "work"), "byo.yaml")
    topo = spec.topology()
    assert [h.zone for h in topo.hosts] == [h.spec.zone for h in testbed.hosts]
    prov = get_provider("static", spec=spec)
    cluster = prov.provision(topo, tmp_path / "run")
    try:
        assert cluster.provider == "static" and len(cluster.hosts) == 3
        for h, t in zip(cluster.hosts, testbed.hosts, strict=True):
            assert h.host_key == t.host_key and h.address == t.address and h.user == "root"
            assert Path(h.workdir).is_dir() and Path(h.workdir).parent == tmp_path / "work" / h.name
            assert (Path(h.workdir).stat().st_mode & 0o777) == 0o700

        async def work() -> None:
            async with Remote(cluster) as remote:
                src = tmp_path / "payload.txt"
                src.write_text("cloudbench static provider\n")
                for h in cluster.hosts:
                    await remote.put(h, [src], h.workdir)
                    # The command runs on the host: its namespace has exactly its own address.
                    r = await remote.run(h, f"cd {h.workdir} && ip -4 -o addr show dev eth0 && "
                                            "wc -c < payload.txt > size.txt")
                    assert f"inet {h.address}/" in r.stdout
                    got = tmp_path / "pulled" / f"{h.name}.txt"
                    await remote.get(h, f"{h.workdir}/size.txt", got)
                    assert got.read_text().strip() == str(len(src.read_text()))

        asyncio.run(work())
    finally:
        prov.destroy(cluster)
    for h in cluster.hosts:
        assert not Path(h.workdir).exists()  # the work directory, and only it, is gone
        assert (tmp_path / "work" / h.name).is_dir()
    # The hosts themselves are untouched: their sshd still answers.
    from cloudbench.core.netns import connect_in_netns

    for t in testbed.hosts:
        assert t.netns is not None
        connect_in_netns(t.netns, t.address, t.ssh_port, 2.0).close()


@pytest.mark.integration
def test_wrong_host_key_is_refused_and_nothing_is_left(testbed: Cluster, tmp_path: Path) -> None:
    liar = testbed.hosts[1].name
    spec = parse_spec(static_yaml(testbed, tmp_path / "work", host_key={liar: ED25519}), "byo.yaml")
    prov = get_provider("static", spec=spec)
    with pytest.raises(ProvisionError) as info:
        prov.provision(spec.topology(), tmp_path / "run")
    assert liar in str(info.value) and "host key does not match" in str(info.value)
    for h in testbed.hosts:  # hosts that did accept us were cleaned up again
        d = tmp_path / "work" / h.name
        assert not d.exists() or list(d.iterdir()) == []


@pytest.mark.integration
def test_echo_campaign_on_static_hosts(testbed: Cluster, tmp_path: Path) -> None:
    runner_mod = pytest.importorskip("cloudbench.runner")  # needs the echo worker
    spec_file = tmp_path / "byo.yaml"
    spec_file.write_text(static_yaml(testbed, tmp_path / "work"))
    spec = parse_spec(spec_file.read_text(), str(spec_file))
    runner = runner_mod.CampaignRunner(spec, str(spec_file), tmp_path / "results")
    run = runner.execute()
    manifest = json.loads(run.manifest_path.read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert manifest["repetitions"][0]["provider"] == "static"
    trial = manifest["trials"][0]
    assert trial["status"] == "ok" and trial["rows"] >= 3 * 3 * 10  # 3x3 pairs, 20/s for 1 s (+warmup)
    for h in testbed.hosts:
        d = tmp_path / "work" / h.name
        assert list(d.iterdir()) == []  # destroy removed each run's work directory


def test_static_spec_requires_pinned_host_key_and_user(tmp_path: Path) -> None:
    text = textwrap.dedent("""\
        name: byo
        providers:
          static:
            key: ~/.ssh/id_ed25519
            hosts:
              - {name: a, address: 192.0.2.10, user: me, host_key: 'KEY'}
              - {name: b, address: 192.0.2.11, port: 2222}
        workloads: [{kind: echo}]
        """).replace("KEY", ED25519)
    with pytest.raises(SpecError) as info:
        parse_spec(text, "byo.yaml")
    msgs = [str(e) for e in getattr(info.value, "errors", [info.value])]
    assert any("byo.yaml:7" in m and "no `host_key`" in m and "ssh-keyscan -t ed25519 -p 2222 192.0.2.11" in m
               for m in msgs), msgs
    assert any("byo.yaml:7" in m and "no SSH `user`" in m for m in msgs), msgs
    bad = text.replace("{name: b, address: 192.0.2.11, port: 2222}",
                       "{name: a, address: 192.0.2.11, user: me, host_key: 'ssh-ed25519 nonsense'}")
    with pytest.raises(SpecError) as info:
        parse_spec(bad, "byo.yaml")
    msgs = [str(e) for e in getattr(info.value, "errors", [info.value])]
    assert any("duplicate host name 'a'" in m for m in msgs), msgs
    assert any("providers.static.hosts[1].host_key" in m and "not an OpenSSH public key" in m
               for m in msgs), msgs


def test_static_provider_checks_the_key_file(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("not a key")
    key.chmod(0o644)
    text = textwrap.dedent(f"""\
        name: byo
        providers:
          static:
            user: me
            key: {key.name}
            hosts:
              - {{name: a, address: 192.0.2.10, host_key: '{ED25519}'}}
        workloads: [{{kind: echo}}]
        """)
    spec = parse_spec(text, str(tmp_path / "byo.yaml"))
    assert _static(spec).hosts[0].zone == "site-a"
    prov = get_provider("static", spec=spec, spec_path=tmp_path / "byo.yaml")
    with pytest.raises(ProvisionError, match="chmod 600"):
        prov.provision(spec.topology(), tmp_path / "run")
    key.chmod(0o600)
    with pytest.raises(ProvisionError, match="cannot use SSH key"):
        prov.provision(spec.topology(), tmp_path / "run")
